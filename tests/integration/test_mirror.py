"""``sftraffic mirror`` between two single-node sftraffic clusters, over TCP.

Records are produced to two topics of the source (keys, headers, timestamps); the mirror runs
as a subprocess, is SIGKILLed while a producer is still writing, and started again; then the
source and the target are compared record by record (nothing lost, order kept, key, value,
headers, timestamp and partition equal; duplicates counted and reported). A consumer group
that read part of a source topic and committed then moves to the target: from the offsets the
mirror checkpointed and committed there (``--sync-group-offsets``) it reads every record it had
not read. Partitions added to a source topic and a topic config are picked up on the way.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from mirror.formats import Checkpoint, Heartbeat
from testing import ManagedProcess, free_port, sftraffic, wait_for
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger
from tests.support.mirror import end_offsets, produce_numbered, read_partition

pytestmark = [pytest.mark.integration, pytest.mark.sftraffic_only(reason="two clusters of its own")]

TOPICS = {"orders": 3, "events": 2}
PER_TOPIC = 6000  # records per topic, half before the mirror starts, half while it is killed


def _mirror(src: str, dst: str, log: Path, *extra: str) -> ManagedProcess:
    cmd = sftraffic(
        "mirror", "--source-bootstrap-server", src, "--target-bootstrap-server", dst,
        "--source-alias", "east",
        "--topics", "orders|events", "--groups", "reader",
        "--commit-interval", "0.2", "--checkpoint-interval", "0.3", "--refresh-interval", "0.5",
        "--heartbeat-interval", "0.5", "--status-interval", "0.2", "--sync-group-offsets", *extra,
    )  # fmt: skip
    return ManagedProcess("mirror", cmd, ready="copying", log=log).start(timeout=30)


def _group_reads_part_at_source(src: str) -> tuple[list[bytes], list[TopicPartition], set[int]]:
    """Group ``reader`` reads 1000 records of orders at the source and commits: what it read,
    its committed offsets and the partitions it committed."""
    g = Consumer(
        {"bootstrap.servers": src, "group.id": "reader", "logger": quiet_logger(),
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    g.subscribe(["orders"])
    read_at_source: list[bytes] = []
    while len(read_at_source) < 1000:
        read_at_source += [m.value() for m in g.consume(1000 - len(read_at_source), 1.0) if m.error() is None]
    g.commit(asynchronous=False)
    at_source = g.committed([TopicPartition("orders", p) for p in range(TOPICS["orders"])], timeout=10)
    committed = {tp.partition for tp in at_source if tp.offset >= 0}
    g.close()
    return read_at_source, at_source, committed


def _kill_mirror_in_second_half(
    src: str, dst: str, log: Path, remote: dict[str, int], half: int
) -> tuple[list[threading.Thread], int]:
    """The mirror copies the first half, then is SIGKILLed while writers produce the second
    half: the writers (still running) and the records at the target when it died."""
    mirror = _mirror(src, dst, log)
    wait_for(lambda: end_offsets(dst, remote) >= half * len(TOPICS), 30, 0.05, "the first half copied")

    # the second half while the mirror runs; SIGKILL it half-way through
    writers = [
        threading.Thread(target=produce_numbered, args=(src, t, half, PER_TOPIC, n, 0.05))
        for t, n in TOPICS.items()
    ]
    for w in writers:
        w.start()
    # killed once it has committed progress during the second half (a kill before its first
    # commit would only copy everything again)
    commits = re.compile(r"copied (\d+) records .* (\d+) commits")

    def committed_some_of_the_second_half() -> bool:
        seen = [(int(a), int(b)) for a, b in commits.findall(mirror.logs())]
        return any(n > half * len(TOPICS) + 500 and c >= 2 for n, c in seen)

    wait_for(committed_some_of_the_second_half, 30, 0.02, "progress committed in the second half")
    mirror.kill()
    killed_at = end_offsets(dst, remote)
    assert killed_at < PER_TOPIC * len(TOPICS), "the writers finished before the kill"
    return writers, killed_at


def _assert_copied_record_by_record(src: str, dst: str) -> int:
    """Nothing lost, order kept, everything equal; the number of duplicates."""
    dupes = 0
    for t, n in TOPICS.items():
        for p in range(n):
            want = read_partition(src, t, p)
            got = read_partition(dst, f"east.{t}", p)
            seen: set[bytes] = set()
            firsts = []
            for m in got:
                if m.value() in seen:
                    dupes += 1
                    continue
                seen.add(m.value())
                firsts.append(m)
            assert [m.value() for m in firsts] == [m.value() for m in want], f"{t}-{p} differs"
            for w_, g_ in zip(want, firsts, strict=True):
                want_meta = (w_.key(), w_.headers(), w_.timestamp())
                assert (g_.key(), g_.headers(), g_.timestamp()) == want_meta
    return dupes


def _assert_topic_configs_follow(a: AdminClient, dst: str) -> None:
    """The topic config is copied, and a change at the source follows (incrementally: the
    target's own settings stay)."""
    res = ConfigResource(ConfigResource.Type.TOPIC, "east.orders")
    da = AdminClient({"bootstrap.servers": dst, "logger": quiet_logger()})
    cfg = da.describe_configs([res])[res].result(30)
    assert cfg["retention.ms"].value == "86400000"
    # a config changed at the source follows (incrementally: the target's own settings stay)
    ev = ConfigResource(ConfigResource.Type.TOPIC, "east.events")
    da.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "east.events", incremental_configs=[
            ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)])]
    )[ev].result(30)  # fmt: skip
    src_ev = ConfigResource(ConfigResource.Type.TOPIC, "events")
    a.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "events", incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)])]
    )[src_ev].result(30)  # fmt: skip

    def events_config() -> tuple[str, str]:
        got = da.describe_configs([ev])[ev].result(30)
        return got["retention.ms"].value, got["min.insync.replicas"].value

    wait_for(lambda: events_config() == ("7200000", "1"), 20, 0.1, "the config change copied")


def _assert_lag_metric_and_heartbeats(metrics: str, dst: str) -> None:
    # the replication lag per partition, for Prometheus
    text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10).read().decode()
    assert 'sftraffic_mirror_records_behind{source="east",topic="events",partition="2"} 0' in text, text
    hbs = [Heartbeat.decode(m.key(), m.value()) for m in read_partition(dst, "heartbeats", 0)]
    assert hbs and {(h.source_alias, h.target_alias) for h in hbs} == {("east", "target")}


def _assert_group_checkpointed(dst: str, committed: set[int], at_source: list[TopicPartition]) -> None:
    """Checkpoints of group reader written in MM2's layout: the remote topic, the group's
    source offset, the translated one."""

    def checkpointed() -> dict[int, int]:
        cps = [
            Checkpoint.decode(m.key(), m.value()) for m in read_partition(dst, "east.checkpoints.internal", 0)
        ]
        return {c.partition: c.downstream for c in cps if c.group == "reader"}

    wait_for(lambda: set(checkpointed()) == committed, 20, 0.1, "checkpoints of group reader")
    # MM2's layout: the remote topic, the group's source offset, the translated one
    cps = [Checkpoint.decode(m.key(), m.value()) for m in read_partition(dst, "east.checkpoints.internal", 0)]
    source_offsets = {tp.partition: tp.offset for tp in at_source if tp.offset >= 0}
    for cp in cps:
        assert cp.topic == "east.orders" and cp.upstream == source_offsets[cp.partition], cp
        assert cp.downstream >= 0, cp


def _group_reads_the_rest_at_target(
    dst: str, committed: set[int], read_at_source: list[bytes]
) -> list[bytes]:
    """From the offsets synced to the target, group reader reads every record it had not read
    (partitions it never committed start from the beginning, there as here)."""
    c = Consumer(
        {"bootstrap.servers": dst, "group.id": "reader", "logger": quiet_logger(),
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip

    def committed_on_target() -> bool:
        tps = c.committed([TopicPartition("east.orders", p) for p in sorted(committed)], timeout=10)
        return all(tp.offset >= 0 for tp in tps)

    wait_for(committed_on_target, 20, 0.1, "group reader's offsets synced to the target")
    c.subscribe(["east.orders"])
    read_at_target: list[bytes] = []
    unread = {f"orders-{i}".encode() for i in range(PER_TOPIC)} - set(read_at_source)
    deadline = time.monotonic() + 30
    while not unread <= set(read_at_target) and time.monotonic() < deadline:
        read_at_target += [m.value() for m in c.consume(2000, 0.5) if m.error() is None]
    c.close()
    missing = unread - set(read_at_target)
    assert not missing, f"{len(missing)} records the group had not read are skipped on the target"
    return read_at_target


def test_mirror_killed_and_restarted_loses_nothing_and_a_group_fails_over(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    src, dst = broker_factory().bootstrap, broker_factory().bootstrap
    create_topic(src, "orders", TOPICS["orders"], config={"retention.ms": "86400000"})
    create_topic(src, "events", TOPICS["events"])
    half = PER_TOPIC // 2
    for t, n in TOPICS.items():
        produce_numbered(src, t, 0, half, n)

    # a group reads part of orders at the source and commits
    read_at_source, at_source, committed = _group_reads_part_at_source(src)

    remote = {f"east.{t}": n for t, n in TOPICS.items()}
    writers, killed_at = _kill_mirror_in_second_half(src, dst, tmp_path / "mirror-1.log", remote, half)
    # partitions added while the mirror is down are found when it comes back
    a = AdminClient({"bootstrap.servers": src, "logger": quiet_logger()})
    a.create_partitions([NewPartitions("events", 3)])["events"].result(30)
    for w in writers:
        w.join(60)
    produce_numbered(src, "events", PER_TOPIC, PER_TOPIC + 300, 3)  # some into the new partition 2
    TOPICS["events"] = 3
    remote["east.events"] = 3

    metrics = f"127.0.0.1:{free_port('127.0.0.1')}"
    mirror = _mirror(src, dst, tmp_path / "mirror-2.log", "--metrics", metrics)
    total = PER_TOPIC * 2 + 300
    try:
        wait_for(lambda: end_offsets(dst, remote) >= total, 40, 0.05, "everything copied after the restart")

        # record by record: nothing lost, order kept, everything equal; duplicates counted
        dupes = _assert_copied_record_by_record(src, dst)
        print(f"mirror killed with {killed_at} records at the target; {total} copied, {dupes} duplicates")

        # topic config copied, heartbeats flowing
        _assert_topic_configs_follow(a, dst)
        _assert_lag_metric_and_heartbeats(metrics, dst)

        # the group fails over: checkpoints written, offsets committed on the target
        _assert_group_checkpointed(dst, committed, at_source)
        read_at_target = _group_reads_the_rest_at_target(dst, committed, read_at_source)
        again = len(set(read_at_target) & set(read_at_source))
        print(
            f"group reader: {len(read_at_source)} read at the source, {len(read_at_target)} at the target, "
            f"{again} of them read again; {time.monotonic() - t0:.1f} s"
        )
    finally:
        assert mirror.stop(grace=20) == 0, mirror.tail()
    assert "progress committed" in mirror.logs()


def test_exactly_once_mirror_killed_and_restarted_shows_each_record_once(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """--exactly-once: copies and progress commit together, so after a SIGKILL the copies made
    since the last commit are aborted (invisible at read_committed) and copied again once."""
    src, dst = broker_factory().bootstrap, broker_factory().bootstrap
    create_topic(src, "orders", 3)
    n = 8000
    produce_numbered(src, "orders", 0, n // 2, 3)
    mirror = _mirror(src, dst, tmp_path / "eos-1.log", "--exactly-once", "--commit-interval", "1")
    writer = threading.Thread(target=produce_numbered, args=(src, "orders", n // 2, n, 3, 0.05))
    writer.start()
    status = re.compile(r"copied (\d+) records .* (\d+) commits")

    def inside_a_transaction() -> bool:
        """Killed with copies in the open transaction: a status line after a commit showing
        more copies than the one right after it."""
        seen = [(int(a), int(b)) for a, b in status.findall(mirror.logs())]
        if not seen or seen[-1][1] < 1 or seen[-1][0] <= n // 2:
            return False
        first_after_commit = next(c for c, k in seen if k == seen[-1][1])
        return seen[-1][0] > first_after_commit

    wait_for(inside_a_transaction, 30, 0.02, "copies made since the last commit")
    mirror.kill()
    writer.join(60)
    mirror = _mirror(src, dst, tmp_path / "eos-2.log", "--exactly-once")
    try:

        def copied() -> list[bytes]:
            return [m.value() for p in range(3) for m in read_partition(dst, "east.orders", p)]

        wait_for(lambda: len(set(copied())) >= n, 40, 0.1, "everything copied after the restart")
        got = copied()
        dupes = [v for v, k in Counter(got).items() if k > 1]
        assert not dupes, f"{len(dupes)} records twice at read_committed, e.g. {dupes[:3]}"
        for p in range(3):
            want = [m.value() for m in read_partition(src, "orders", p)]
            assert [m.value() for m in read_partition(dst, "east.orders", p)] == want, f"orders-{p} differs"
        aborted = sum(len(read_partition(dst, "east.orders", p, "read_uncommitted")) for p in range(3)) - n
        print(f"exactly once: {n} records once each at read_committed; {aborted} aborted copies hidden")
    finally:
        assert mirror.stop(grace=20) == 0, mirror.tail()
