"""Transaction markers from the coordinator to partition leaders (Kafka's
``TransactionMarkerChannelManager``), and their local application (WriteTxnMarkers).

:func:`write_local` writes one transaction's markers to partitions led here: a COMMIT/ABORT
control batch in each data partition's log (acks=all: answered once every in-sync replica has
it); for a ``__consumer_offsets`` partition the group coordinator then also stores (commit) or
drops (abort) the offsets the producer sent with TxnOffsetCommit for that partition's groups. The
WriteTxnMarkers handler and :class:`MarkerChannel` both use it.

:class:`MarkerChannel` is the coordinator's :class:`MarkerWriter`: partitions led here are
written in process; the others are grouped by leader and sent as WriteTxnMarkers (v1) over one
connection per broker on the inter-broker listener (TLS and SASL as that listener needs,
like the replica fetchers). A partition whose leader is unknown or unreachable answers a
retriable error, and the coordinator retries it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from framework.clock import Clock
from framework.coordinator.groups import GroupCoordinator
from framework.coordinator.offsets_topic import TOPIC as OFFSETS_TOPIC
from framework.coordinator.offsets_topic import partition_for
from framework.coordinator.transactions import TP, TxnMarker
from framework.errors import StoreError
from framework.metadata.cache import MetadataCache
from framework.protocol.control import EndTxnMarker
from framework.protocol.error_codes import ErrorCode
from framework.protocol.frames import decode_response, encode_request
from framework.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from framework.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from framework.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from framework.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from framework.replication.fetcher import LINK_ERRORS
from framework.security.sasl import SaslClient, SaslLogin
from framework.server.context import PartitionLookup
from framework.server.errors import kafka_error

log = logging.getLogger("sftraffic.transactions")
T = TypeVar("T")
MARKERS_VERSION = 1
REPLICATION_TIMEOUT_S = 30.0


class LeaderDirectory(Protocol):
    node_id: int

    @property
    def clustered(self) -> bool: ...

    def leader_id(self, topic: str, index: int) -> int | None:
        """The partition's leader (-1: none now); None: no such partition."""
        ...

    def address(self, node_id: int) -> tuple[str, int] | None: ...


async def write_local(
    partitions: PartitionLookup,
    groups: GroupCoordinator,
    offsets_partitions: Callable[[], int],
    marker: TxnMarker,
    tps: list[TP],
    now_ms: int,
) -> dict[TP, int]:
    """Write ``marker`` to the partitions of ``tps`` led here (stamped ``now_ms``); error code
    per partition."""
    out: dict[TP, int] = {}
    end = EndTxnMarker(marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch)
    waits: list[tuple[TP, asyncio.Future[None]]] = []
    for tp in tps:
        topic, index = tp
        try:
            part = partitions.leader(topic, index)
            info = part.append_txn_marker(end, now_ms)
            out[tp] = ErrorCode.NONE
            if topic == OFFSETS_TOPIC:  # the group coordinator applies it (commit: stores them)
                n = offsets_partitions()
                await groups.complete_txn(marker.producer_id, marker.commit, _in_partition(index, n))
            if part.replicated:
                fut = part.wait_replicated(info.last_offset + 1)
                if fut is not None:
                    waits.append((tp, fut))
        except (StoreError, OSError) as exc:
            named = kafka_error(exc)
            assert named is not None
            out[tp] = named[0]
    if waits:
        await asyncio.wait([f for _, f in waits], timeout=REPLICATION_TIMEOUT_S)
        for tp, fut in waits:
            if not fut.done():
                fut.cancel()
                out[tp] = ErrorCode.REQUEST_TIMED_OUT
            elif fut.exception() is not None:
                named = kafka_error(fut.exception() or StoreError("?"))
                out[tp] = named[0] if named else ErrorCode.UNKNOWN_SERVER_ERROR
    return out


def _in_partition(index: int, partitions: int) -> Callable[[str], bool]:
    def owns(group_id: str) -> bool:
        return partition_for(group_id, partitions) == index

    return owns


class _Connection:
    """One inter-broker connection for WriteTxnMarkers (requests one at a time)."""

    def __init__(
        self, node_id: int, address: tuple[str, int], tls: ssl.SSLContext | None, sasl: SaslLogin | None
    ) -> None:
        self.node_id = node_id
        self.address = address
        self.tls = tls
        self.sasl = sasl
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.corr = 0
        self.lock = asyncio.Lock()

    def call(
        self, req: Any, version: int, response_cls: type[T], timeout: float, client_id: str
    ) -> asyncio.Task[T]:
        """The broker's answer to ``req``, one exchange at a time, in a Task of its own: its
        timeouts need one, and a handler awaiting it may not run in a Task yet
        (:mod:`framework.server.router`)."""
        loop = asyncio.get_running_loop()
        return loop.create_task(self._exchange(req, version, response_cls, timeout, client_id))

    async def _exchange(
        self, req: Any, version: int, response_cls: type[T], timeout: float, client_id: str
    ) -> T:
        async with self.lock:
            try:
                if self.writer is None:
                    async with asyncio.timeout(5):
                        self.reader, self.writer = await asyncio.open_connection(*self.address, ssl=self.tls)
                        if self.sasl is not None:
                            await self._authenticate(self.sasl, client_id)
                return await self._call(req, version, response_cls, timeout, client_id)
            except BaseException:
                self.close()
                raise

    async def _call(self, req: Any, version: int, response_cls: type[T], timeout: float, client_id: str) -> T:
        assert self.writer is not None and self.reader is not None
        self.corr += 1
        self.writer.write(encode_request(req.API_KEY, version, self.corr, client_id, req))
        async with asyncio.timeout(timeout):
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            data = await self.reader.readexactly(size)
        return decode_response(data, self.corr, req.API_KEY, version, response_cls)

    async def _authenticate(self, login: SaslLogin, client_id: str) -> None:
        hs = await self._call(
            SaslHandshakeRequest(mechanism=login.mechanism), 1, SaslHandshakeResponse, 10, client_id
        )
        if hs.error_code:
            raise StoreError(f"broker {self.node_id} refused SASL mechanism {login.mechanism}")
        client = SaslClient(login.mechanism, login.username, login.password)
        token: bytes | None = client.first()
        while token is not None:
            resp = await self._call(
                SaslAuthenticateRequest(auth_bytes=token), 1, SaslAuthenticateResponse, 10, client_id
            )
            if resp.error_code:
                raise StoreError(f"broker {self.node_id} refused inter-broker authentication")
            token = client.step(resp.auth_bytes)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.writer = self.reader = None


class CacheLeaders:
    """LeaderDirectory over the metadata cache."""

    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache
        self.node_id = cache.node_id

    @property
    def clustered(self) -> bool:
        return self.cache.clustered

    def leader_id(self, topic: str, index: int) -> int | None:
        ps = self.cache.partition_state(topic, index)
        return None if ps is None else ps.leader

    def address(self, node_id: int) -> tuple[str, int] | None:
        return self.cache.registered_endpoint(node_id)


class MarkerChannel:
    """The coordinator's MarkerWriter: in process for local leaders, WriteTxnMarkers otherwise."""

    def __init__(
        self,
        leaders: LeaderDirectory,
        partitions: PartitionLookup,
        groups: Callable[[], GroupCoordinator],
        offsets_partitions: Callable[[], int],
        clock: Clock,
        tls: ssl.SSLContext | None = None,
        sasl: SaslLogin | None = None,
    ) -> None:
        self.leaders = leaders
        self.clock = clock  # the markers' timestamps
        self.partitions = partitions
        self.groups = groups
        self.offsets_partitions = offsets_partitions
        self.tls = tls
        self.sasl = sasl
        self.connections: dict[int, _Connection] = {}

    async def write_markers(self, marker: TxnMarker) -> dict[TP, int]:
        local: list[TP] = []
        remote: dict[int, list[TP]] = {}
        out: dict[TP, int] = {}
        me = self.leaders.node_id
        for tp in marker.partitions:
            leader = self.leaders.leader_id(*tp) if self.leaders.clustered else me
            if leader is None:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif leader < 0:
                out[tp] = ErrorCode.LEADER_NOT_AVAILABLE
            elif leader == me:
                local.append(tp)
            else:
                remote.setdefault(leader, []).append(tp)
        jobs = [self._send(node, tps, marker) for node, tps in remote.items()]
        if local:
            out.update(
                await write_local(
                    self.partitions,
                    self.groups(),
                    self.offsets_partitions,
                    marker,
                    local,
                    self.clock.wall_ms(),
                )
            )
        for result in await asyncio.gather(*jobs):
            out.update(result)
        return out

    async def _send(self, node: int, tps: list[TP], marker: TxnMarker) -> dict[TP, int]:
        conn = self._connection(node)
        if conn is None:
            return dict.fromkeys(tps, ErrorCode.LEADER_NOT_AVAILABLE)
        addr = conn.address
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        req = WriteTxnMarkersRequest(
            markers=[
                WritableTxnMarker(
                    producer_id=marker.producer_id,
                    producer_epoch=marker.producer_epoch,
                    transaction_result=marker.commit,
                    topics=[
                        WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()
                    ],
                    coordinator_epoch=marker.coordinator_epoch,
                )
            ]
        )
        try:
            resp = await conn.call(
                req,
                MARKERS_VERSION,
                WriteTxnMarkersResponse,
                REPLICATION_TIMEOUT_S + 5,
                f"txn-coordinator-{self.leaders.node_id}",
            )
        except LINK_ERRORS as exc:
            log.info(
                "WriteTxnMarkers to broker %d (%s:%d): %s; will retry", node, *addr, exc or type(exc).__name__
            )
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        out: dict[TP, int] = dict.fromkeys(tps, ErrorCode.UNKNOWN_SERVER_ERROR)
        for mr in resp.markers:
            for tr in mr.topics:
                for pr in tr.partitions:
                    out[(tr.name, pr.partition_index)] = pr.error_code
        return out

    def _connection(self, node: int) -> _Connection | None:
        addr = self.leaders.address(node)
        if addr is None:
            return None
        conn = self.connections.get(node)
        if conn is None or conn.address != addr:
            if conn is not None:
                conn.close()
            conn = self.connections[node] = _Connection(node, addr, self.tls, self.sasl)
        return conn

    async def verify(
        self, node_id: int, transactional_id: str, producer_id: int, epoch: int, tps: list[TP]
    ) -> dict[TP, int]:
        """KIP-890: ask broker ``node_id``'s coordinator whether ``tps`` are in the transaction
        (AddPartitionsToTxn v4, verify only); a retriable error when it cannot be asked."""
        conn = self._connection(node_id)
        if conn is None:
            return dict.fromkeys(tps, ErrorCode.NOT_ENOUGH_REPLICAS)
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        req = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    verify_only=True,
                    topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                )
            ]
        )
        try:
            resp = await conn.call(req, 4, AddPartitionsToTxnResponse, 10, f"broker-{self.leaders.node_id}")
        except LINK_ERRORS as exc:
            log.info("transaction verification with broker %d: %s", node_id, exc or type(exc).__name__)
            return dict.fromkeys(tps, ErrorCode.NOT_ENOUGH_REPLICAS)
        if resp.error_code:
            return dict.fromkeys(tps, resp.error_code)
        out: dict[TP, int] = dict.fromkeys(tps, ErrorCode.INVALID_TXN_STATE)
        for r in resp.results_by_transaction:
            for tr in r.topic_results:
                for pr in tr.results_by_partition:
                    out[(tr.name, pr.partition_index)] = pr.partition_error_code
        return out

    def close(self) -> None:
        for c in self.connections.values():
            c.close()
        self.connections.clear()
