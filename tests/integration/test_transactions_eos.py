"""Exactly once through crashes: a consume-transform-produce loop
(tests/support/eos_worker.py: read_committed consumer, transactional producer,
``send_offsets_to_transaction``) is SIGKILLed at random points 20 times while it works through
its input; each restart fences the killed instance (its open transaction is aborted) and
resumes from the offsets committed with the last committed transaction. The output topic read
at read_committed holds each input's result exactly once; DescribeTransactions after each kill
shows that kills do land inside transactions (left Ongoing, aborted by the next instance).
"""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from framework.client.wire import WireClient
from framework.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from testing import BrokerProcess, ManagedProcess, ProcessError
from tests.support.brokers import create_topic, quiet_logger
from tests.support.clients import consume

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
N = 8000
KILLS = 20


def state_of(bootstrap: str, tid: str) -> str:
    with WireClient(bootstrap) as w:
        r = w.send(DescribeTransactionsRequest(transactional_ids=[tid]), DescribeTransactionsResponse)
    return r.transaction_states[0].transaction_state


def test_consume_transform_produce_is_exactly_once_through_sigkills(
    broker: BrokerProcess, topic_name: Any
) -> None:
    src, out = topic_name("eos-in"), topic_name("eos-out")
    create_topic(broker.bootstrap, src, 3)
    create_topic(broker.bootstrap, out, 3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    for i in range(N):
        p.produce(src, key=b"%d" % i, value=b"%d" % i)
    assert p.flush(30) == 0
    rnd = random.Random(19)
    cmd = [
        sys.executable,
        "-m",
        "tests.support.eos_worker",
        broker.bootstrap,
        f"g-{src}",
        src,
        out,
        f"tx-{src}",
    ]
    kills = open_at_kill = 0
    while kills < KILLS:
        # idle 3 s, transactions of 5 records: slow enough for 20 kills before the input ends
        w = ManagedProcess("eos-worker", [*cmd, "3", "5"], ready=lambda line: line.startswith("C "), cwd=ROOT)
        try:
            w.start(timeout=60)  # returns once it committed a first transaction
        except ProcessError:
            assert w.returncode == 0, w.tail(30)
            break  # it found no input left
        time.sleep(rnd.uniform(0.0, 0.4))  # a random point of its loop
        w.kill()
        kills += 1
        open_at_kill += state_of(broker.bootstrap, f"tx-{src}") == "Ongoing"
    final = ManagedProcess("eos-worker", [*cmd, "2", "100"], cwd=ROOT)
    final.launch()
    assert final.proc is not None
    assert final.proc.wait(120) == 0, final.tail(30)
    got = Counter(consume(broker.bootstrap, out, "read_committed", 3, expect=N, idle_polls=6))
    dupes = {v: n for v, n in got.items() if n > 1}
    assert not dupes, f"{len(dupes)} results more than once, e.g. {list(dupes.items())[:5]}"
    assert set(got) == {b"%d-out" % i for i in range(N)}, f"{N - len(got)} results missing"
    assert kills == KILLS, f"the input ran out after {kills} kills: make N larger"
    # the test can see what it checks: kills landed inside transactions (left Ongoing)
    assert open_at_kill, "no kill landed inside a transaction"
