"""A 3-broker replicated cluster with real clients: failover without loss, min.insync.replicas,
group coordinator and controller failover, admin through any broker, a second client library.

One cluster is shared by the module. The tests that leave it alone run first; the ones that
kill or stop brokers leave them down, and the ``cluster`` fixture restarts every broker that is
not running and waits until all three are registered and every partition has its full ISR
before the next test starts, so each test begins with a healthy cluster. Leadership is not
rebalanced after a restart (no preferred leader election), so tests find the broker they act on
through Metadata instead of assuming it.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import NewTopic

from framework.client.wire import WireClient
from framework.coordinator.offsets_topic import TOPIC as OFFSETS_TOPIC
from framework.coordinator.offsets_topic import partition_for
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.delete_topics import (
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)
from framework.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse
from testing import ClusterProcesses, wait_for
from tests.support.brokers import ARTIFACTS, quiet_logger
from tests.support.cluster import (
    OVERRIDES,
    admin,
    bootstrap_of,
    create_raw,
    create_topic,
    delivery_of,
    full_isr,
    healthy,
    led_view,
    metadata_of,
    partitions_of,
    read_partitions,
    running,
    settle,
)

pytestmark = pytest.mark.integration


# -- the cluster -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    cl = ClusterProcesses(tmp_path_factory.mktemp("cluster"), size=3, overrides=OVERRIDES)
    cl.start()
    yield cl
    cl.stop()


@pytest.fixture
def cluster(shared_cluster: ClusterProcesses, request: pytest.FixtureRequest) -> Iterator[ClusterProcesses]:
    """The shared cluster, healed: all brokers running, registered, every ISR full."""
    for b in shared_cluster.brokers:
        if b.proc is None or b.proc.poll() is not None:
            b.start()
    wait_for(lambda: healthy(shared_cluster), 60, 0.2, "a healthy cluster (3 brokers, full ISRs)")
    yield shared_cluster
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"{request.node.name}-cluster.log").write_text(shared_cluster.logs())


@pytest.fixture
def name() -> Callable[[str], str]:
    return lambda prefix: f"{prefix}-{time.monotonic_ns() % 10**9}"


# -- admin through any broker (non-destructive) -----------------------------------------------
def test_admin_requests_work_through_any_broker(
    cluster: ClusterProcesses, name: Callable[[str], str]
) -> None:
    controller = metadata_of(cluster.brokers[0]).controller_id
    via_create, via_delete = [b for b in cluster.brokers if b.node_id != controller]
    topic = name("anyadmin")

    # created through a broker that is not the controller: every broker lists it, led
    assert create_raw(via_create, topic, 3, 3, **{"min.insync.replicas": "2"}) == 0
    for b in cluster.brokers:
        assert len(led_view(b, topic)) == 3
    settle(cluster, topic, 3)

    # a client bootstrapped at another broker describes replicas and ISR
    a = admin(via_delete.bootstrap)
    desc = a.describe_topics(TopicCollection([topic]))[topic].result(15)
    assert len(desc.partitions) == 3
    for p in desc.partitions:
        replicas = sorted(r.id for r in p.replicas)
        assert replicas == [1, 2, 3]
        assert sorted(r.id for r in p.isr) == replicas
        assert p.leader is not None and p.leader.id in replicas
    md = a.list_topics(topic, timeout=10)
    isrs = {p.id: sorted(p.isrs) for p in md.topics[topic].partitions.values()}
    assert isrs == {i: [1, 2, 3] for i in range(3)}

    # deleted through the other non-controller broker: gone everywhere
    with WireClient(via_delete.bootstrap, timeout=20) as c:
        dresp = c.send(
            DeleteTopicsRequest(
                topics=[DeleteTopicState(name=topic)], topic_names=[topic], timeout_ms=15_000
            ),
            DeleteTopicsResponse,
        )
    assert [(t.name, t.error_code) for t in dresp.responses] == [(topic, 0)], dresp
    for b in cluster.brokers:
        wait_for(
            lambda b=b: partitions_of(b, topic) is None, 10, 0.05, f"{topic} gone from broker {b.node_id}"
        )

    # replication factor above the broker count: a clear error, at once, and nothing created
    bad = name("rf4")
    t0 = time.monotonic()
    with pytest.raises(KafkaException) as exc:
        a.create_topics([NewTopic(bad, num_partitions=1, replication_factor=4)])[bad].result(20)
    assert exc.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR, exc.value
    assert time.monotonic() - t0 < 5
    assert create_raw(via_create, bad, 1, 4) == ErrorCode.INVALID_REPLICATION_FACTOR
    assert all(partitions_of(b, bad) is None for b in cluster.brokers)


# -- another client library (non-destructive) -------------------------------------------------
def test_every_port_of_a_broker_is_bound_to_its_configured_address(cluster: ClusterProcesses) -> None:
    """The Kafka listener and the metadata quorum's (Raft) port listen on 127.0.0.1, as
    configured, not on every interface (pysyncobj's default)."""
    import psutil

    for b in cluster.brokers:
        assert b.proc is not None
        bound = {
            (c.laddr.ip, c.laddr.port)
            for c in psutil.Process(b.proc.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        }
        assert len(bound) >= 2 and {ip for ip, _port in bound} == {"127.0.0.1"}, bound


def test_kafka_python_acks_all_round_trip(cluster: ClusterProcesses, name: Callable[[str], str]) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    topic = name("kpy")
    create_topic(cluster.bootstrap, topic, 3, 3, {"min.insync.replicas": "2"})
    for b in cluster.brokers:
        led_view(b, topic)
    servers = [b.bootstrap for b in cluster.brokers]
    prod = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=5)
    try:
        futs = [prod.send(topic, key=b"k%d" % (i % 7), value=b"%d" % i) for i in range(600)]
        prod.flush(30)
        where = {i: f.get(timeout=30) for i, f in enumerate(futs)}
    finally:
        prod.close(10)
    assert {md.partition for md in where.values()} == {0, 1, 2}

    cons = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    try:
        cons.assign([KTopicPartition(topic, p) for p in range(3)])
        cons.seek_to_beginning()
        got: dict[int, tuple[int, int, bytes | None]] = {}
        deadline = time.monotonic() + 30
        while len(got) < 600 and time.monotonic() < deadline:
            for recs in cons.poll(timeout_ms=500).values():
                for r in recs:
                    got[int(r.value)] = (r.partition, r.offset, r.key)
    finally:
        cons.close()
    assert sorted(got) == list(range(600))
    for i, md in where.items():
        assert got[i] == (md.partition, md.offset, b"k%d" % (i % 7))


# -- the ISR of a healthy cluster (non-destructive) -------------------------------------------
def test_new_topics_keep_their_full_isr_while_every_broker_is_healthy(
    cluster: ClusterProcesses, name: Callable[[str], str]
) -> None:
    """No broker is down or slow, so no follower may leave an ISR: a follower is out of sync
    only after not catching up for replica.lag.time.max.ms (3 s here). A leader that drops the
    followers it has not heard from yet right after it became leader makes acks=all writes fail
    with NOT_ENOUGH_REPLICAS under min.insync.replicas=2, and if it dies before they are back,
    the partition has no eligible leader left.

    Topics are created one after another (each is a new chance for a leader's ISR check to run
    before a follower's first fetch) and every broker's Metadata is watched meanwhile."""
    a = admin(cluster.bootstrap)
    topics: list[str] = []
    shrunk: dict[tuple[str, int], tuple[list[int], float]] = {}  # first short ISR, s after create
    created: dict[str, float] = {}
    start = time.monotonic()
    next_create = start
    # 10 topics, 0.4 s apart, then past the last leaders' first ISR checks (every lag / 2)
    while time.monotonic() - start < 4.0 + 2.0:
        if len(topics) < 10 and time.monotonic() >= next_create:
            t = name(f"isr{len(topics)}")
            a.create_topics([NewTopic(t, 3, 3, config={"min.insync.replicas": "2"})])[t].result(15)
            topics.append(t)
            created[t] = time.monotonic()
            next_create += 0.4
        for b in cluster.brokers:
            md = metadata_of(b)
            for tm in md.topics:
                if tm.name not in created:
                    continue
                for pm in tm.partitions:
                    if sorted(pm.isr_nodes) != sorted(pm.replica_nodes):
                        age = round(time.monotonic() - created[tm.name], 2)
                        shrunk.setdefault((tm.name, pm.partition_index), (pm.isr_nodes, age))
    assert len(topics) == 10
    assert shrunk == {}, (
        f"{len(shrunk)} of {3 * len(topics)} new partitions lost followers from their ISR on a "
        f"healthy cluster, (topic, partition): (ISR, seconds after creation): {shrunk}"
    )


# -- leader SIGKILL under an idempotent acks=all producer ------------------------------------
def _produce_killing_the_leader(
    bootstrap: str, topic: str, n: int, victim: Any
) -> dict[int, tuple[int, int | None]]:
    """Produce ``n`` numbered messages, SIGKILL ``victim`` halfway while some are acknowledged
    and some are not; every message is acknowledged in the end. Value -> (partition, offset)."""
    acked: dict[int, tuple[int, int | None]] = {}  # value -> (partition, offset)
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[int(msg.value())] = (msg.partition(), msg.offset())

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60_000,
            "logger": quiet_logger(),
        }
    )
    acked_at_kill = produced_at_kill = -1
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"k%d" % (i % 101), value=b"%d" % i, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        if i == n // 2:
            while len(acked) < 1000:  # partway: some acknowledged
                p.poll(0.001)
        # and some not (queued or in flight: on a quiet machine the producer may have caught up
        # with every message at that point; then the next one is): the leader dies
        if acked_at_kill < 0 and i >= n // 2 and len(acked) < i + 1:
            victim.kill()
            acked_at_kill, produced_at_kill = len(acked), i + 1
    assert p.flush(90) == 0, "messages still undelivered"
    assert 0 < acked_at_kill < produced_at_kill, "nothing was in flight when the leader was killed"
    assert errors == [], errors[:3]
    assert len(acked) == n
    return acked


def _assert_every_ack_once_in_key_order(msgs: list[Any], acked: dict[int, tuple[int, int | None]]) -> None:
    """Every acknowledged message is in ``msgs`` exactly once, where its ack said, in key order."""
    values = [int(m.value()) for m in msgs]
    dups = [v for v, c in Counter(values).items() if c > 1]
    assert dups == [], f"{len(dups)} duplicated, e.g. {dups[:5]}"
    assert set(values) == set(acked), f"{len(set(acked) - set(values))} acknowledged messages lost"
    # where its ack said; an ack without an offset (librdkafka's implicit ack, see Traffic.lost)
    # names only the partition
    assert all(acked[int(m.value())] in ((m.partition(), m.offset()), (m.partition(), None)) for m in msgs)
    by_key: dict[tuple[int, bytes], list[tuple[int, int]]] = defaultdict(list)
    for m in msgs:
        by_key[(m.partition(), m.key())].append((m.offset(), int(m.value())))
    for (part, key), seq in by_key.items():
        in_log_order = [v for _o, v in sorted(seq)]
        assert in_log_order == sorted(in_log_order), f"key {key!r} reordered in partition {part}"
    assert len({k for _p, k in by_key}) == len(by_key), "a key was written to two partitions"


def _assert_restarted_victim_rejoins_keeping_every_ack(
    survivors: list[Any], victim: Any, topic: str, msgs: list[Any]
) -> None:
    """The restarted broker catches up and rejoins every ISR; nothing acknowledged is taken back."""
    highs = {part: 0 for part in range(3)}
    for m in msgs:
        highs[m.partition()] = max(highs[m.partition()], m.offset() + 1)
    victim.start()

    def rejoined() -> bool:  # as the leaders say (see test_a_restarted_broker_...)
        view = partitions_of(survivors[0], topic)
        return view is not None and all(victim.node_id in isr for _l, _r, isr in view.values())

    wait_for(rejoined, 30, 0.1, f"broker {victim.node_id} back in the ISRs of {topic}")
    c = Consumer({"bootstrap.servers": bootstrap_of(survivors), "group.id": "hw", "logger": quiet_logger()})
    try:
        for part, high in highs.items():
            assert c.get_watermark_offsets(TopicPartition(topic, part), timeout=10) == (0, high)
    finally:
        c.close()


def test_acks_all_idempotent_producer_loses_nothing_when_the_leader_is_sigkilled(
    cluster: ClusterProcesses, name: Callable[[str], str]
) -> None:
    topic = name("failover")
    create_topic(cluster.bootstrap, topic, 3, 3, {"min.insync.replicas": "2"})
    before = led_view(cluster.brokers[0], topic)
    victim = cluster.brokers[before[0][0] - 1]  # leads partition 0
    survivors = [b for b in cluster.brokers if b is not victim]

    acked = _produce_killing_the_leader(cluster.bootstrap, topic, 30_000, victim)

    # Metadata: new leaders, the dead broker out of every ISR and off the broker list
    def failed_over() -> bool:
        view = partitions_of(survivors[0], topic)
        return view is not None and all(
            leader not in (-1, victim.node_id) and victim.node_id not in isr
            for leader, _r, isr in view.values()
        )

    wait_for(failed_over, 20, 0.1, f"broker {victim.node_id} out of the ISRs of {topic}")
    assert victim.node_id not in [b.node_id for b in metadata_of(survivors[0]).brokers]

    # every acknowledged message is there exactly once, where its ack said, in key order
    msgs = read_partitions(bootstrap_of(survivors), topic, 3)
    _assert_every_ack_once_in_key_order(msgs, acked)

    # the restarted broker catches up and rejoins every ISR; nothing acknowledged is taken back
    _assert_restarted_victim_rejoins_keeping_every_ack(survivors, victim, topic, msgs)


# -- a restarted broker's view ---------------------------------------------------------------
def test_a_restarted_broker_serves_no_stale_metadata_while_it_catches_up(
    cluster: ClusterProcesses, name: Callable[[str], str]
) -> None:
    """From the moment a restarted broker accepts connections, what it tells clients must be
    the cluster's current state: every existing topic is listed, and it leads nothing (its
    partitions moved to other brokers when it was fenced, and a restarted broker registers
    before it leads anything). Answering from a half-replayed metadata journal sends clients
    to it for partitions it does not serve (UNKNOWN_TOPIC_OR_PARTITION from ListOffsets)."""
    topic = name("restart")
    create_topic(cluster.bootstrap, topic, 3, 3)
    settle(cluster, topic, 3)
    victim = cluster.brokers[led_view(cluster.brokers[0], topic)[0][0] - 1]  # leads partition 0
    survivors = [b for b in cluster.brokers if b is not victim]
    victim.kill()

    def moved() -> bool:
        view = partitions_of(survivors[0], topic)
        return view is not None and all(
            leader not in (-1, victim.node_id) and victim.node_id not in isr
            for leader, _r, isr in view.values()
        )

    wait_for(moved, 20, 0.05, f"partitions of {topic} moved off broker {victim.node_id}")

    victim.start()  # returns once it listens
    t0 = time.monotonic()
    stale: list[tuple[float, str]] = []
    answers = 0

    def rejoined() -> bool:
        view = partitions_of(survivors[0], topic)
        return view is not None and all(victim.node_id in isr for _l, _r, isr in view.values())

    while not rejoined() and time.monotonic() - t0 < 20:
        age = round(time.monotonic() - t0, 2)
        with WireClient(victim.bootstrap, timeout=5) as c:
            md = c.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), MetadataResponse)
            lo = c.send(
                ListOffsetsRequest(
                    replica_id=-1,
                    topics=[
                        ListOffsetsTopic(
                            name=topic,
                            partitions=[
                                ListOffsetsPartition(partition_index=i, timestamp=-1) for i in range(3)
                            ],
                        )
                    ],
                ),
                ListOffsetsResponse,
            )
        answers += 1
        tm = next((t for t in md.topics if t.name == topic), None)
        if tm is None:
            stale.append((age, "Metadata does not list the topic"))
        else:
            mine = [p.partition_index for p in tm.partitions if p.leader_id == victim.node_id]
            if mine:
                stale.append((age, f"Metadata names it leader of partitions {mine}"))
        unknown = [p.partition_index for t in lo.topics for p in t.partitions if p.error_code == 3]
        if unknown:
            stale.append((age, f"ListOffsets: UNKNOWN_TOPIC_OR_PARTITION for partitions {unknown}"))
    assert rejoined(), f"broker {victim.node_id} did not rejoin the ISRs of {topic}"
    assert answers > 0
    assert stale == [], f"broker {victim.node_id}, seconds after it listened: {stale[:8]}"


# -- min.insync.replicas ----------------------------------------------------------------------
def test_min_insync_replicas_refuses_acks_all_but_not_acks_1(
    cluster: ClusterProcesses, name: Callable[[str], str]
) -> None:
    topic, pair = name("misr"), name("misr-pair")
    create_topic(cluster.bootstrap, topic, 3, 3, {"min.insync.replicas": "2"})
    view = led_view(cluster.brokers[0], topic)
    survivor = cluster.brokers[view[0][0] - 1]  # leads partition 0, stays up
    first, second = [b for b in cluster.brokers if b is not survivor]
    # two replicas only: the survivor and the first broker to go
    a = admin(cluster.bootstrap)
    fut = a.create_topics(
        [
            NewTopic(
                pair,
                num_partitions=1,
                replica_assignment=[[survivor.node_id, first.node_id]],
                config={"min.insync.replicas": "2"},
            )
        ]
    )
    fut[pair].result(30)
    led_view(survivor, pair)
    settle(cluster, topic, 3)
    settle(cluster, pair, 1)
    fast_fail = {"retries": 0, "message.timeout.ms": 4000, "request.timeout.ms": 3000}
    boot = survivor.bootstrap

    # one of three down and fenced: two in-sync replicas still satisfy min.insync.replicas=2,
    # but the two-replica topic is down to one
    first.stop()

    def fenced_first() -> bool:
        md = metadata_of(survivor)
        return first.node_id not in [x.node_id for x in md.brokers] and all(
            first.node_id not in p.isr_nodes for t in md.topics for p in t.partitions
        )

    wait_for(fenced_first, 20, 0.1, f"broker {first.node_id} fenced")
    assert delivery_of(boot, topic, 0, acks="all", **fast_fail) is None
    err = delivery_of(boot, pair, 0, acks="all", **fast_fail)
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
    assert delivery_of(boot, pair, 0, acks="1", **fast_fail) is None

    # two of three down: the metadata quorum is lost with them, so the second broker can be
    # neither fenced nor dropped from the ISR (as in Kafka, an ISR change needs the quorum);
    # an acks=all write to the survivor is not acknowledged (it times out waiting for the
    # ISR), acks=1 still is
    second.stop()
    t0 = time.monotonic()
    err = delivery_of(boot, topic, 0, acks="all", **fast_fail)
    assert err is not None, "acks=all was acknowledged with one live replica"
    assert err.code() in (
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
    ), err
    assert time.monotonic() - t0 < 15
    assert delivery_of(boot, topic, 0, acks="1", **fast_fail) is None
    assert delivery_of(boot, pair, 0, acks="1", **fast_fail) is None

    # both back: acks=all is acknowledged again once they are in sync
    first.start()
    second.start()
    wait_for(
        lambda: full_isr(survivor, topic) and full_isr(survivor, pair), 30, 0.1, "full ISRs after restarts"
    )
    for t in (topic, pair):
        assert delivery_of(cluster.bootstrap, t, 0, acks="all", **fast_fail) is None


# -- group coordinator failover ---------------------------------------------------------------
def _produce_numbered(bootstrap: str, topic: str, start: int, stop: int) -> None:
    """Values ``start`` .. ``stop - 1``, keyed over 13 keys, acknowledged by all replicas."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "logger": quiet_logger()})
    for i in range(start, stop):
        p.produce(topic, key=b"k%d" % (i % 13), value=b"%d" % i)
    assert p.flush(60) == 0, "messages still undelivered"


def _group_member(bootstrap: str, group: str, topic: str) -> Consumer:
    """A member of ``group`` subscribed to ``topic``, committing by hand."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500,
            "logger": quiet_logger(),
        }
    )
    c.subscribe([topic])
    return c


def _consume_until(c: Consumer, want: set[int], seen: list[int], timeout: float = 40) -> None:
    """Append to ``seen`` what ``c`` is given until it holds every value of ``want``."""
    deadline = time.monotonic() + timeout
    while not want <= set(seen) and time.monotonic() < deadline:
        for m in c.consume(1000, timeout=0.3):
            if m.error() is None:
                seen.append(int(m.value()))
    assert want <= set(seen), f"{len(want - set(seen))} of {len(want)} messages not consumed"


def test_group_survives_coordinator_sigkill_and_resumes_from_committed_offsets(
    cluster: ClusterProcesses, name: Callable[[str], str]
) -> None:
    topic, group = name("gfo"), name("gfo-group")
    create_topic(cluster.bootstrap, topic, 3, 3)

    def produce(start: int, stop: int) -> None:
        _produce_numbered(cluster.bootstrap, topic, start, stop)

    def consumer() -> Consumer:
        return _group_member(cluster.bootstrap, group, topic)

    produce(0, 1000)
    c1 = consumer()
    seen1: list[int] = []
    _consume_until(c1, set(range(1000)), seen1)
    c1.commit(asynchronous=False)
    tps = [TopicPartition(topic, p) for p in range(3)]
    committed_before = {tp.partition: tp.offset for tp in c1.committed(tps, timeout=10)}
    assert sum(committed_before.values()) == 1000

    # the coordinator, as FindCoordinator says and as __consumer_offsets leadership says
    a = admin(cluster.bootstrap)
    coord_id = a.describe_consumer_groups([group])[group].result(15).coordinator.id
    offsets_view = partitions_of(cluster.brokers[0], OFFSETS_TOPIC)
    assert offsets_view is not None
    offsets_part = partition_for(group, len(offsets_view))
    assert offsets_view[offsets_part][0] == coord_id
    # fully replicated when it dies (see settle)
    b0 = running(cluster)[0]
    wait_for(
        lambda: full_isr(b0, topic) and full_isr(b0, OFFSETS_TOPIC, [offsets_part]),
        10,
        0.05,
        "full ISRs before the kill",
    )
    cluster.brokers[coord_id - 1].kill()

    # the member keeps consuming new messages
    produce(1000, 2000)
    _consume_until(c1, set(range(1000, 2000)), seen1)
    # the offsets committed before the failover are still there, served by the new coordinator
    assert {tp.partition: tp.offset for tp in c1.committed(tps, timeout=15)} == committed_before
    a = admin(bootstrap_of(running(cluster)))
    assert a.describe_consumer_groups([group])[group].result(15).coordinator.id != coord_id
    # commit after the failover, then hand the group to a new member
    c1.commit(asynchronous=False)
    committed_after = {tp.partition: tp.offset for tp in c1.committed(tps, timeout=10)}
    assert sum(committed_after.values()) == 2000
    c1.close()

    produce(2000, 2500)
    c2 = consumer()
    try:
        seen2: list[int] = []
        _consume_until(c2, set(range(2000, 2500)), seen2)
        for m in c2.consume(1000, timeout=1.0):  # anything more it would be given
            if m.error() is None:
                seen2.append(int(m.value()))
        early = sorted(v for v in seen2 if v < 2000)
        assert early == [], f"{len(early)} messages before the committed offsets re-delivered"
        assert sorted(seen2) == list(range(2000, 2500))
    finally:
        c2.close()


# -- controller failover ----------------------------------------------------------------------
def raft_leader(cluster: ClusterProcesses) -> int:
    """The running broker that most recently logged becoming the quorum's leader (controller)."""
    best = ("", -1)
    for b in running(cluster):
        for line in b.lines:
            if "is the controller" in line:
                best = max(best, (line[:23], b.node_id))
    assert best[1] > 0, "no broker logged being the controller"
    return best[1]


def test_topic_creation_succeeds_after_the_controller_is_sigkilled(
    cluster: ClusterProcesses, name: Callable[[str], str]
) -> None:
    """The metadata quorum (Raft) elects a new leader among the survivors, and topics can be
    created through them, by a raw request during the election and by librdkafka.

    Every broker names itself as the "controller" in Metadata (any broker takes admin requests),
    so a client never waits for a dead one; the Raft leader is found from the brokers' logs."""
    leader_id = raft_leader(cluster)
    dead = cluster.brokers[leader_id - 1]
    dead.kill()
    t0 = time.monotonic()
    survivors = running(cluster)
    boot = bootstrap_of(survivors)

    # a survivor takes CreateTopics sent to it from the moment of the kill: it proposes the
    # change again while the quorum elects a new leader
    raw = name("raw-after-controller")
    codes: list[int] = []

    def created_via_survivor() -> bool:
        codes.append(create_raw(survivors[0], raw, 1, 2))
        return codes[-1] in (0, ErrorCode.TOPIC_ALREADY_EXISTS)

    wait_for(created_via_survivor, 20, 0.05, f"CreateTopics through broker {survivors[0].node_id}")
    assert codes[0] == 0, codes
    for b in survivors:
        led_view(b, raw)
    wait_for(lambda: raft_leader(cluster) != leader_id, 10, 0.05, "a new Raft leader")
    elected = time.monotonic() - t0

    # a client that knows only the survivors creates a topic, within a bounded time
    topic = name("after-controller")
    a = admin(boot)
    a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=2)], request_timeout=10)[
        topic
    ].result(15)
    assert time.monotonic() - t0 < 15, f"took {time.monotonic() - t0:.1f} s (election {elected:.1f} s)"

    def usable() -> bool:
        view = partitions_of(survivors[0], topic)
        return view is not None and all(
            leader in (b.node_id for b in survivors) and dead.node_id not in isr
            for leader, _r, isr in view.values()
        )

    wait_for(usable, 20, 0.1, f"{topic} led by surviving brokers")
    for part in range(3):
        assert delivery_of(boot, topic, part, acks="all", **{"message.timeout.ms": 15_000}) is None
