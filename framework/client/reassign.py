"""Partition reassignment over the Kafka protocol (AlterPartitionReassignments 45,
ListPartitionReassignments 46) and UnregisterBroker (64), for tests, benchmarks and tools.
confluent-kafka has no admin call for these; Kafka's ``kafka-reassign-partitions`` and
``kafka-cluster unregister`` do the same with the Java client.

These are plain Kafka APIs: they work against Apache Kafka as against our store.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from framework.client.security import wire_client
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from framework.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from framework.protocol.messages.unregister_broker import UnregisterBrokerRequest, UnregisterBrokerResponse

# the controller changed or lost its quorum meanwhile: Kafka's AdminClient sends the call again
RETRIABLE = frozenset({ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER})
RETRY_BACKOFF_S = 0.2

TP = tuple[str, int]
# (topic, partition) -> (replicas, adding, removing)
Ongoing = dict[TP, tuple[list[int], list[int], list[int]]]


def alter_reassignments(
    bootstrap: str, targets: Mapping[TP, list[int] | None], timeout: float = 30.0
) -> dict[TP, tuple[int, str | None]]:
    """Move each partition to its target replicas (None: cancel its reassignment); the broker's
    answer per partition: (error code, message), 0 when accepted. A partition answered with a
    retriable error (the controller changed meanwhile) is sent again until ``timeout``: a
    reassignment to the same target is idempotent."""
    deadline = time.monotonic() + timeout
    out: dict[TP, tuple[int, str | None]] = {}
    todo = dict(targets)
    while True:
        got = _alter_once(bootstrap, todo, timeout)
        out.update(got)
        todo = {tp: todo[tp] for tp, (code, _m) in got.items() if code in RETRIABLE}
        if not todo or time.monotonic() + RETRY_BACKOFF_S >= deadline:
            return out
        time.sleep(RETRY_BACKOFF_S)


def _alter_once(
    bootstrap: str, targets: Mapping[TP, list[int] | None], timeout: float
) -> dict[TP, tuple[int, str | None]]:
    by_topic: dict[str, list[ReassignablePartition]] = {}
    for (topic, index), replicas in targets.items():
        by_topic.setdefault(topic, []).append(
            ReassignablePartition(
                partition_index=index, replicas=None if replicas is None else list(replicas)
            )
        )
    req = AlterPartitionReassignmentsRequest(
        timeout_ms=int(timeout * 1000),
        topics=[ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    with wire_client(bootstrap, timeout + 5) as c:
        resp = c.send(req, AlterPartitionReassignmentsResponse)
    out: dict[TP, tuple[int, str | None]] = {}
    for t in resp.responses:
        for p in t.partitions:
            out[(t.name, p.partition_index)] = (
                p.error_code or resp.error_code,
                p.error_message or resp.error_message,
            )
    return out


def list_reassignments(bootstrap: str, timeout: float = 10.0) -> Ongoing:
    """Every ongoing reassignment as the broker reports it."""
    with wire_client(bootstrap, timeout) as c:
        resp = c.send(ListPartitionReassignmentsRequest(topics=None), ListPartitionReassignmentsResponse)
    return {
        (t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in resp.topics
        for p in t.partitions
    }


def unregister_broker(bootstrap: str, broker_id: int, timeout: float = 30.0) -> tuple[int, str | None]:
    """UnregisterBroker (64, ``kafka-cluster unregister``): (error code, message), 0 when done.

    A retriable error (the controller changed meanwhile) sends the call again until ``timeout``;
    BROKER_ID_NOT_REGISTERED answered to such a second call means the first one applied."""
    deadline = time.monotonic() + timeout
    retried = False
    while True:
        with wire_client(bootstrap, timeout + 5) as c:
            resp = c.send(UnregisterBrokerRequest(broker_id=broker_id), UnregisterBrokerResponse)
        if retried and resp.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED:
            return 0, None
        if resp.error_code not in RETRIABLE or time.monotonic() + RETRY_BACKOFF_S >= deadline:
            return resp.error_code, resp.error_message
        retried = True
        time.sleep(RETRY_BACKOFF_S)
