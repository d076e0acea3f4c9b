"""The metadata quorum's journal stays bounded (Raft log compaction into snapshots) and a
restart replays it quickly: a real pysyncobj voter on 127.0.0.1, 10,000 metadata changes."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import asdict
from pathlib import Path

import pytest

from framework import config as cfg
from framework.metadata.quorum import SNAPSHOT_EVERY, ClusterState
from framework.metadata.store import MetadataStore, TopicInfo
from testing import free_port

pytestmark = pytest.mark.integration
CHANGES = 10_000
TOPICS = 20


def voter(data_dir: Path, port: int) -> ClusterState:
    md = MetadataStore(data_dir, cfg.BrokerConfig.load(overrides={}, environ={}))
    md.persist = False
    return ClusterState(
        1, {1: f"127.0.0.1:{port}"}, data_dir / "__cluster", md, 3000, lambda: None, ("h", 1, None)
    )


async def until(predicate: object, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def make_changes(cs: ClusterState) -> None:
    ticker = asyncio.get_running_loop().create_task(cs.run())
    try:
        await until(lambda: cs.replayed and cs.is_controller, 10)
        names = []
        for i in range(TOPICS):
            t = TopicInfo(name=f"t{i}", topic_id=uuid.uuid4().hex, assignments=[[1]])
            assert await cs.propose("change_metadata", "create_topic", asdict(t)) is None
            names.append(t)
        pending = []
        for n in range(CHANGES - TOPICS):
            t = names[n % TOPICS]
            arg = {"name": t.name, "topic_id": t.topic_id, "configs": {"retention.ms": 1000 + n}}
            pending.append(cs.propose("change_metadata", "topic_configs", arg))
            if len(pending) == 500:
                assert all(r is None for r in await asyncio.gather(*pending))
                pending = []
        assert all(r is None for r in await asyncio.gather(*pending))
    finally:
        ticker.cancel()
        cs.destroy()


async def replay(cs: ClusterState) -> float:
    t0 = time.perf_counter()
    ticker = asyncio.get_running_loop().create_task(cs.run())
    try:
        await until(lambda: cs.replayed, 10)
        return time.perf_counter() - t0
    finally:
        ticker.cancel()
        cs.destroy()


def test_ten_thousand_changes_leave_a_small_journal_and_a_fast_restart(tmp_path: Path) -> None:
    port = free_port()
    first = voter(tmp_path, port)
    asyncio.run(make_changes(first))
    before = {name: t.configs for name, t in first.md.topics.items()}
    journal = tmp_path / "__cluster" / "raft.journal"
    snapshot = tmp_path / "__cluster" / "raft.snapshot"
    assert snapshot.exists(), "no snapshot was taken: the journal was never compacted"
    size = journal.stat().st_size + snapshot.stat().st_size
    assert size < 4 * 2**20, f"journal + snapshot {size} bytes after {CHANGES} changes"

    t0 = time.perf_counter()
    second = voter(tmp_path, port)  # loads the snapshot, then the journal after it
    replay_s = time.perf_counter() - t0 + asyncio.run(replay(second))
    assert {name: t.configs for name, t in second.md.topics.items()} == before
    assert replay_s < 2.0, f"restart replay took {replay_s:.2f} s"
    print(
        json.dumps(
            {
                "changes": CHANGES,
                "snapshot_every": SNAPSHOT_EVERY,
                "journal_bytes": journal.stat().st_size,
                "snapshot_bytes": snapshot.stat().st_size,
                "replay_s": round(replay_s, 3),
            }
        )
    )
