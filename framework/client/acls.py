"""ACLs over the Kafka protocol: CreateAcls (30) over the wire, what ``sftraffic streams grant``
and ``up --secure --cluster`` send, and the spelling ``sftraffic acls`` takes and shows (Kafka's
names: ``Read``, ``DescribeConfigs``, ``User:alice``, ``prefixed``) with the conversions to and
from confluent-kafka's ACL objects. Plain Kafka APIs: they work against Apache Kafka as against
our store.
"""

from __future__ import annotations

from typing import Any

from framework.client.wire import WireClient
from framework.errors import StoreError
from framework.protocol.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from framework.security.authorizer import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    ResourceType,
)

__all__ = [
    "OPERATION_NAMES",
    "create_acls",
    "from_confluent",
    "parse_operation",
    "parse_pattern_type",
    "principal_of",
    "to_confluent",
    "to_confluent_filter",
    "to_json",
]

Op = AclOperation
# Kafka's spelling of the operations kafka-acls takes (AclOperation's camel-case names); the
# delegation-token ones are left out: confluent-kafka cannot send them
OPERATION_NAMES: dict[AclOperation, str] = {
    Op.ALL: "All",
    Op.READ: "Read",
    Op.WRITE: "Write",
    Op.CREATE: "Create",
    Op.DELETE: "Delete",
    Op.ALTER: "Alter",
    Op.DESCRIBE: "Describe",
    Op.CLUSTER_ACTION: "ClusterAction",
    Op.DESCRIBE_CONFIGS: "DescribeConfigs",
    Op.ALTER_CONFIGS: "AlterConfigs",
    Op.IDEMPOTENT_WRITE: "IdempotentWrite",
}


def _fold(text: str) -> str:
    return text.replace("-", "").replace("_", "").lower()


def parse_operation(text: str, resource_type: ResourceType | None = None) -> AclOperation:
    """``Read``, ``READ``, ``describe-configs``, ``DescribeConfigs`` ... as an operation; with
    ``resource_type``, one that type has (Kafka's AclCommand refuses the others)."""
    by_fold = {_fold(name): op for op, name in OPERATION_NAMES.items()}
    op = by_fold.get(_fold(text))
    if op is None:
        raise StoreError(f"--operation {text!r}: one of {', '.join(OPERATION_NAMES.values())}")
    if resource_type is not None and op != Op.ALL and op not in SUPPORTED_OPERATIONS[resource_type]:
        have = ", ".join(
            OPERATION_NAMES[o] for o in SUPPORTED_OPERATIONS[resource_type] if o in OPERATION_NAMES
        )
        raise StoreError(f"--operation {OPERATION_NAMES[op]}: a {resource_type.name} has only All, {have}")
    return op


def parse_pattern_type(text: str, allowed: tuple[PatternType, ...]) -> PatternType:
    try:
        pt = PatternType[text.upper()]
    except KeyError:
        pt = PatternType.UNKNOWN
    if pt not in allowed:
        raise StoreError(
            f"--resource-pattern-type {text!r}: one of {', '.join(p.name.lower() for p in allowed)}"
        )
    return pt


def principal_of(user: str) -> str:
    """``alice`` is ``User:alice``; ``User:alice``, ``User:*`` stay as they are."""
    if not user or user.endswith(":"):
        raise StoreError(f"principal {user!r}: expected TYPE:NAME, e.g. User:alice")
    return user if ":" in user else f"User:{user}"


def _confluent() -> Any:
    """confluent-kafka's admin module, imported when a command asks (its ACL classes untyped)."""
    import confluent_kafka.admin  # noqa: PLC0415

    return confluent_kafka.admin


def to_confluent(b: AclBinding) -> Any:
    """confluent-kafka's AclBinding of ``b`` (the codes are Kafka's on both sides)."""
    ck = _confluent()
    return ck.AclBinding(
        ck.ResourceType(int(b.resource_type)),
        b.name,
        ck.ResourcePatternType(int(b.pattern_type)),
        b.principal,
        b.host,
        ck.AclOperation(int(b.operation)),
        ck.AclPermissionType(int(b.permission)),
    )


def to_confluent_filter(f: AclBindingFilter) -> Any:
    ck = _confluent()
    return ck.AclBindingFilter(
        ck.ResourceType(int(f.resource_type)),
        f.name,
        ck.ResourcePatternType(int(f.pattern_type)),
        f.principal,
        f.host,
        ck.AclOperation(int(f.operation)),
        ck.AclPermissionType(int(f.permission)),
    )


def from_confluent(cb: Any) -> AclBinding:
    return AclBinding.of(
        cb.restype.value,
        cb.name,
        cb.resource_pattern_type.value,
        cb.principal,
        cb.host,
        cb.operation.value,
        cb.permission_type.value,
    )


def to_json(b: AclBinding) -> dict[str, str]:
    """One ACL with DescribeAcls' field names and Kafka's enum names (TOPIC, LITERAL, READ, ALLOW)."""
    return {
        "resource_type": b.resource_type.name,
        "resource_name": b.name,
        "pattern_type": b.pattern_type.name,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name,
        "permission_type": b.permission.name,
    }


def create_acls(client: WireClient, new: list[AclBinding]) -> list[tuple[AclBinding, int, str | None]]:
    """Create ``new`` (an ACL already there stays as it is); the refused ones, each with its
    error code and message, in the order given."""
    creations = [
        AclCreation(
            resource_type=b.resource_type,
            resource_name=b.name,
            resource_pattern_type=b.pattern_type,
            principal=b.principal,
            host=b.host,
            operation=b.operation,
            permission_type=b.permission,
        )
        for b in new
    ]
    resp = client.send(CreateAclsRequest(creations=creations), CreateAclsResponse)
    answers = zip(new, resp.results, strict=True)
    return [(b, r.error_code, r.error_message) for b, r in answers if r.error_code]
