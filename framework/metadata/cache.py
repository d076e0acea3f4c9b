"""What a broker knows of the cluster, for everything that asks "who leads, who is there".

:class:`MetadataCache` is read-only: it answers from the :class:`MetadataStore` (streams,
topics, configs) and, in a cluster, from the :class:`ClusterState` the quorum replicates
(registered brokers, each partition's leader, leader epoch and ISR). Both are changed only by
``MetadataStore.apply`` / the quorum's apply functions, in log order, so the answers of one
broker are those of the metadata log up to the point it has applied.

A single node answers as a cluster of one: it is every partition's leader at leader epoch 0,
with itself as the only in-sync replica.

Thread-safety: event-loop only (the quorum applies changes on the loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from framework.errors import UnknownTopicOrPartition
from framework.metadata.quorum import ClusterState, PartitionState, QuorumStatus
from framework.metadata.store import MetadataStore, StreamInfo, TopicInfo
from framework.security import quotas as client_quotas
from framework.storage.log_config import LogConfig


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


def _endpoint(b: dict[str, Any], listener: str | None) -> tuple[str, int] | None:
    """A registered broker's (host, port) on ``listener`` (None: the registered default, the
    inter-broker listener); None when it has no such listener."""
    listeners = b.get("listeners")
    if listener is None or listeners is None:  # registered before listeners were named
        return str(b["host"]), int(b["port"])
    ep = listeners.get(listener)
    return None if ep is None else (str(ep[0]), int(ep[1]))


class MetadataCache:
    """Brokers are known by listener: each registered the address it advertises on each of its
    listeners (``advertised.listeners``), and a client is told the addresses of the listener it
    connected to, as Kafka does; a broker without that listener is left out."""

    def __init__(
        self,
        node_id: int,
        store: MetadataStore,
        endpoint: tuple[str, int],
        listeners: dict[str, tuple[str, int]] | None = None,
        inter_broker: str = "PLAINTEXT",
    ) -> None:
        self.node_id = node_id
        self.store = store
        self.endpoint = endpoint  # this broker's advertised (host, port) on the inter-broker listener
        self.endpoints = dict(listeners or {inter_broker: endpoint})  # advertised, per listener
        self.inter_broker = inter_broker
        self.quorum: ClusterState | None = None  # set when the broker joins a cluster

    # -- the cluster -----------------------------------------------------------------------
    @property
    def clustered(self) -> bool:
        return self.quorum is not None

    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    @property
    def controller_id(self) -> int:
        """What Metadata calls the controller: this broker.

        Any broker of a cluster takes admin requests and proposes them to the quorum, and
        clients (librdkafka) send admin requests to the "controller" they were told about and
        cache it; naming the Raft leader would send them to a broker that may have just died.
        (KRaft brokers name a random live broker, for the same reason.)
        """
        return self.node_id

    def nodes(self, listener: str | None = None) -> list[Node]:
        """The brokers clients may use, at their addresses on ``listener`` (None: the
        inter-broker one): this one, or every registered, unfenced one that has it."""
        if self.quorum is None:
            own = self.endpoints.get(listener, self.endpoint) if listener else self.endpoint
            return [Node(self.node_id, *own)]
        out = []
        for i, b in sorted(self.quorum.brokers.items()):
            if b["fenced"]:
                continue
            ep = _endpoint(b, listener)
            if ep is not None:
                out.append(Node(i, ep[0], ep[1], b["rack"]))
        return out

    def node(self, node_id: int, listener: str | None = None) -> Node | None:
        """A live broker by id (None when unknown, fenced, or without that listener)."""
        return next((n for n in self.nodes(listener) if n.node_id == node_id), None)

    def registered_endpoint(self, node_id: int) -> tuple[str, int] | None:
        """Where a broker registered its inter-broker listener, fenced or not (replica fetchers
        retry it)."""
        if self.quorum is None:
            return self.endpoint if node_id == self.node_id else None
        b = self.quorum.brokers.get(node_id)
        return None if b is None else _endpoint(b, self.inter_broker)

    def broker_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes()]

    def is_live(self, node_id: int) -> bool:
        return self.quorum.unfenced(node_id) if self.quorum is not None else node_id == self.node_id

    def quorum_status(self) -> QuorumStatus | None:
        """The metadata quorum's Raft state (DescribeQuorum); None on a single node (no quorum)."""
        return None if self.quorum is None else self.quorum.status()

    # -- topics and streams ----------------------------------------------------------------
    @property
    def topics(self) -> dict[str, TopicInfo]:
        return self.store.topics

    @property
    def streams(self) -> dict[str, StreamInfo]:
        return self.store.streams

    def topic(self, name: str) -> TopicInfo:
        """The topic, or UnknownTopicOrPartition."""
        return self.store.topic(name)

    def topic_by_id(self, topic_id: bytes) -> TopicInfo | None:
        return self.store.topics_by_id.get(topic_id)

    def stream_topics(self, name: str) -> list[str]:
        return self.store.stream_topics(name)

    def client_quotas(self) -> dict[client_quotas.Entity, dict[str, float]]:
        """Every client quota entity and its keys (DescribeClientQuotas)."""
        return self.store.quotas

    def client_metrics(self) -> dict[str, dict[str, Any]]:
        """Every client-metrics subscription: name → its configs (DescribeConfigs)."""
        return self.store.client_metrics

    def scram_users(self) -> dict[str, dict[str, int]]:
        """Every SCRAM user: mechanism → iterations (DescribeUserScramCredentials; no keys)."""
        return {u: {m: int(c["iterations"]) for m, c in ms.items()} for u, ms in self.store.scram.items()}

    def broker_config_value(self, name: str) -> tuple[Any, str]:
        """A broker key's value on this broker and its source: "dynamic_broker" (set for this
        broker at run time), "dynamic_default" (for every broker), "broker" (its file), "default"."""
        return self.store.dynamic_broker_value(self.node_id, name)

    def topic_config_values(self, t: TopicInfo) -> dict[str, tuple[Any, str]]:
        """Each topic config's effective value and its source ("topic", "stream", "broker", "default")."""
        return self.store.topic_config_values(t)

    def log_config(self, t: TopicInfo) -> LogConfig:
        """The topic's effective log config: its overrides, then its stream's, then the broker's."""
        values = {k: v for k, (v, _) in self.store.topic_config_values(t).items()}
        return LogConfig.from_values(values)

    # -- partitions ------------------------------------------------------------------------
    def partition_states(self, t: TopicInfo) -> list[PartitionState]:
        """Leader, leader epoch and ISR of each partition of ``t`` the quorum has a state for."""
        if self.quorum is None:
            return [PartitionState(self.node_id, 0, [self.node_id]) for _ in t.assignments]
        return self.quorum.pstates.get(t.name, [])

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        if self.quorum is not None:
            return self.quorum.partition_state(topic, index)
        t = self.store.topics.get(topic)
        if t is None or not 0 <= index < t.partitions:
            return None
        return PartitionState(self.node_id, 0, [self.node_id])

    def leader_node(self, topic: str, index: int, listener: str | None = None) -> Node | None:
        """The live broker leading a partition (None: no such partition, or no leader now)."""
        ps = self.partition_state(topic, index)
        if ps is None or ps.leader < 0:
            return None
        return self.node(ps.leader, listener)

    def partition_count(self, topic: str) -> int:
        t = self.store.topics.get(topic)
        if t is None:
            raise UnknownTopicOrPartition(f"topic {topic!r} does not exist")
        return t.partitions
