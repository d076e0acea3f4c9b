"""Small admin calls over :class:`WireClient` for tools and applications, and what
DescribeConfigs answers in one shape (:class:`ConfigRow`).

Applications create their streams through :func:`ensure_stream` rather than building
sftraffic's StreamAdmin request themselves, so the protocol stays an implementation detail of
the store and the application keeps working on an Apache Kafka cluster (no streams there).

The calls confluent-kafka's AdminClient lacks are here, each a plain Kafka API, so they work
against Apache Kafka too: DescribeClientQuotas / AlterClientQuotas (:func:`client_quotas`,
:func:`alter_client_quotas`), DescribeQuorum (:func:`describe_quorum`), ApiVersions with its
features (:func:`api_versions`), and DescribeConfigs / IncrementalAlterConfigs of the
cluster-wide broker defaults (resource name "", which confluent-kafka refuses).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from framework.client.security import wire_client
from framework.client.wire import WireClient
from framework.errors import StoreError
from framework.protocol.api import API_TABLE
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasRequestEntityData,
    AlterClientQuotasRequestEntryData,
    AlterClientQuotasResponse,
    OpData,
)
from framework.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from framework.protocol.messages.describe_client_quotas import (
    ComponentData,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from framework.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from framework.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumRequestPartitionData,
    DescribeQuorumRequestTopicData,
    DescribeQuorumResponse,
)
from framework.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse
from framework.protocol.messages.stream_admin import (
    CREATE,
    DESCRIBE,
    StreamAdminRequest,
    StreamAdminResponse,
    StreamConfig,
)


def live_broker_ids(bootstrap: str, timeout: float = 3.0) -> list[int] | None:
    """Broker ids the store's Metadata lists, or None when that broker does not answer."""
    try:
        with wire_client(bootstrap, timeout) as c:
            md = c.send(MetadataRequest(topics=[]), MetadataResponse)
    except (OSError, StoreError):
        return None
    return sorted(b.node_id for b in md.brokers)


def ensure_stream(
    bootstrap: str, name: str, configs: Mapping[str, str], client_id: str = "sftraffic-admin"
) -> bool:
    """Create stream ``name`` unless it exists; False when the store has no streams (Kafka).

    Raises :class:`StoreError` with the store's message when the stream cannot be created. An
    existing stream is looked up first, so a client that may describe it but not create streams
    (a producer with the stream's produce permission) gets True.
    """
    with wire_client(bootstrap, 10, client_id) as w:
        if w.version_for(StreamAdminRequest.API_KEY) is None:
            return False
        found = w.send(StreamAdminRequest(operation=DESCRIBE, names=[name]), StreamAdminResponse).streams
        if found and found[0].error_code == ErrorCode.NONE:
            return True
        req = StreamAdminRequest(
            operation=CREATE, names=[name], configs=[StreamConfig(k, v) for k, v in configs.items()]
        )
        r = w.send(req, StreamAdminResponse).streams[0]
    if r.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):  # exists: fine
        raise StoreError(f"cannot create stream {name}: {r.error_message}", ErrorCode(r.error_code))
    return True


# -- configs -----------------------------------------------------------------------------------
# DescribeConfigs' config_source codes (Kafka's ConfigSource) by the names the CLI shows; our
# broker reports a value inherited from the topic's stream as 3 with a synonym
# "stream:<stream>:<key>", shown as "stream"
SOURCE_NAMES = {
    0: "unknown",
    1: "topic",
    2: "dynamic_broker",
    3: "dynamic_default_broker",
    4: "static_broker",
    5: "default",
    6: "dynamic_broker_logger",
    7: "client_metrics",
    8: "group",
}
STREAM_SOURCE = "stream"
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4  # DescribeConfigs' resource types
SET, DELETE = 0, 1  # IncrementalAlterConfigs' operations


def source_name(code: int, synonyms: Iterable[tuple[str, int]] = ()) -> str:
    """The name of a config source; ``synonyms`` (name, source code) tell a stream's value."""
    if code == 3 and any(n.startswith("stream:") and s == 3 for n, s in synonyms):
        return STREAM_SOURCE
    return SOURCE_NAMES.get(code, "unknown")


@dataclass(frozen=True)
class ConfigRow:
    """One config as DescribeConfigs describes it (Kafka's ConfigEntry); ``synonyms`` are
    (name, value, source name), the most specific first."""

    name: str
    value: str | None
    source: str
    is_sensitive: bool = False
    is_read_only: bool = False
    synonyms: tuple[tuple[str, str | None, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "source": self.source,
            "is_sensitive": self.is_sensitive,
            "is_read_only": self.is_read_only,
            "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in self.synonyms],
        }


def config_rows(entries: Mapping[str, Any]) -> list[ConfigRow]:
    """confluent-kafka's ``describe_configs`` result (name -> ConfigEntry) as rows, by name."""
    out = []
    for name in sorted(entries):
        e = entries[name]
        syn = [(s.name, int(s.source)) for s in e.synonyms.values()]
        out.append(
            ConfigRow(
                name=name,
                value=e.value,
                source=source_name(int(e.source), syn),
                is_sensitive=bool(e.is_sensitive),
                is_read_only=bool(e.is_read_only),
                synonyms=tuple(
                    (s.name, s.value, source_name(int(s.source), [(s.name, int(s.source))]))
                    for s in e.synonyms.values()
                ),
            )
        )
    return out


def describe_configs(w: WireClient, resource_type: int, name: str) -> list[ConfigRow]:
    """DescribeConfigs of one resource over ``w`` (with synonyms), as rows by name."""
    req = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=None)
        ],
        include_synonyms=True,
    )
    (r,) = w.send(req, DescribeConfigsResponse).results
    if r.error_code:
        raise StoreError(r.error_message or ErrorCode(r.error_code).name, ErrorCode(r.error_code))
    rows = []
    for c in sorted(r.configs, key=lambda c: c.name):
        syn = [(s.name, s.source) for s in c.synonyms]
        rows.append(
            ConfigRow(
                c.name,
                c.value,
                source_name(c.config_source, syn),
                c.is_sensitive,
                c.read_only,
                tuple((s.name, s.value, source_name(s.source, [(s.name, s.source)])) for s in c.synonyms),
            )
        )
    return rows


def alter_configs(
    w: WireClient, resource_type: int, name: str, set_: Mapping[str, str], delete: Iterable[str]
) -> None:
    """IncrementalAlterConfigs SET and DELETE of one resource over ``w``."""
    ops = [AlterableConfig(k, SET, v) for k, v in set_.items()] + [
        AlterableConfig(k, DELETE, None) for k in delete
    ]
    req = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=ops)]
    )
    (r,) = w.send(req, IncrementalAlterConfigsResponse).responses
    if r.error_code:
        raise StoreError(r.error_message or ErrorCode(r.error_code).name, ErrorCode(r.error_code))


# -- client quotas -------------------------------------------------------------------------------
USER, CLIENT_ID = "user", "client-id"  # Kafka's quota entity types
EXACT, DEFAULT, SPECIFIED = 0, 1, 2  # DescribeClientQuotas' match types
# an entity: (entity type, name), the name None for the type's default entity (<default>)
Entity = tuple[tuple[str, str | None], ...]


def client_quotas(w: WireClient, entity: Entity, names_given: bool = True) -> dict[Entity, dict[str, float]]:
    """The quotas of ``entity`` (strictly those entity types, as kafka-configs asks); with
    ``names_given`` False, of every entity of those types (the names in ``entity`` ignored)."""
    components = [
        ComponentData(
            entity_type=t,
            match_type=(EXACT if n is not None else DEFAULT) if names_given else SPECIFIED,
            match=n if names_given else None,
        )
        for t, n in entity
    ]
    r = w.send(DescribeClientQuotasRequest(components=components, strict=True), DescribeClientQuotasResponse)
    if r.error_code:
        raise StoreError(r.error_message or ErrorCode(r.error_code).name, ErrorCode(r.error_code))
    order = {USER: 0, CLIENT_ID: 1}  # as Kafka names them: user, then client id (then ip)

    def entity_of(entry: Any) -> Entity:
        parts = sorted(entry.entity, key=lambda e: (order.get(e.entity_type, 2), e.entity_type))
        return tuple((e.entity_type, e.entity_name) for e in parts)

    return {entity_of(entry): {v.key: v.value for v in entry.values} for entry in r.entries or []}


def alter_client_quotas(
    w: WireClient, entity: Entity, set_: Mapping[str, float], remove: Iterable[str]
) -> None:
    """AlterClientQuotas of one entity: set ``set_``, remove the keys of ``remove``."""
    for k, v in set_.items():
        if math.isnan(v) or v <= 0:
            raise StoreError(f"{k}={v}: a quota is a positive number")
    ops = [OpData(key=k, value=v, remove=False) for k, v in set_.items()]
    ops += [OpData(key=k, value=0.0, remove=True) for k in remove]
    req = AlterClientQuotasRequest(
        entries=[
            AlterClientQuotasRequestEntryData(
                entity=[AlterClientQuotasRequestEntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=ops,
            )
        ]
    )
    for e in w.send(req, AlterClientQuotasResponse).entries:
        if e.error_code:
            raise StoreError(e.error_message or ErrorCode(e.error_code).name, ErrorCode(e.error_code))


# -- the cluster ---------------------------------------------------------------------------------
METADATA_TOPIC = "__cluster_metadata"
# the names of Kafka's API keys this store does not serve (Kafka's ApiKeys, 4.x), so that what
# an Apache Kafka broker lists in ApiVersions is named too (the others are in API_TABLE)
OTHER_API_NAMES = {
    34: "AlterReplicaLogDirs", 38: "CreateDelegationToken", 39: "RenewDelegationToken",
    40: "ExpireDelegationToken", 41: "DescribeDelegationToken", 52: "Vote", 53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch", 56: "AlterPartition", 57: "UpdateFeatures", 58: "Envelope",
    59: "FetchSnapshot", 62: "BrokerRegistration", 63: "BrokerHeartbeat", 67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions", 72: "PushTelemetry", 73: "AssignReplicasToDirs",
    74: "ListConfigResources", 76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe", 78: "ShareFetch",
    79: "ShareAcknowledge", 80: "AddRaftVoter", 81: "RemoveRaftVoter", 82: "UpdateRaftVoter",
    83: "InitializeShareGroupState", 84: "ReadShareGroupState", 85: "WriteShareGroupState",
    86: "DeleteShareGroupState", 87: "ReadShareGroupStateSummary", 88: "StreamsGroupHeartbeat",
    89: "StreamsGroupDescribe", 90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets",
    92: "DeleteShareGroupOffsets",
}  # fmt: skip


def api_name(key: int) -> str | None:
    if key in API_TABLE:
        return API_TABLE[key].name
    return OTHER_API_NAMES.get(key)


def describe_quorum(w: WireClient) -> dict[str, Any]:
    """DescribeQuorum of the metadata partition as ``kafka-metadata-quorum describe`` shows it:
    leader, epoch, high watermark, voters and observers with their log end and lag."""
    req = DescribeQuorumRequest(
        topics=[DescribeQuorumRequestTopicData(METADATA_TOPIC, [DescribeQuorumRequestPartitionData(0)])]
    )
    r = w.send(req, DescribeQuorumResponse)
    if r.error_code:
        raise StoreError(r.error_message or ErrorCode(r.error_code).name, ErrorCode(r.error_code))
    p = r.topics[0].partitions[0]
    if p.error_code:
        raise StoreError(p.error_message or ErrorCode(p.error_code).name, ErrorCode(p.error_code))
    leader_end = max(
        (v.log_end_offset for v in p.current_voters if v.replica_id == p.leader_id), default=p.high_watermark
    )

    def replica(v: Any) -> dict[str, Any]:
        return {
            "replica_id": v.replica_id,
            "log_end_offset": v.log_end_offset,
            "lag": max(leader_end - v.log_end_offset, 0) if v.log_end_offset >= 0 else None,
            "last_fetch_timestamp": v.last_fetch_timestamp,
            "last_caught_up_timestamp": v.last_caught_up_timestamp,
        }

    return {
        "leader_id": p.leader_id,
        "leader_epoch": p.leader_epoch,
        "high_watermark": p.high_watermark,
        "voters": [replica(v) for v in p.current_voters],
        "observers": [replica(v) for v in p.observers],
    }


def api_versions(w: WireClient) -> dict[str, Any]:
    """The broker's ApiVersions answer: every API key with its version range (and its name where
    this client knows the key), its supported and finalized features."""
    r = w.send(
        ApiVersionsRequest(client_software_name="sftraffic", client_software_version="1"), ApiVersionsResponse
    )
    if r.error_code:
        raise StoreError(f"ApiVersions: {ErrorCode(r.error_code).name}", ErrorCode(r.error_code))
    return {
        "api_keys": [
            {
                "api_key": k.api_key,
                "name": api_name(k.api_key),
                "min_version": k.min_version,
                "max_version": k.max_version,
            }
            for k in sorted(r.api_keys, key=lambda k: k.api_key)
        ],
        "supported_features": [
            {"name": f.name, "min_version": f.min_version, "max_version": f.max_version}
            for f in r.supported_features
        ],
        "finalized_features_epoch": r.finalized_features_epoch,
        "finalized_features": [
            {
                "name": f.name,
                "min_version_level": f.min_version_level,
                "max_version_level": f.max_version_level,
            }
            for f in r.finalized_features
        ],
    }
