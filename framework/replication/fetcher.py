"""Followers: copy the leaders' logs with Kafka's own replica fetch protocol.

A broker runs one :class:`ReplicaFetcher` per leader broker it follows partitions of: one TCP
connection to the leader's Kafka listener, over which it sends

* ``OffsetForLeaderEpoch`` (v4, replica_id = this node) for partitions that just became
  followers: the leader answers where the follower's latest epoch ends in the leader's log,
  and the follower truncates everything past it (KIP-101/KIP-279), so a follower that had
  records a deposed leader never got acknowledged drops them instead of diverging;
* ``Fetch`` (v12, replica_id = this node, long-polling ``replica.fetch.wait.max.ms``) at its
  log end offset: the leader learns the follower's log end from the fetch offset, and answers
  the stored batches, which the follower appends unchanged (same offsets, same bytes) and the
  leader's high watermark, which the follower adopts (bounded by its own log end).

Errors that mean "the quorum has moved on" (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH)
make the follower wait for the metadata change that will reassign it.

Throttling (``follower.replication.throttled.*``, :class:`ReplicationQuota`): while the
follower side's quota is exceeded, a throttled partition this broker is not in the ISR of is
left out of the next fetch; the bytes throttled partitions receive are recorded.

The connection goes to the leader's ``inter.broker.listener.name`` listener: over TLS when it
is SSL or SASL_SSL (``FetcherSettings.tls``), and authenticated with SaslHandshake and
SaslAuthenticate when it is SASL (``FetcherSettings.sasl``: ``sasl.mechanism.inter.broker.protocol``
and the inter-broker user), re-authenticating on the same connection before the session the
leader granted ends (KIP-368).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from framework import config as cfg
from framework.clock import Clock
from framework.errors import StoreError
from framework.protocol.codec import DecodeError
from framework.protocol.error_codes import ErrorCode
from framework.protocol.frames import decode_response, encode_request
from framework.protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from framework.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from framework.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from framework.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from framework.replication.partition import Partition
from framework.replication.quota import ReplicationQuota
from framework.security.sasl import SaslClient, SaslLogin

# what a broker-to-broker link may raise: the peer gone, TLS, a short or undecodable answer
LINK_ERRORS = (
    OSError,
    ssl.SSLError,
    EOFError,
    asyncio.IncompleteReadError,
    TimeoutError,
    StoreError,
    DecodeError,
)

log = logging.getLogger("sftraffic.replication")
T = TypeVar("T")
Key = tuple[str, int]

FETCH_VERSION = 12
EPOCH_VERSION = 4
HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 1
REAUTH_SHARE = 0.85  # re-authenticate when this share of the session lifetime has passed
_WAIT_FOR_METADATA = (
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
)


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    node_id: int  # this broker: the replica_id of its fetches
    wait_ms: int
    partition_max_bytes: int
    response_max_bytes: int
    backoff_s: float
    tls: ssl.SSLContext | None = None  # the inter-broker listener is SSL or SASL_SSL
    sasl: SaslLogin | None = None  # the inter-broker listener is SASL_PLAINTEXT or SASL_SSL

    @classmethod
    def from_config(
        cls,
        node_id: int,
        c: cfg.BrokerConfig,
        tls: ssl.SSLContext | None = None,
        sasl: SaslLogin | None = None,
    ) -> FetcherSettings:
        return cls(
            node_id,
            c.int("replica.fetch.wait.max.ms"),
            c.int("replica.fetch.max.bytes"),
            c.int("replica.fetch.response.max.bytes"),
            c.int("replica.fetch.backoff.ms") / 1000,
            tls,
            sasl,
        )


# leader id -> (host, port) of its Kafka listener, None while unknown
Endpoints = Callable[[int], tuple[str, int] | None]


class ReplicaFetcher:
    def __init__(
        self,
        settings: FetcherSettings,
        leader_id: int,
        endpoints: Endpoints,
        quota: ReplicationQuota | None = None,
        *,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.quota = quota or ReplicationQuota("follower")
        self.node_id = settings.node_id
        self.endpoints = endpoints
        self.leader_id = leader_id
        self.parts: dict[Key, Partition] = {}
        self.truncate: set[Key] = set()
        self.changed = asyncio.Event()
        self.corr = 0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.wait_ms = settings.wait_ms
        self.part_bytes = settings.partition_max_bytes
        self.max_bytes = settings.response_max_bytes
        self.backoff = settings.backoff_s
        self.reauth_at: float | None = None  # monotonic time to re-authenticate (KIP-368)
        self.task = asyncio.get_running_loop().create_task(self.run())

    def add(self, p: Partition) -> None:
        key = (p.topic, p.index)
        self.parts[key] = p
        self.truncate.add(key)
        self.changed.set()

    def remove(self, p: Partition) -> None:
        key = (p.topic, p.index)
        if self.parts.get(key) is p:
            del self.parts[key]
            self.truncate.discard(key)

    async def stop(self, timeout: float = 1.0) -> None:
        """Cancel the fetch loop and wait for it (bounded): a stuck read cannot hold a stop up."""
        self.task.cancel()
        await asyncio.wait({self.task}, timeout=timeout)
        self._close()

    # -- the loop --------------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            if not self.parts:
                self.changed.clear()
                await self.changed.wait()
                continue
            addr = self.endpoints(self.leader_id)
            if addr is None:
                await asyncio.sleep(self.backoff)
                continue
            try:
                async with asyncio.timeout(5):
                    self.reader, self.writer = await asyncio.open_connection(*addr, ssl=self.settings.tls)
                    if self.settings.sasl is not None:
                        await self._authenticate(self.settings.sasl)
                while self.parts:
                    if self.reauth_at is not None and self.clock.monotonic() >= self.reauth_at:
                        assert self.settings.sasl is not None
                        await self._authenticate(self.settings.sasl)
                    if self.truncate:
                        await self._truncate()
                    if not await self._fetch():
                        await asyncio.sleep(0.1)  # every partition waits for the quorum
            except LINK_ERRORS as exc:
                log.info(
                    "replica fetcher for leader %d (%s:%s): %s; retrying in %.1f s",
                    self.leader_id,
                    *addr,
                    exc or type(exc).__name__,
                    self.backoff,
                )
                self._close()
                await asyncio.sleep(self.backoff)
            finally:
                self._close()

    def _close(self) -> None:
        self.reauth_at = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            self.reader = None

    async def _authenticate(self, login: SaslLogin) -> None:
        """SaslHandshake then SaslAuthenticate rounds; raises StoreError when refused."""
        hs = await self._call(
            SaslHandshakeRequest(mechanism=login.mechanism), HANDSHAKE_VERSION, SaslHandshakeResponse, 10
        )
        if hs.error_code:
            raise StoreError(
                f"leader {self.leader_id} refused SASL mechanism {login.mechanism} (error {hs.error_code}; "
                f"it offers {', '.join(hs.mechanisms) or 'none'})"
            )
        client = SaslClient(login.mechanism, login.username, login.password)
        token: bytes | None = client.first()
        lifetime_ms = 0
        while token is not None:
            resp = await self._call(
                SaslAuthenticateRequest(auth_bytes=token),
                AUTHENTICATE_VERSION,
                SaslAuthenticateResponse,
                10,
            )
            if resp.error_code:
                raise StoreError(
                    f"leader {self.leader_id} refused inter-broker authentication as {login.username!r}: "
                    f"{resp.error_message or resp.error_code}"
                )
            lifetime_ms = resp.session_lifetime_ms
            token = client.step(resp.auth_bytes)
        share_s = lifetime_ms * REAUTH_SHARE / 1000
        self.reauth_at = self.clock.monotonic() + share_s if lifetime_ms > 0 else None

    async def _call(self, req: Any, version: int, response_cls: type[T], timeout: float) -> T:
        assert self.writer is not None and self.reader is not None
        self.corr += 1
        client_id = f"replica-{self.node_id}"
        self.writer.write(encode_request(req.API_KEY, version, self.corr, client_id, req))
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that
        # arrives as the read completes (CPython gh-86296), and the fetcher would never stop
        async with asyncio.timeout(timeout):
            head = await self.reader.readexactly(4)
            (size,) = struct.unpack(">i", head)
            data = await self.reader.readexactly(size)
        return decode_response(data, self.corr, req.API_KEY, version, response_cls)

    # -- truncation (KIP-101 / KIP-279) ------------------------------------------------------
    async def _truncate(self) -> None:
        keys = [k for k in self.truncate if k in self.parts]
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        asked: dict[Key, tuple[Partition | None, int]] = {}
        for key in keys:
            p = self.parts[key]
            latest = p.log.epochs.latest_epoch()
            if latest < 0:  # nothing written under any epoch: nothing to take back
                self.truncate.discard(key)
                continue
            asked[key] = (p, p.leader_epoch)
            by_topic.setdefault(key[0], []).append(
                OffsetForLeaderPartition(
                    partition=key[1], current_leader_epoch=p.leader_epoch, leader_epoch=latest
                )
            )
        if not by_topic:
            return
        req = OffsetForLeaderEpochRequest(
            replica_id=self.node_id,
            topics=[OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
        )
        resp = await self._call(req, EPOCH_VERSION, OffsetForLeaderEpochResponse, 10)
        for tr in resp.topics:
            for r in tr.partitions:
                key = (tr.topic, r.partition)
                q, epoch = asked.get(key, (None, -1))
                if q is None or self.parts.get(key) is not q or q.leader_epoch != epoch:
                    continue  # reassigned meanwhile: asked again under the new epoch
                if r.error_code:
                    continue
                lg = q.log
                if r.leader_epoch < 0 or r.end_offset < 0:
                    target = min(lg.high_watermark, lg.log_end_offset)
                elif r.leader_epoch < lg.epochs.latest_epoch():
                    target = min(r.end_offset, lg.end_offset_for_epoch(r.leader_epoch)[1])
                else:
                    target = min(r.end_offset, lg.log_end_offset)
                if target < lg.log_end_offset:
                    log.warning(
                        "%s: truncating %d record offset(s) the leader (broker %d, epoch %d) does not have: "
                        "log end %d -> %d",
                        lg.name,
                        lg.log_end_offset - target,
                        self.leader_id,
                        q.leader_epoch,
                        lg.log_end_offset,
                        target,
                    )
                    lg.truncate_to(max(target, lg.log_start_offset))
                    q.truncated()
                self.truncate.discard(key)

    # -- fetching ----------------------------------------------------------------------------
    def _fetchable(self, throttled: set[Key]) -> list[tuple[Key, Partition]]:
        """The partitions to fetch this round: not waiting for truncation, and not held back by
        the follower's replication throttle (those throttled but fetched go into ``throttled``)."""
        quota = self.quota
        mono = self.clock.monotonic()
        out = []
        for key, p in self.parts.items():
            if key in self.truncate:
                continue
            if quota.active and self.node_id not in p.isr and quota.is_throttled(*key):
                if quota.exceeded(mono):
                    continue  # over the follower's replication throttle: not this round
                throttled.add(key)
            out.append((key, p))
        return out

    async def _fetch(self) -> bool:
        """One fetch round; False when no partition could fetch (all wait for metadata)."""
        topics: dict[str, list[FetchPartition]] = {}
        sent: dict[Key, tuple[Partition | None, int, int]] = {}
        quota = self.quota
        throttled: set[Key] = set()
        for key, p in self._fetchable(throttled):
            lg = p.log
            sent[key] = (p, p.leader_epoch, lg.log_end_offset)
            topics.setdefault(key[0], []).append(
                FetchPartition(
                    partition=key[1],
                    current_leader_epoch=p.leader_epoch,
                    fetch_offset=lg.log_end_offset,
                    last_fetched_epoch=-1,
                    log_start_offset=lg.log_start_offset,
                    partition_max_bytes=self.part_bytes,
                )
            )
        if not topics:
            return False
        req = FetchRequest(
            replica_id=self.node_id,
            max_wait_ms=self.wait_ms,
            min_bytes=1,
            max_bytes=self.max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
        )
        resp = await self._call(req, FETCH_VERSION, FetchResponse, self.wait_ms / 1000 + 10)
        if resp.error_code:
            raise StoreError(f"leader answered fetch with error {resp.error_code}")
        progressed = False
        now = self.clock.wall_ms()
        for tr in resp.responses:
            for pd in tr.partitions:
                key = (tr.topic, pd.partition_index)
                q, epoch, offset = sent.get(key, (None, -1, -1))
                if q is None or self.parts.get(key) is not q or q.leader_epoch != epoch:
                    continue
                lg = q.log
                if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    if offset < pd.log_start_offset:
                        log.info("%s: behind the leader's log start %d", lg.name, pd.log_start_offset)
                        lg.truncate_fully_and_start_at(pd.log_start_offset)
                        q.truncated()
                    else:
                        self.truncate.add(key)
                    progressed = True
                    continue
                if pd.error_code:
                    if pd.error_code not in _WAIT_FOR_METADATA:
                        log.warning(
                            "%s: fetch from broker %d failed: error %d",
                            lg.name,
                            self.leader_id,
                            pd.error_code,
                        )
                    continue
                progressed = True
                if key in throttled and pd.records:
                    quota.record(len(pd.records), self.clock.monotonic())
                if pd.records and lg.log_end_offset == offset:
                    try:
                        lg.append_as_follower(memoryview(pd.records), now)
                    except StoreError as exc:  # diverged from the leader: find where, truncate
                        log.warning("%s: cannot append the leader's batches (%s); truncating", lg.name, exc)
                        self.truncate.add(key)
                        continue
                q.leader_high_watermark = pd.high_watermark
                hw = min(pd.high_watermark, lg.log_end_offset)
                if hw > lg.high_watermark:
                    q.advance_high_watermark(hw)
        return progressed
