"""``__consumer_offsets`` records (coordinator/offsets_topic.py): Kafka's formats and replay.

The byte layouts are assembled by hand from Kafka's record schemas (OffsetCommitKey v1,
OffsetCommitValue v3, GroupMetadataKey v2, GroupMetadataValue v3) so that a drift from what
Kafka's own tools read shows up here, not in production.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest

from framework.clock import SYSTEM
from framework.coordinator.groups import (
    CommittedOffset,
    Group,
    GroupConfig,
    GroupCoordinator,
    GroupState,
    Member,
)
from framework.coordinator.offsets_topic import (
    TOPIC,
    GroupRecord,
    OffsetRecord,
    OffsetsTopicStore,
    group_key,
    group_value,
    java_string_hash,
    offset_key,
    offset_value,
    parse,
    partition_for,
)
from framework.errors import StoreError
from framework.protocol import records as rb
from framework.protocol.error_codes import ErrorCode as E
from framework.replication.partition import Partition
from framework.storage.log import Log
from framework.storage.log_config import LogConfig
from tests.support.coordinator import FakeScheduler, FakeStore, result, run_async, settle


def s16(v: str | None) -> bytes:
    """A Kafka (non-compact) string: int16 length, UTF-8; -1 for null."""
    if v is None:
        return struct.pack(">h", -1)
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def blob(v: bytes) -> bytes:
    return i32(len(v)) + v


def member(mid: str, instance: str | None = None, meta: bytes = b"sub", assignment: bytes = b"asg") -> Member:
    return Member(
        mid,
        instance,
        "client-1",
        "/10.0.0.7",
        10_000,
        45_000,
        "consumer",
        [("range", meta)],
        assignment=assignment,
    )


def stable_group() -> Group:
    g = Group(
        "payments",
        state=GroupState.STABLE,
        protocol_type="consumer",
        protocol_name="range",
        generation=4,
        leader_id="m1",
        state_ms=1_700_000_000_123,
    )
    g.members = {"m1": member("m1", "i1", b"S1", b"A1"), "m2": member("m2", None, b"S2", b"")}
    return g


# -- byte-exact layouts --------------------------------------------------------------------------


def test_offset_key_layout() -> None:
    assert offset_key("grp", "orders", 7) == i16(1) + s16("grp") + s16("orders") + i32(7)
    assert offset_key("grp", "orders", 7).hex() == "0001" + "0003677270" + "00066f7264657273" + "00000007"


def test_offset_value_layout() -> None:
    v = offset_value(CommittedOffset(42, 5, "meta", 1_700_000_000_000))
    assert v == i16(3) + i64(42) + i32(5) + s16("meta") + i64(1_700_000_000_000)
    assert v.hex() == ("0003" + "000000000000002a" + "00000005" + "00046d657461" + "0000018bcfe56800")


def test_group_key_layout() -> None:
    assert group_key("grp") == bytes.fromhex("0002" + "0003677270")


def test_group_value_layout() -> None:
    expected = (
        i16(3)
        + s16("consumer")
        + i32(4)
        + s16("range")
        + s16("m1")
        + i64(1_700_000_000_123)
        + i32(2)
        # member m1 (static)
        + s16("m1")
        + s16("i1")
        + s16("client-1")
        + s16("/10.0.0.7")
        + i32(45_000)  # rebalance timeout comes before the session timeout
        + i32(10_000)
        + blob(b"S1")
        + blob(b"A1")
        # member m2 (dynamic: null instance id, empty assignment)
        + s16("m2")
        + s16(None)
        + s16("client-1")
        + s16("/10.0.0.7")
        + i32(45_000)
        + i32(10_000)
        + blob(b"S2")
        + blob(b"")
    )
    assert group_value(stable_group()) == expected


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    g = Group("payments", protocol_type="consumer", generation=7, state_ms=5)
    assert group_value(g) == i16(3) + s16("consumer") + i32(7) + s16(None) + s16(None) + i64(5) + i32(0)


# -- round trips ---------------------------------------------------------------------------------


def test_offset_record_round_trip_and_tombstone() -> None:
    o = CommittedOffset(123_456_789_012, 17, "ünïcode metadata", 1_700_000_000_001)
    assert parse(offset_key("g", "t", 3), offset_value(o)) == OffsetRecord("g", "t", 3, o)
    assert parse(offset_key("g", "t", 3), None) == OffsetRecord("g", "t", 3, None)
    empty = CommittedOffset(0, -1, "", 0)
    assert parse(offset_key("", "", 0), offset_value(empty)) == OffsetRecord("", "", 0, empty)


def test_group_record_round_trip_and_tombstone() -> None:
    g = stable_group()
    rec = parse(group_key(g.group_id), group_value(g))
    assert isinstance(rec, GroupRecord)
    assert (rec.group, rec.protocol_type, rec.generation, rec.protocol, rec.leader, rec.state_ms) == (
        "payments",
        "consumer",
        4,
        "range",
        "m1",
        1_700_000_000_123,
    )
    assert rec.members is not None
    got = [
        (
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.session_timeout_ms,
            m.rebalance_timeout_ms,
            m.protocol_type,
            m.protocols,
            m.assignment,
        )
        for m in rec.members
    ]
    assert got == [
        ("m1", "i1", "client-1", "/10.0.0.7", 10_000, 45_000, "consumer", [("range", b"S1")], b"A1"),
        ("m2", None, "client-1", "/10.0.0.7", 10_000, 45_000, "consumer", [("range", b"S2")], b""),
    ]
    assert parse(group_key("payments"), None) == GroupRecord("payments")  # members None: deleted
    empty = parse(group_key("e"), group_value(Group("e", protocol_type="consumer", generation=2)))
    assert isinstance(empty, GroupRecord)
    assert (empty.protocol, empty.leader, empty.members) == (None, None, [])


def test_older_record_versions_written_by_kafka_are_read() -> None:
    key = offset_key("g", "t", 0)
    v1 = i16(1) + i64(10) + s16("m") + i64(111) + i64(999)  # v1: explicit expire timestamp
    assert parse(key, v1) == OffsetRecord("g", "t", 0, CommittedOffset(10, -1, "m", 111))
    v0 = i16(0) + i64(11) + s16("") + i64(222)
    assert parse(key, v0) == OffsetRecord("g", "t", 0, CommittedOffset(11, -1, "", 222))
    key0 = i16(0) + s16("g") + s16("t") + i32(0)  # key v0 has the v1 layout
    assert parse(key0, v0) == OffsetRecord("g", "t", 0, CommittedOffset(11, -1, "", 222))
    # group value v0: no rebalance timeout (it is the session timeout), no timestamp, no instance
    gv0 = (
        i16(0) + s16("consumer") + i32(3) + s16("range") + s16("m1") + i32(1)
        + s16("m1") + s16("c") + s16("/h") + i32(30_000) + blob(b"S") + blob(b"A")
    )  # fmt: skip
    rec = parse(group_key("g"), gv0)
    assert isinstance(rec, GroupRecord) and rec.members is not None
    assert (rec.generation, rec.state_ms) == (3, 0)
    m = rec.members[0]
    assert (m.member_id, m.group_instance_id, m.session_timeout_ms, m.rebalance_timeout_ms) == (
        "m1",
        None,
        30_000,
        30_000,
    )
    assert (m.protocols, m.assignment) == ([("range", b"S")], b"A")
    # v2: rebalance timeout and state timestamp, still no instance id
    gv2 = (
        i16(2) + s16("consumer") + i32(3) + s16("range") + s16("m1") + i64(77) + i32(1)
        + s16("m1") + s16("c") + s16("/h") + i32(60_000) + i32(30_000) + blob(b"S") + blob(b"A")
    )  # fmt: skip
    rec = parse(group_key("g"), gv2)
    assert isinstance(rec, GroupRecord) and rec.members is not None
    assert rec.state_ms == 77
    assert (rec.members[0].rebalance_timeout_ms, rec.members[0].session_timeout_ms) == (60_000, 30_000)


def test_unknown_record_types_are_ignored() -> None:
    # e.g. the consumer-group (KIP-848) records newer Kafka versions write to the same topic
    assert parse(i16(3) + s16("g"), b"\x00\x00whatever") is None
    assert parse(i16(99) + s16("g"), None) is None


# -- group -> partition --------------------------------------------------------------------------


def reference_hash(s: str) -> int:
    """Java's String.hashCode, computed differently: exact integers over UTF-16 code units."""
    data = s.encode("utf-16-be")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    n = len(units)
    h: int = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


@pytest.mark.parametrize(
    ("group", "java_hash", "partition"),
    [
        ("", 0, 0),
        ("a", 97, 47),
        ("hello", 99_162_322, 22),
        ("Aa", 2112, 12),
        ("BB", 2112, 12),  # Java's classic collision
        ("my-group", -1_906_497_762, 12),  # negative: abs() before the modulo
        ("polygenelubricants", -(2**31), 0),  # Integer.MIN_VALUE: Kafka's Utils.abs gives 0
        ("é", 233, 33),
        ("😀", 1_772_899, 49),  # outside the BMP: a surrogate pair, as Java sees it
    ],
)
def test_partition_for_matches_kafka(group: str, java_hash: int, partition: int) -> None:
    assert java_string_hash(group) == java_hash == reference_hash(group)
    assert partition_for(group, 50) == partition


@pytest.mark.parametrize(
    "group", ["console-consumer-12345", "sftraffic-dashboard", "Grüße-✓", "x" * 1000, "\u0000\uffff"]
)
def test_java_hash_agrees_with_a_reference_implementation(group: str) -> None:
    h = java_string_hash(group)
    assert h == reference_hash(group)
    assert -(2**31) <= h < 2**31
    assert 0 <= partition_for(group, 50) < 50
    assert partition_for(group, 1) == 0


# -- replay from real logs -----------------------------------------------------------------------


class FakeBroker:
    """What OffsetsTopicStore needs of the replica manager (``replica``, ``topic_partitions``)
    and of the metadata (the topic's partition count, ``count``)."""

    def __init__(self, root: Path, count: int) -> None:
        cfg = LogConfig(compact=True, delete=False)
        self.partitions: dict[str, list[Partition]] = {
            TOPIC: [
                Partition(
                    TOPIC, i, bytes(16), Log.open(root / f"{TOPIC}-{i}", TOPIC, i, cfg)[0], [0], 0, isr=[0]
                )
                for i in range(count)
            ]
        }

    def count(self) -> int:
        return len(self.partitions[TOPIC])

    def partition(self, topic: str, index: int) -> Partition:
        return self.partitions[topic][index]

    replica = partition

    def topic_partitions(self, topic: str) -> list[Partition] | None:
        return self.partitions.get(topic)

    def append(self, group: str, recs: list[tuple[bytes, bytes | None]]) -> None:
        p = self.partition(TOPIC, partition_for(group, len(self.partitions[TOPIC])))
        p.append_records(memoryview(bytearray(rb.build_batch(recs, timestamp_ms=1))), 1, 1)

    def close(self) -> None:
        for p in self.partitions[TOPIC]:
            p.log.close()


def coordinator(store: Any = None, **config: Any) -> tuple[GroupCoordinator, FakeScheduler]:
    sched = FakeScheduler()
    c = GroupCoordinator(
        sched,
        store if store is not None else FakeStore(),
        GroupConfig(**{"initial_rebalance_delay_ms": 0, **config}),
        sched,
        lambda t, p: t == "orders" and 0 <= p < 4,
    )
    return c, sched


@run_async
async def test_load_into_restores_offsets_and_groups_and_applies_tombstones(tmp_path: Path) -> None:
    broker = FakeBroker(tmp_path, 5)
    try:
        o1, o2, o3 = (
            CommittedOffset(5, 1, "a", 100),
            CommittedOffset(6, 1, "", 101),
            CommittedOffset(9, -1, "", 7),
        )
        g = stable_group()
        broker.append(
            "payments",
            [
                (offset_key("payments", "orders", 0), offset_value(o1)),
                (offset_key("payments", "orders", 1), offset_value(o2)),
                (group_key("payments"), group_value(g)),
            ],
        )
        broker.append("payments", [(offset_key("payments", "orders", 1), None)])  # OffsetDelete
        newer = CommittedOffset(8, 2, "b", 200)
        broker.append("payments", [(offset_key("payments", "orders", 0), offset_value(newer))])
        broker.append("standalone", [(offset_key("standalone", "orders", 2), offset_value(o3))])
        # a group that was deleted: metadata then tombstones
        broker.append("gone", [(group_key("gone"), group_value(Group("gone", protocol_type="consumer")))])
        broker.append("gone", [(offset_key("gone", "orders", 0), offset_value(o1))])
        broker.append("gone", [(offset_key("gone", "orders", 0), None), (group_key("gone"), None)])
        # written but not yet replicated (above the high watermark): not part of the state
        part = broker.partition(TOPIC, partition_for("standalone", 5))
        hw = part.log.high_watermark
        broker.append("standalone", [(offset_key("standalone", "orders", 3), offset_value(o3))])
        part.log.high_watermark = hw

        c, sched = coordinator()
        assert OffsetsTopicStore(broker, broker.count, SYSTEM).load_into(c) == (1, 2)
        assert set(c.groups) == {"payments", "standalone"}
        assert c.fetch_offsets("payments", None) == {("orders", 0): newer}
        assert c.fetch_offsets("standalone", None) == {("orders", 2): o3}
        pg = c.groups["payments"]
        assert (pg.state, pg.generation, pg.protocol_type, pg.protocol_name, pg.leader_id) == (
            GroupState.STABLE,
            4,
            "consumer",
            "range",
            "m1",
        )
        assert pg.static_members == {"i1": "m1"}
        assert c.groups["standalone"].state is GroupState.EMPTY
        # the restored members are live: they sync and heartbeat, and expire if silent
        synced = await result_after_settle(
            asyncio.ensure_future(c.sync("payments", 4, "m1", "i1", None, None, {}))
        )
        assert synced.assignment == b"A1"
        await sched.advance(9.0)
        assert c.heartbeat("payments", 4, "m1", "i1") == 0
        await sched.advance(1.0)  # m2 never came back after the restart
        assert "m2" not in pg.members and pg.state is GroupState.PREPARING_REBALANCE
    finally:
        broker.close()


@run_async
async def test_state_written_through_the_store_survives_a_restart(tmp_path: Path) -> None:
    broker = FakeBroker(tmp_path, 4)
    try:
        store = OffsetsTopicStore(broker, broker.count, SYSTEM)
        c, _ = coordinator(store)
        first = asyncio.ensure_future(
            c.join("app", "", None, "cli", "/h", 10_000, 30_000, "consumer", [("range", b"S")], True)
        )
        mid = (await result_after_settle(first)).member_id
        joined = await result_after_settle(
            asyncio.ensure_future(
                c.join("app", mid, None, "cli", "/h", 10_000, 30_000, "consumer", [("range", b"S")], True)
            )
        )
        assert joined.generation == 1
        synced = await result_after_settle(
            asyncio.ensure_future(c.sync("app", 1, mid, None, None, None, {mid: b"ASG"}))
        )
        assert synced.error == 0
        res = await c.commit("app", 1, mid, None, {("orders", 0): (10, 0, "x"), ("orders", 1): (11, 0, None)})
        assert set(res.values()) == {0}
        assert await c.commit("solo", -1, "", None, {("orders", 2): (3, -1, None)}) == {("orders", 2): 0}
        assert await c.commit("doomed", -1, "", None, {("orders", 3): (4, -1, None)}) == {("orders", 3): 0}
        assert await c.delete_group("doomed") == 0
        await c.delete_offsets("solo", [("orders", 2)])
        await settle()
        # everything for a group lives in its own partition
        for i, p in enumerate(broker.partitions[TOPIC]):
            if i not in {partition_for(x, 4) for x in ("app", "solo", "doomed")}:
                assert p.log.log_end_offset == 0

        c2, _ = coordinator()
        n_groups, n_offsets = store.load_into(c2)
        assert (n_groups, n_offsets) == (1, 2)
        assert set(c2.fetch_offsets("app", None)) == {("orders", 0), ("orders", 1)}
        assert (
            c2.fetch_offsets("app", [("orders", 0)])[("orders", 0)]
            == c.fetch_offsets("app", None)[("orders", 0)]
        )
        assert "doomed" not in c2.groups
        assert c2.fetch_offsets("solo", None) == {}
        g2 = c2.groups["app"]
        assert (g2.state, g2.generation, g2.leader_id, list(g2.members)) == (GroupState.STABLE, 1, mid, [mid])
        assert g2.members[mid].assignment == b"ASG"
        assert c2.heartbeat("app", 1, mid, None) == 0
        assert c2.heartbeat("app", 0, mid, None) == E.ILLEGAL_GENERATION
    finally:
        broker.close()


async def result_after_settle(task: Any) -> Any:
    await settle()
    return await result(task)


@run_async
async def test_transactional_offsets_are_decided_by_the_marker_also_after_a_restart(tmp_path: Path) -> None:
    """TxnOffsetCommit: a transactional batch of the producer in the group's partition; the
    COMMIT marker makes the offsets the group's, an ABORT drops them; replaying the partition
    decides them the same way, and an open transaction's offsets come back pending."""
    from framework.protocol.control import EndTxnMarker

    broker = FakeBroker(tmp_path, 1)
    try:
        store = OffsetsTopicStore(broker, broker.count, SYSTEM)
        c, _ = coordinator(store)
        part = broker.partition(TOPIC, 0)
        assert await c.txn_commit("g", 7, 0, -1, "", None, {("orders", 0): (10, -1, None)}) == {
            ("orders", 0): 0
        }
        assert await c.txn_commit("g", 8, 0, -1, "", None, {("orders", 1): (20, -1, None)}) == {
            ("orders", 1): 0
        }
        assert await c.txn_commit("g", 9, 0, -1, "", None, {("orders", 2): (30, -1, None)}) == {
            ("orders", 2): 0
        }
        assert c.fetch_offsets("g", None) == {}  # nothing visible before a marker
        part.append_txn_marker(EndTxnMarker(8, 0, True, 0), 1)
        await c.complete_txn(8, True, lambda gid: True)
        assert c.fetch_offsets("g", [("orders", 1)])[("orders", 1)].offset == 20  # type: ignore[union-attr]
        # producer 7 fenced: aborted with a bumped epoch; the zombie's next commit is refused
        part.append_txn_marker(EndTxnMarker(7, 1, False, 0), 1)
        await c.complete_txn(7, False, lambda gid: True)
        assert c.fetch_offsets("g", [("orders", 0)])[("orders", 0)] is None
        with pytest.raises(StoreError) as ei:
            await c.txn_commit("g", 7, 0, -1, "", None, {("orders", 0): (99, -1, None)})
        assert ei.value.code == E.INVALID_PRODUCER_EPOCH

        c2, _ = coordinator()
        store.load_into(c2, [(part, part.log_end_offset)])
        assert {tp: o.offset for tp, o in c2.fetch_offsets("g", None).items()} == {("orders", 1): 20}
        assert {pid: {g: set(o) for g, o in by.items()} for pid, by in c2.pending_txn.items()} == {
            9: {"g": {("orders", 2)}}
        }
        part.append_txn_marker(EndTxnMarker(9, 0, True, 0), 1)
        await c2.complete_txn(9, True, lambda gid: True)
        assert c2.fetch_offsets("g", [("orders", 2)])[("orders", 2)].offset == 30  # type: ignore[union-attr]
    finally:
        broker.close()
