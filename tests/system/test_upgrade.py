"""Upgrading from the 0.1.0 release to this version (docs/operate/upgrade.md): nothing is lost.

The release runs from its git tag (``tests/support/release.py``: ``git archive v0.1.0``, its
modules imported instead of the working tree's), this version from the working tree, both with
real confluent-kafka clients over TCP on 127.0.0.1.

* One node: a data dir written by 0.1.0 (a plain topic with its own configs, a topic of a stream
  with a policy, keyed records with headers from an idempotent producer, a consumer group's
  offsets, a committed and an aborted transaction with their offset commits, a SCRAM user added
  with 0.1.0's ``users add --data-dir``) is opened by this version: every acknowledged record is
  there in order with its key, headers and timestamp, and so are the offsets, the transactions'
  outcomes (read_committed), the stream, the configs and the user; the same idempotent producer
  goes on writing. Then the way back: a data dir this version has written to opens in 0.1.0
  with everything of both versions.
* A 3-broker cluster of 0.1.0 rolled to this version one broker at a time (controlled shutdown,
  wait until every partition is back in sync; ``framework.client.roll``, what ``sftraffic
  cluster roll`` runs) under an idempotent acks=all producer of numbered keyed records to an
  RF=3 topic with min.insync.replicas=2: between restarts the cluster runs both versions at
  once (replication, the metadata quorum, the group and transaction coordinators across
  versions). At the end every acknowledged record is in the topic once, in order per partition,
  and a group's offsets committed before the roll are there.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from framework.client.roll import roll
from framework.client.wire import WireClient
from framework.errors import StoreError
from framework.protocol import record_walk
from framework.protocol.messages.stream_admin import (
    ALTER,
    DESCRIBE,
    StreamAdminRequest,
    StreamAdminResponse,
    StreamConfig,
    StreamResult,
)
from testing import BrokerProcess, ClusterProcesses, free_port, sftraffic, wait_for
from tests.support.brokers import TEST_BROKER_SETTINGS, quiet_logger
from tests.support.cluster import OVERRIDES, Traffic, create_topic, read_partitions, settle
from tests.support.release import Release, extract

pytestmark = [
    pytest.mark.system,
    pytest.mark.sftraffic_only(reason="runs the 0.1.0 release's brokers on data dirs of its own"),
]

TAG = "v0.1.0"
STREAM, PLAIN, IN_STREAM, TXN = "plant", "plain", "plant.temps", "txn"
PLAIN_CONFIGS = {"retention.ms": "3600000", "max.message.bytes": "200000", "segment.bytes": "65536"}
STREAM_POLICY = {"retention.ms": "604800000", "num.partitions": "2", "message.timestamp.type": "CreateTime"}
SCRAM = "SCRAM-SHA-256"
USER, PASSWORD = "alice", "alice-secret"
GROUP, TXN_GROUP = "readers", "txn-readers"
# the records' timestamps (CreateTime, given by the producer): recent, within every retention
BASE_TS = int(time.time() * 1000)
# values of 1 kB: the plain topic's 64 kB segments roll (several segments and index entries each)
VALUE_BYTES = 1000
# what a compiled broker logs at start; an extracted release has no .so and runs the pure walk
COMPILED_LINE, PURE_LINE = "record walk compiled", "record walk in pure Python"


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int

    @staticmethod
    def of(m: Any) -> Rec:
        return Rec(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1])


@dataclass
class Written:
    """What a broker acknowledged or was given, to find again under another version."""

    records: dict[str, list[Rec]] = field(default_factory=lambda: defaultdict(list))
    offsets: dict[str, dict[tuple[str, int], tuple[int, str]]] = field(default_factory=dict)
    committed: list[bytes] = field(default_factory=list)  # values of committed transactions
    transactional: list[bytes] = field(default_factory=list)  # committed and aborted, as written
    stream: StreamResult | None = None
    configs: dict[str, dict[str, tuple[str | None, int]]] = field(default_factory=dict)
    users: dict[str, str] = field(default_factory=dict)


# -- clients ------------------------------------------------------------------------------------
def client(bootstrap: str, **conf: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "logger": quiet_logger(), **conf}


def produce_numbered(p: Producer, topic: str, numbers: range, written: Written, tag: str) -> None:
    """Keyed records k<n>/v<n> with headers and a timestamp each; every acknowledged one kept,
    at the partition and offset of its delivery report (which carries no headers)."""
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, m: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            n = int(m.key()[1:])
            written.records[topic].append(
                Rec(m.partition(), m.offset(), m.key(), m.value(), headers(n, tag), m.timestamp()[1])
            )

    for n in numbers:
        p.produce(
            topic,
            key=f"k{n}".encode(),
            value=f"v{n}".encode().ljust(VALUE_BYTES, b"."),
            headers=list(headers(n, tag)),
            timestamp=BASE_TS + n,
            on_delivery=report,
        )
        if n % 25 == 24:  # batches of about 25 kB: the plain topic's segments roll between them
            assert p.flush(60) == 0
    assert p.flush(60) == 0 and not errors, f"undelivered: {errors[:3]}"


def headers(n: int, tag: str) -> tuple[tuple[str, bytes], ...]:
    return (("n", str(n).encode()), ("written-by", tag.encode()))


def read_all(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> list[Rec]:
    """Every record of every partition, each partition read to its end (control records and
    aborted ones are skipped by the client, so the end is the consumer's position)."""
    c = Consumer(client(bootstrap, **{"group.id": f"check-{topic}", "isolation.level": isolation}))
    try:
        parts = sorted(c.list_topics(topic, timeout=15).topics[topic].partitions)
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in parts}
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[Rec] = []

        def at_end() -> bool:
            out.extend(Rec.of(m) for m in c.consume(1000, timeout=0.2) if m.error() is None)
            pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in parts])}
            return all(pos[p] >= ends[p] for p in parts)

        wait_for(at_end, 60, 0, f"{topic} read to its end {ends}")
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        c.close()


def committed_offsets(
    bootstrap: str, group: str, tps: list[tuple[str, int]]
) -> dict[tuple[str, int], tuple[int, str]]:
    c = Consumer(client(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        got = c.committed([TopicPartition(t, p) for t, p in tps], timeout=30)
        return {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in got if tp.offset >= 0}
    finally:
        c.close()


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
    c = Consumer(client(bootstrap, **{"group.id": group, "enable.auto.commit": False}))
    try:
        c.commit(
            offsets=[TopicPartition(t, p, o, metadata=meta) for (t, p), (o, meta) in offsets.items()],
            asynchronous=False,
        )
    finally:
        c.close()


def transactions(bootstrap: str, written: Written, tag: str, offset: int) -> None:
    """One committed and one aborted transaction, each with records and a transactional offset
    commit of group TXN_GROUP (``offset``, and ``offset + 2`` in the aborted one)."""
    tp = Producer(client(bootstrap, **{"transactional.id": "upgrade-txn"}))
    group = Consumer(client(bootstrap, **{"group.id": TXN_GROUP}))
    try:
        meta = group.consumer_group_metadata()
        tp.init_transactions(30)
        for outcome, at in (("committed", offset), ("aborted", offset + 2)):
            tp.begin_transaction()
            values = [f"{tag}-{outcome}-{i}".encode() for i in range(5)]
            for v in values:
                tp.produce(TXN, v, key=b"t")
            assert tp.flush(30) == 0  # in the log before the outcome (an abort drops unsent ones)
            tp.send_offsets_to_transaction([TopicPartition(PLAIN, 0, at)], meta, 30)
            if outcome == "committed":
                tp.commit_transaction(30)
                written.committed += values
                written.offsets[TXN_GROUP] = {(PLAIN, 0): (at, "")}
            else:
                tp.abort_transaction(30)
            written.transactional += values
    finally:
        group.close()


def describe_stream(bootstrap: str) -> StreamResult:
    with WireClient(bootstrap, timeout=10) as w:
        (s,) = w.send(StreamAdminRequest(operation=DESCRIBE, names=[STREAM]), StreamAdminResponse).streams
    assert s.error_code == 0, s
    return s


def topic_configs(bootstrap: str, topic: str) -> dict[str, tuple[str | None, int]]:
    a = AdminClient(client(bootstrap))
    (fut,) = a.describe_configs([ConfigResource("topic", topic)]).values()
    return {k: (e.value, int(e.source)) for k, e in fut.result(30).items()}


def sasl_client(bootstrap: str, user: str, password: str) -> dict[str, Any]:
    return client(
        bootstrap,
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": SCRAM,
            "sasl.username": user,
            "sasl.password": password,
        },
    )


# -- what brokers of both versions share ------------------------------------------------------
# what a mixed cluster and a data dir depend on, as a version declares it (printed as JSON)
INTERFACE = """
import dataclasses, json
from framework import config
from framework.metadata import quorum
from framework.protocol.api import API_TABLE
print(json.dumps({
    "replicated": list(quorum.REPLICATED_METHODS),
    "snapshot_format": quorum.SNAPSHOT_FORMAT,
    "partition_state": [f.name for f in dataclasses.fields(quorum.PartitionState)],
    "apis": {e.name: [e.min_version, e.max_version] for e in API_TABLE.values()},
    "settings": {k.name: [k.type, repr(k.default), sorted(k.scopes)] for k in config.keys()},
}))
"""


def test_this_version_keeps_the_journal_snapshots_apis_and_settings_of_0_1_0(release: Release) -> None:
    old = json.loads(release.python(INTERFACE))
    done = subprocess.run([sys.executable, "-c", INTERFACE], capture_output=True, text=True, check=True)
    new = json.loads(done.stdout)
    # the metadata journal holds (method id, args): ids are positions in REPLICATED_METHODS, so a
    # journal entry (or a 0.1.0 member's proposal) means the same call to both
    assert new["replicated"][: len(old["replicated"])] == old["replicated"]
    # a metadata snapshot written by either version is read by the other
    assert (new["snapshot_format"], new["partition_state"]) == (
        old["snapshot_format"],
        old["partition_state"],
    )
    narrower = {
        name: (lo_hi, new["apis"].get(name))
        for name, lo_hi in old["apis"].items()
        if name not in new["apis"]
        or not (new["apis"][name][0] <= lo_hi[0] and lo_hi[1] <= new["apis"][name][1])
    }
    assert not narrower, f"APIs 0.1.0 serves that this version serves at fewer versions: {narrower}"
    changed = {
        k: (v, new["settings"].get(k)) for k, v in old["settings"].items() if new["settings"].get(k) != v
    }
    assert not changed, f"settings of 0.1.0 gone or changed (type, default, scopes): {changed}"


# -- one node -------------------------------------------------------------------------------
@dataclass
class Node:
    """One broker's data dir and ports, run by either version."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    sasl_port: int = field(default_factory=free_port)
    started: list[BrokerProcess] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def start(self, release: Release | None) -> BrokerProcess:
        """The release's broker, or this version's (None), on the same data dir and ports."""
        overrides = {
            **TEST_BROKER_SETTINGS,
            "listeners": f"PLAINTEXT://{self.bootstrap},SASL_PLAINTEXT://{self.sasl_bootstrap}",
            "sasl.enabled.mechanisms": SCRAM,
        }
        if release is None:
            b = BrokerProcess(self.data_dir, port=self.port, overrides=overrides)
        else:
            b = release.broker(self.data_dir, port=self.port, overrides=overrides)
        self.started.append(b)
        b.start()
        assert_runs(b, release)
        return b

    def stop(self, b: BrokerProcess) -> None:
        assert b.stop() == 0, b.tail()
        assert "stopped cleanly" in b.logs(), b.tail()

    def stop_all(self) -> None:
        for b in self.started:
            b.stop()


def assert_runs(b: BrokerProcess, release: Release | None) -> None:
    """Evidence from the broker's own start lines of the code it runs: an extracted release
    has no compiled record walk; the working tree has one where it was built with a compiler."""
    if release is not None:
        assert PURE_LINE in b.logs(), b.tail()
    elif record_walk.COMPILED:
        assert COMPILED_LINE in b.logs(), b.tail()


@dataclass
class OldDataDir:
    node: Node
    written: Written
    producer: Producer  # the idempotent producer that wrote the records, still open
    spare: Path  # a copy of the data dir as 0.1.0 left it
    spare_written: Written  # and what it holds


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    r = extract(TAG, tmp_path_factory.mktemp("release") / TAG)
    assert r.version == "0.1.0"
    return r


@pytest.fixture(scope="module")
def old_data_dir(release: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OldDataDir]:
    """A data dir written by 0.1.0, its broker stopped cleanly."""
    base = tmp_path_factory.mktemp("v010")
    node = Node(base / "data")
    w = Written()
    added = release.run("users", "add", USER, "--password", PASSWORD, "--data-dir", str(node.data_dir))
    assert added.returncode == 0, added.stderr
    w.users[USER] = PASSWORD
    b = node.start(release)
    try:
        cli = [
            ("topics", "create", PLAIN, "-p", "3", *(f"-c{k}={v}" for k, v in PLAIN_CONFIGS.items())),
            ("streams", "create", STREAM, "--ttl", "7d", "--partitions", "2", "--timestamp-type=CreateTime"),
            ("topics", "create", IN_STREAM),
            ("topics", "create", TXN, "-p", "1"),
        ]
        for args in cli:
            done = release.run(*args, "-b", node.bootstrap)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        p = Producer(client(node.bootstrap, **{"enable.idempotence": True, "linger.ms": 5}))
        produce_numbered(p, PLAIN, range(0, 300), w, "0.1.0")
        produce_numbered(p, IN_STREAM, range(0, 200), w, "0.1.0")
        w.offsets[GROUP] = {(PLAIN, 0): (40, "pos-0"), (PLAIN, 1): (55, "pos-1"), (IN_STREAM, 1): (30, "")}
        commit(node.bootstrap, GROUP, w.offsets[GROUP])
        transactions(node.bootstrap, w, "0.1.0", 7)
        w.stream = describe_stream(node.bootstrap)
        w.configs = {t: topic_configs(node.bootstrap, t) for t in (PLAIN, IN_STREAM)}
        # what was set is what 0.1.0 reports (so that the comparisons later are not vacuous)
        assert {c.name: c.value for c in w.stream.configs if c.source == 0} == STREAM_POLICY
        assert w.stream.topics == [IN_STREAM]
        assert all(w.configs[PLAIN][k][0] == v for k, v in PLAIN_CONFIGS.items())
        assert w.configs[IN_STREAM]["retention.ms"][0] == STREAM_POLICY["retention.ms"]
        assert len({r.partition for r in w.records[PLAIN]}) == 3
        node.stop(b)
        assert (node.data_dir / ".clean-shutdown").exists()
        segments = [len(list((node.data_dir / f"{PLAIN}-{p}").glob("*.log"))) for p in range(3)]
        assert min(segments) > 1, f"segments per partition: {segments}"
        shutil.copytree(node.data_dir, base / "spare")
        yield OldDataDir(node, w, p, base / "spare", copy.deepcopy(w))
    finally:
        node.stop_all()


def found_by_time_and_offset(bootstrap: str, topic: str, acked: list[Rec]) -> None:
    """Each partition's middle record, looked up by its timestamp (the time index) and fetched
    from its offset (the offset index), is that record."""
    middles = []
    for part in sorted({r.partition for r in acked}):
        mine = sorted((r for r in acked if r.partition == part), key=lambda r: r.offset)
        middles.append(mine[len(mine) // 2])
    c = Consumer(client(bootstrap, **{"group.id": f"seek-{topic}", "enable.auto.commit": False}))
    try:
        at = c.offsets_for_times(
            [TopicPartition(topic, r.partition, r.timestamp) for r in middles], timeout=15
        )
        assert [tp.offset for tp in at] == [r.offset for r in middles], topic
        for r in middles:
            c.assign([TopicPartition(topic, r.partition, r.offset)])
            got = c.consume(1, timeout=30)  # returns at the first record
            assert got and got[0].error() is None and Rec.of(got[0]) == r, (topic, r)
    finally:
        c.close()


def can_authenticate(node: Node, user: str, password: str) -> bool:
    try:
        WireClient(node.sasl_bootstrap, timeout=10, sasl=(SCRAM, user, password)).connect().close()
    except StoreError:
        return False
    return True


def check_everything(node: Node, w: Written) -> None:
    """What ``w`` holds is what the broker running at ``node`` serves."""
    for topic, acked in w.records.items():
        assert read_all(node.bootstrap, topic) == sorted(acked, key=lambda r: (r.partition, r.offset)), topic
    found_by_time_and_offset(node.bootstrap, PLAIN, w.records[PLAIN])
    for group, offsets in w.offsets.items():
        assert committed_offsets(node.bootstrap, group, list(offsets)) == offsets, group
    assert [r.value for r in read_all(node.bootstrap, TXN, "read_committed")] == w.committed
    # the aborted records are in the log (read_uncommitted sees them): read_committed skips them
    assert [r.value for r in read_all(node.bootstrap, TXN)] == w.transactional
    assert describe_stream(node.bootstrap) == w.stream
    assert {t: topic_configs(node.bootstrap, t) for t in w.configs} == w.configs
    for user, password in w.users.items():
        md = AdminClient(sasl_client(node.sasl_bootstrap, user, password)).list_topics(timeout=15)
        assert PLAIN in md.topics, user
        assert not can_authenticate(node, user, "wrong"), user


def test_0_2_0_opens_a_0_1_0_data_dir_with_its_records_offsets_transactions_stream_and_users(
    old_data_dir: OldDataDir,
) -> None:
    node, w, p = old_data_dir.node, old_data_dir.written, old_data_dir.producer
    try:
        b = node.start(None)
        assert "no clean-shutdown marker" not in b.logs()  # 0.1.0 stopped cleanly: no log recovery
        check_everything(node, w)
        # 0.1.0's idempotent producer, still open, goes on: its producer id and sequence numbers
        # are known to the new broker (else UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE)
        produce_numbered(p, PLAIN, range(300, 400), w, "0.1.0")
        transactions(node.bootstrap, w, "0.2.0", 17)  # the same transactional.id, epoch bumped
        check_everything(node, w)
        node.stop(b)
    finally:
        node.stop_all()


def test_0_1_0_opens_a_data_dir_that_0_2_0_has_written_to(
    old_data_dir: OldDataDir, release: Release, tmp_path: Path
) -> None:
    """The way back (a downgrade): the formats did not change, so 0.1.0 reads it all."""
    node = Node(tmp_path / "data")
    shutil.copytree(old_data_dir.spare, node.data_dir)
    w = copy.deepcopy(old_data_dir.spare_written)
    try:
        new = node.start(None)
        # this version writes: records, offsets, transactions, a stream policy change, a user
        p = Producer(client(node.bootstrap, **{"enable.idempotence": True, "linger.ms": 5}))
        produce_numbered(p, PLAIN, range(1000, 1100), w, "0.2.0")
        produce_numbered(p, IN_STREAM, range(1000, 1050), w, "0.2.0")
        w.offsets[GROUP] = {**w.offsets[GROUP], (PLAIN, 2): (12, "by-0.2.0")}
        commit(node.bootstrap, GROUP, w.offsets[GROUP])
        transactions(node.bootstrap, w, "0.2.0", 27)
        with WireClient(node.bootstrap, timeout=10) as c:
            altered = c.send(
                StreamAdminRequest(
                    operation=ALTER, names=[STREAM], configs=[StreamConfig("retention.ms", "1209600000")]
                ),
                StreamAdminResponse,
            )
        assert [s.error_code for s in altered.streams] == [0], altered
        bob = subprocess.run(
            [*sftraffic("users", "add", "bob", "--password", "bob-secret"), "-b", node.bootstrap],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert bob.returncode == 0, bob.stderr
        w.users["bob"] = "bob-secret"
        wait_for(lambda: can_authenticate(node, "bob", "bob-secret"), 15, 0.2, "bob's credential")
        w.stream = describe_stream(node.bootstrap)
        w.configs = {t: topic_configs(node.bootstrap, t) for t in (PLAIN, IN_STREAM)}
        assert w.configs[IN_STREAM]["retention.ms"][0] == "1209600000"
        check_everything(node, w)
        node.stop(new)

        old = node.start(release)
        assert "no clean-shutdown marker" not in old.logs()
        check_everything(node, w)
        node.stop(old)
    finally:
        node.stop_all()


# -- a cluster, rolled ----------------------------------------------------------------------
class NumberedTraffic(Traffic):
    """Traffic's idempotent acks=all producer writing numbered keyed records (key k<n>, value
    v<n>), partitioned by key, until stopped; every delivery report kept."""

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(
                    self.topic, f"v{n}".encode(), key=f"k{n}".encode(), on_delivery=self._report
                )
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        assert self.producer.flush(60) == 0


def number(value: bytes) -> int:
    return int(value[1:])


def _restart_as(
    c: ClusterProcesses,
    version: Release | None,
    restarted: list[int],
    during: dict[tuple[str, int], tuple[int, str]],
) -> Callable[[int], None]:
    """Stop a broker (SIGTERM: a controlled shutdown) and start ``version`` (None: this one) on
    its data dir, with the same command line and ports; the restarted ids go to ``restarted``.
    Once brokers of both versions run, in sync, topic ``mixed`` is made and ``during`` committed."""
    by_id = {b.node_id: b for b in c.brokers}

    def restart(node_id: int) -> None:
        if version is None and len(restarted) == 1:  # brokers of both versions, in sync
            create_topic(c.bootstrap, "mixed", partitions=3, config={"min.insync.replicas": "2"})
            settle(c, "mixed", 3)  # acks=all records, then every ISR full on every broker
            commit(c.bootstrap, "mixed-group", during)
        b = by_id[node_id]
        assert b.stop(grace=30) == 0, b.tail()
        assert "controlled shutdown" in b.logs(), b.tail()
        b.env = version.env() if version else {}
        b.start()
        assert_runs(b, version)
        restarted.append(node_id)

    return restart


def _assert_nothing_lost_twice_or_reordered(
    c: ClusterProcesses, topic: str, parts: int, traffic: NumberedTraffic
) -> None:
    records = read_partitions(c.bootstrap, topic, parts)
    got = {(m.partition(), m.offset()): m.value() for m in records}
    assert not traffic.lost(got), traffic.lost(got)
    mine = [m for m in records if m.value() != b"probe"]  # settle()'s records have no key
    twice = [v for v, n in Counter(m.value() for m in mine).items() if n > 1]
    assert not twice, f"written twice: {twice[:5]}"
    assert all(m.key() == b"k" + m.value()[1:] for m in mine)
    for p in range(parts):
        numbers = [number(m.value()) for m in sorted(mine, key=lambda m: m.offset()) if m.partition() == p]
        assert numbers == sorted(numbers), f"partition {p} out of order"


def test_a_0_1_0_cluster_rolled_to_0_2_0_and_back_under_acks_all_traffic_loses_and_repeats_nothing(
    release: Release, tmp_path: Path
) -> None:
    c: ClusterProcesses = release.cluster(tmp_path, 3, overrides=OVERRIDES)
    c.start()
    try:
        topic, parts = "rolled", 3
        create_topic(c.bootstrap, topic, partitions=parts, config={"min.insync.replicas": "2"})
        settle(c, topic, parts)
        # a group's offsets, committed while every broker runs 0.1.0
        before = {(topic, p): (o, f"before-{p}") for p, o in zip(range(parts), (1, 2, 3), strict=True)}
        commit(c.bootstrap, GROUP, before)
        for b in c.brokers:
            assert_runs(b, release)
        during = {(topic, p): (o, "mixed") for p, o in zip(range(parts), (4, 5, 6), strict=True)}
        restarted: list[int] = []
        conf = client(c.bootstrap)
        with NumberedTraffic(c.bootstrap, topic, parts) as traffic:
            wait_for(lambda: len(traffic.acked) > 1000, 30, 0.05, "traffic flowing")
            up = roll(conf, _restart_as(c, None, restarted, during), timeout=120, say=lambda _line: None)
            upgraded = len(traffic.acked)
            wait_for(lambda: len(traffic.acked) > upgraded + 1000, 30, 0.05, "traffic on 0.2.0")
            assert committed_offsets(c.bootstrap, GROUP, list(before)) == before
            down = roll(conf, _restart_as(c, release, restarted, during), timeout=120, say=lambda _line: None)
            seen = len(traffic.acked)
            wait_for(lambda: len(traffic.acked) > seen + 1000, 30, 0.05, "traffic on 0.1.0 again")
        assert sorted(up) == sorted(down) == [1, 2, 3] and restarted == up + down
        assert traffic.failed == [], f"{len(traffic.failed)} writes failed, e.g. {traffic.failed[:3]}"
        _assert_nothing_lost_twice_or_reordered(c, topic, parts, traffic)
        assert committed_offsets(c.bootstrap, GROUP, list(before)) == before
        assert committed_offsets(c.bootstrap, "mixed-group", list(during)) == during
        assert len(read_partitions(c.bootstrap, "mixed", 3)) == 3
        print(
            f"rolled {up} to 0.2.0 under {upgraded} acknowledged writes and {down} back to 0.1.0, "
            f"{len(traffic.acked)} in all: 0 failed, 0 lost, none twice"
        )
    finally:
        c.stop()
