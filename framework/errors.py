"""One error root for the store, mapped to Kafka error codes.

Storage, coordinator and handlers raise :class:`StoreError` subclasses, each carrying its
Kafka code and whether a client may retry; the server turns a failure into the code it answers
in one place, :mod:`framework.server.errors`. Anything else escaping a handler is a bug: it is
logged with a traceback and answered with UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode

__all__ = [
    "ClusterAuthorizationFailed",
    "ConfigError",
    "CorruptRecord",
    "CorruptStoredBatch",
    "DuplicateResource",
    "ErrorCode",
    "GroupAuthorizationFailed",
    "IllegalSaslState",
    "InvalidPartitions",
    "InvalidRecord",
    "InvalidReplicationFactor",
    "InvalidRequest",
    "InvalidTimestamp",
    "InvalidTopic",
    "KafkaStorageError",
    "MessageTooLarge",
    "NotEnoughReplicas",
    "NotLeader",
    "OffsetOutOfRange",
    "PolicyViolation",
    "ResourceNotFound",
    "SaslAuthenticationFailed",
    "SecurityDisabled",
    "StoreError",
    "TopicAlreadyExists",
    "TopicAuthorizationFailed",
    "TransactionalIdAuthorizationFailed",
    "UnacceptableCredential",
    "UnknownTopicOrPartition",
    "UnsupportedSaslMechanism",
]


class StoreError(Exception):
    """Base of every error the store reports to a client."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", code: ErrorCode | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message or self.code.description or self.code.name)

    @property
    def retriable(self) -> bool:
        return self.code.retriable

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code.name


class UnknownTopicOrPartition(StoreError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class TopicAlreadyExists(StoreError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidTopic(StoreError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class InvalidPartitions(StoreError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactor(StoreError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class ConfigError(StoreError):
    """A configuration value is unknown or invalid; the message names the key."""

    code = ErrorCode.INVALID_CONFIG


class PolicyViolation(StoreError):
    code = ErrorCode.POLICY_VIOLATION


class InvalidRequest(StoreError):
    code = ErrorCode.INVALID_REQUEST


class InvalidReplicaAssignment(InvalidRequest):
    """A client's replica assignment names an unknown broker, a replica twice, or not exactly
    the partitions it adds (Kafka's InvalidReplicaAssignmentException)."""

    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class CorruptRecord(StoreError):
    code = ErrorCode.CORRUPT_MESSAGE


class CorruptStoredBatch(CorruptRecord):
    """A batch in a segment cannot be read back (damaged on disk, or stored by a broker that
    did not validate records); the message names the segment and the batch's offset."""


class InvalidRecord(StoreError):
    """A produced batch holds records the broker refuses (Kafka's InvalidRecordException):
    malformed records in a CRC-valid batch, or records refused one by one (KIP-467).

    ``record_errors`` lists (index of the record in its batch, why) for the latter; the
    produce handler returns them in ``record_errors``. The whole batch is refused.
    """

    code = ErrorCode.INVALID_RECORD

    def __init__(
        self,
        message: str = "",
        code: ErrorCode | None = None,
        record_errors: list[tuple[int, str]] | None = None,
    ) -> None:
        super().__init__(message, code)
        self.record_errors: list[tuple[int, str]] = list(record_errors or [])


class InvalidTimestamp(InvalidRecord):
    """A record's timestamp is outside message.timestamp.before/after.max.ms, or the producer
    set the LogAppendTime type."""

    code = ErrorCode.INVALID_TIMESTAMP


class MessageTooLarge(StoreError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class OffsetOutOfRange(StoreError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class OffsetNotAvailable(StoreError):
    """A leader elected a moment ago has not learnt the high watermark yet (ListOffsets)."""

    code = ErrorCode.OFFSET_NOT_AVAILABLE


class NotLeader(StoreError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class NotEnoughReplicas(StoreError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS


# -- authorization: the principal may not do this (an ACL, or the lack of one) --------------------
class TopicAuthorizationFailed(StoreError):
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailed(StoreError):
    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailed(StoreError):
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class TransactionalIdAuthorizationFailed(StoreError):
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class SecurityDisabled(StoreError):
    """An ACL request to a broker without an authorizer (authorizer.class.name empty)."""

    code = ErrorCode.SECURITY_DISABLED


class KafkaStorageError(StoreError):
    """The disk refused a write or read (full disk, I/O error); the log is left intact."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


# -- authentication: SASL and SCRAM credentials --------------------------------------------------
class SaslAuthenticationFailed(StoreError):
    """Wrong password, unknown user, bad proof: one code and one message for all of them, so a
    client learns nothing about which it was."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class IllegalSaslState(StoreError):
    """A SASL request out of order (SaslAuthenticate before SaslHandshake, a handshake on a
    listener without SASL)."""

    code = ErrorCode.ILLEGAL_SASL_STATE


class UnsupportedSaslMechanism(StoreError):
    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class UnacceptableCredential(StoreError):
    """A SCRAM credential the broker refuses (iterations out of range, empty user name)."""

    code = ErrorCode.UNACCEPTABLE_CREDENTIAL


class ResourceNotFound(StoreError):
    code = ErrorCode.RESOURCE_NOT_FOUND


class DuplicateResource(StoreError):
    code = ErrorCode.DUPLICATE_RESOURCE
