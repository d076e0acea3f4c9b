"""The cluster metadata's replicated state without Raft: a ClusterState whose commands are applied
as pysyncobj applies a committed entry (:class:`Replica`)."""

from __future__ import annotations

import uuid
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from framework import config as cfg
from framework.metadata.pysyncobj_adapter import SyncObjInternals
from framework.metadata.quorum import ClusterState, PartitionState
from framework.metadata.store import MetadataStore, TopicInfo


class Replica:
    """A ClusterState's replicated state, with its apply functions called as Raft would."""

    def __init__(self, data_dir: Path) -> None:
        md = MetadataStore(data_dir, cfg.BrokerConfig.load(overrides={}, environ={}))
        md.persist = False  # cluster mode: the journal is the state
        cs = ClusterState.__new__(ClusterState)
        cs.node_id = 1
        cs.md = md
        cs.cluster_id = ""
        cs.brokers = {}
        cs.pstates = {}
        cs.version = 0
        # not replicated: the static voters and the controller's own view of heartbeats
        cs.voters = {n: f"127.0.0.1:{19000 + n}" for n in (1, 2, 3)}
        cs.session_timeout = 2.0
        cs._heartbeats = {}
        cs._fencing = set()
        cs._raft = SyncObjInternals(cs)  # pysyncobj's private state (method ids) goes through it
        self.changes = 0

        def changed() -> None:
            self.changes += 1

        cs.on_change = changed
        self.cs = cs

    def apply(self, method: str, *args: Any) -> Any:
        return getattr(self.cs, method)(*args, _doApply=True)

    # the commands, as brokers propose them
    def register(self, *nodes: int) -> None:
        for n in nodes:
            self.apply("register_broker", n, "127.0.0.1", 9000 + n, None)

    def fence(self, node: int) -> None:
        self.apply("fence_broker", node)

    def create_topic(self, name: str, assignments: list[list[int]]) -> Any:
        t = TopicInfo(name=name, topic_id=uuid.uuid4().hex, assignments=assignments)
        return self.apply("change_metadata", "create_topic", asdict(t))

    def alter_isr(
        self,
        isr: list[int],
        *,
        topic: str = "t",
        index: int = 0,
        leader: int | None = None,
        leader_epoch: int | None = None,
        partition_epoch: int | None = None,
    ) -> int:
        """AlterPartition from the current leader at the current epochs unless told otherwise."""
        ps = self.ps(topic, index)
        return int(
            self.apply(
                "alter_isr",
                topic,
                index,
                ps.leader if leader is None else leader,
                ps.leader_epoch if leader_epoch is None else leader_epoch,
                ps.partition_epoch if partition_epoch is None else partition_epoch,
                isr,
            )
        )

    def ps(self, topic: str = "t", index: int = 0) -> PartitionState:
        ps = self.cs.partition_state(topic, index)
        assert ps is not None
        return ps

    def snapshot(self, topic: str = "t", index: int = 0) -> PartitionState:
        ps = self.ps(topic, index)
        return replace(ps, isr=list(ps.isr))
