"""Consumer groups (coordinator/groups.py): Kafka's classic group protocol, seen from the client.

Every test drives the coordinator the way the JoinGroup / SyncGroup / Heartbeat / LeaveGroup /
OffsetCommit handlers do and asserts what a client would read in the responses: error codes,
generations, the leader, member lists and assignments. Time is a manual clock
(:class:`FakeScheduler`), so timeouts are exact and nothing sleeps.
"""

from __future__ import annotations

import asyncio
from typing import Any

from framework.coordinator.groups import (
    CommittedOffset,
    Group,
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from framework.protocol.codec import encode_data
from framework.protocol.error_codes import ErrorCode as E
from framework.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
    TopicPartition,
)
from tests.support.coordinator import FakeScheduler, FakeStore, result, run_async, settle

G = "orders-app"
S = GroupState


def sub(*topics: str, owned: dict[str, list[int]] | None = None, generation: int = -1) -> bytes:
    """Consumer-protocol subscription metadata as the Java client sends it (v3)."""
    return encode_data(
        ConsumerProtocolSubscription(
            topics=list(topics),
            owned_partitions=[TopicPartition(t, ps) for t, ps in (owned or {}).items()],
            generation_id=generation,
        ),
        3,
    )


RANGE = [("range", sub("orders"))]


def protos(*names: str) -> list[tuple[str, bytes]]:
    return [(n, f"{n}-meta".encode()) for n in names]


class H:
    """A coordinator on a fake clock with an in-memory store; helpers speak for clients."""

    def __init__(self, **config: Any) -> None:
        self.sched = FakeScheduler()
        self.store = FakeStore()
        self.partitions = {"orders": 3, "audit": 2}
        self.config = GroupConfig(**{"initial_rebalance_delay_ms": 0, **config})
        self.c = GroupCoordinator(self.sched, self.store, self.config, self.sched, self._exists)

    def _exists(self, topic: str, partition: int) -> bool:
        return 0 <= partition < self.partitions.get(topic, 0)

    @property
    def g(self) -> Group:
        return self.c.groups[G]

    async def join(
        self,
        member_id: str = "",
        *,
        group: str = G,
        instance: str | None = None,
        client_id: str = "client",
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        protocol_type: str = "consumer",
        protocols: list[tuple[str, bytes]] | None = None,
        require_known: bool = True,
    ) -> asyncio.Future[JoinResult]:
        task = asyncio.ensure_future(
            self.c.join(
                group,
                member_id,
                instance,
                client_id,
                "/127.0.0.1",
                session_ms,
                rebalance_ms,
                protocol_type,
                RANGE if protocols is None else protocols,
                require_known,
            )
        )
        await settle()
        return task

    async def member_id(self, **kw: Any) -> str:
        """JoinGroup v4+ without an id: the coordinator hands one out (KIP-394)."""
        res = await result(await self.join("", **kw))
        assert res.error == E.MEMBER_ID_REQUIRED, res
        assert res.member_id and res.generation == -1
        return res.member_id

    async def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance: str | None = None,
        group: str = G,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> asyncio.Future[SyncResult]:
        task = asyncio.ensure_future(
            self.c.sync(
                group, generation, member_id, instance, protocol_type, protocol_name, assignments or {}
            )
        )
        await settle()
        return task

    def hb(self, member_id: str, generation: int, instance: str | None = None, group: str = G) -> int:
        return self.c.heartbeat(group, generation, member_id, instance)

    async def commit(
        self,
        member_id: str,
        generation: int,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
        *,
        instance: str | None = None,
        group: str = G,
    ) -> dict[tuple[str, int], int]:
        return await self.c.commit(group, generation, member_id, instance, offsets)

    async def stable(
        self,
        n: int = 0,
        *,
        instances: list[str] | None = None,
        protocols: list[list[tuple[str, bytes]]] | None = None,
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
    ) -> list[str]:
        """Form a fresh group at generation 1, synced and Stable; member ids, leader first.

        ``n`` dynamic members, or static members with the given instance ids (those need an
        initial rebalance delay, or the first one would complete generation 1 alone).
        """
        kw: dict[str, Any] = {"session_ms": session_ms, "rebalance_ms": rebalance_ms}
        count = len(instances) if instances else n
        tasks = []
        if instances:
            for i, inst in enumerate(instances):
                p = protocols[i] if protocols else None
                tasks.append(await self.join("", instance=inst, client_id=inst, protocols=p, **kw))
        else:
            ids = [
                await self.member_id(protocols=protocols[i] if protocols else None, **kw)
                for i in range(count)
            ]
            for i, mid in enumerate(ids):
                p = protocols[i] if protocols else None
                tasks.append(await self.join(mid, protocols=p, **kw))
        while not tasks[-1].done():  # the initial delay, extended while members arrived
            await self.sched.advance(self.config.initial_rebalance_delay_ms / 1000)
        results = [await result(t) for t in tasks]
        assert all(r.error == 0 and r.generation == 1 for r in results), results
        leader = results[0].leader
        ids = [r.member_id for r in results]
        assert leader == ids[0]
        followers = [await self.sync(mid, 1) for mid in ids[1:]]
        assert not any(f.done() for f in followers)
        lead = await self.sync(leader, 1, {mid: f"assignment-{k}".encode() for k, mid in enumerate(ids)})
        for k, t in enumerate([lead, *followers]):
            assert await result(t) == SyncResult(
                0, "consumer", results[0].protocol_name, f"assignment-{k}".encode()
            )
        assert self.g.state is S.STABLE
        return ids


# -- JoinGroup: the first member ----------------------------------------------------------------


@run_async
async def test_first_member_is_asked_for_an_id_then_leads_generation_1() -> None:
    h = H()
    first = await result(await h.join("", client_id="app"))
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-") and first.generation == -1 and first.leader == ""
    assert h.g.state is S.EMPTY and h.g.generation == 0

    res = await result(await h.join(first.member_id, client_id="app"))
    assert res.error == 0
    assert res.generation == 1
    assert res.member_id == res.leader == first.member_id
    assert (res.protocol_type, res.protocol_name) == ("consumer", "range")
    assert res.members == [(first.member_id, None, RANGE[0][1])]
    assert res.skip_assignment is False
    assert h.g.state is S.COMPLETING_REBALANCE

    s = await result(await h.sync(first.member_id, 1, {first.member_id: b"all-of-it"}))
    assert s == SyncResult(0, "consumer", "range", b"all-of-it")
    assert h.g.state is S.STABLE
    await settle()
    assert ("write_group", G, ("range", 1, first.member_id, 1)) in h.store.calls


@run_async
async def test_old_clients_join_without_the_member_id_round_trip() -> None:
    h = H()
    res = await result(await h.join("", require_known=False, client_id="legacy"))
    assert res.error == 0 and res.generation == 1
    assert res.member_id.startswith("legacy-") and res.leader == res.member_id


@run_async
async def test_an_id_that_is_never_used_expires_with_the_session_timeout() -> None:
    h = H()
    mid = await h.member_id(session_ms=10_000)
    await h.sched.advance(10.0)
    assert G not in h.c.groups  # nothing left of the group
    res = await result(await h.join(mid))
    assert res.error == E.UNKNOWN_MEMBER_ID


@run_async
async def test_initial_rebalance_delay_waits_and_extends_while_members_arrive() -> None:
    h = H(initial_rebalance_delay_ms=3000)
    a = await h.member_id(rebalance_ms=10_000)
    ta = await h.join(a, rebalance_ms=10_000)
    assert h.g.state is S.PREPARING_REBALANCE
    await h.sched.advance(2.0)
    b = await h.member_id(rebalance_ms=10_000)
    tb = await h.join(b, rebalance_ms=10_000)
    await h.sched.advance(0.99)
    assert not ta.done() and not tb.done()
    await h.sched.advance(0.01)  # t=3: b arrived during the delay, so it is extended by 3 s
    assert not ta.done() and not tb.done()
    await h.sched.advance(2.99)
    assert not ta.done()
    await h.sched.advance(0.01)  # t=6: nobody new in the last 3 s
    ra, rb = await result(ta), await result(tb)
    assert ra.generation == rb.generation == 1
    assert ra.leader == rb.leader == a
    assert [m[0] for m in ra.members] == [a, b] and rb.members == []


@run_async
async def test_initial_rebalance_delay_is_bounded_by_the_rebalance_timeout() -> None:
    h = H(initial_rebalance_delay_ms=3000)
    a = await h.member_id(rebalance_ms=5000)
    tasks = [await h.join(a, rebalance_ms=5000)]
    for step in (1.0, 1.0, 1.5, 1.0):  # a new member at t=1, 2, 3.5 and 4.5: never a quiet 3 s
        await h.sched.advance(step)
        mid = await h.member_id(rebalance_ms=5000)
        tasks.append(await h.join(mid, rebalance_ms=5000))
    await h.sched.advance(0.49)  # t=4.99
    assert not any(t.done() for t in tasks)
    await h.sched.advance(0.01)  # t=5 = the rebalance timeout: complete with everyone in
    res = [await result(t) for t in tasks]
    assert {r.generation for r in res} == {1}
    assert len(res[0].members) == 5


@run_async
async def test_initial_rebalance_delay_without_newcomers_is_the_configured_delay() -> None:
    h = H(initial_rebalance_delay_ms=3000)
    a = await h.member_id()
    ta = await h.join(a)
    await h.sched.advance(2.99)
    assert not ta.done()
    await h.sched.advance(0.01)
    assert (await result(ta)).generation == 1


@run_async
async def test_zero_initial_rebalance_delay_completes_at_once() -> None:
    h = H(initial_rebalance_delay_ms=0)
    a = await h.member_id()
    ta = await h.join(a)  # no time passes
    assert (await result(ta)).generation == 1
    assert h.sched.now == 1000.0


@run_async
async def test_initial_delay_only_applies_to_an_empty_group() -> None:
    h = H(initial_rebalance_delay_ms=3000)
    a, b = await h.stable(2)
    c = await h.member_id()
    tasks = [await h.join(c), await h.join(a), await h.join(b)]
    res = [await result(t) for t in tasks]  # complete as soon as everyone rejoined
    assert {r.generation for r in res} == {2}


# -- JoinGroup: several members ------------------------------------------------------------------


@run_async
async def test_join_responses_wait_for_every_known_member_to_rejoin() -> None:
    h = H()
    a, b = await h.stable(2)
    c = await h.member_id()
    tc = await h.join(c, protocols=[("range", sub("orders", "audit"))])
    assert h.g.state is S.PREPARING_REBALANCE
    ta = await h.join(a)
    assert not ta.done() and not tc.done()
    assert h.hb(b, 1) == E.REBALANCE_IN_PROGRESS
    assert not ta.done()
    tb = await h.join(b, protocols=[("range", sub("audit"))])
    ra, rb, rc = await result(ta), await result(tb), await result(tc)
    assert ra.generation == rb.generation == rc.generation == 2
    assert ra.leader == rb.leader == rc.leader == a
    # the leader sees everybody's metadata for the chosen protocol; followers see nobody
    assert ra.members == [
        (a, None, sub("orders")),
        (b, None, sub("audit")),
        (c, None, sub("orders", "audit")),
    ]
    assert rb.members == [] and rc.members == []
    assert h.g.state is S.COMPLETING_REBALANCE


@run_async
async def test_protocol_is_chosen_by_vote_among_the_common_ones() -> None:
    h = H()
    lists = [
        protos("range", "roundrobin"),
        protos("roundrobin", "range"),
        protos("sticky", "roundrobin", "range"),  # sticky is not common: its vote goes to roundrobin
    ]
    ids = [await h.member_id(protocols=p) for p in lists]
    tasks = [await h.join(mid, protocols=p) for mid, p in zip(ids, lists, strict=True)]
    res = [await result(t) for t in tasks]
    assert {r.protocol_name for r in res} == {"roundrobin"}
    assert res[0].members == [(mid, None, b"roundrobin-meta") for mid in ids]


@run_async
async def test_inconsistent_group_protocol() -> None:
    h = H()
    a, _ = await h.stable(2)
    # another protocol type
    r = await result(await h.join("", protocol_type="connect"))
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    # no protocol in common with the members
    r = await result(await h.join("", protocols=protos("sticky")))
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    # a member switching to a protocol nobody else speaks
    r = await result(await h.join(a, protocols=protos("sticky")))
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.g.state is S.STABLE and h.g.generation == 1
    # the first member of a group must name a protocol type and at least one protocol
    r = await result(await h.join("", group="other", protocol_type=""))
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = await result(await h.join("", group="other", protocols=[]))
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL


@run_async
async def test_session_timeout_must_be_within_the_broker_limits() -> None:
    h = H(min_session_timeout_ms=6000, max_session_timeout_ms=300_000)
    for bad in (5999, 300_001, 0):
        r = await result(await h.join("", session_ms=bad))
        assert r.error == E.INVALID_SESSION_TIMEOUT
    for ok in (6000, 300_000):
        r = await result(await h.join("", session_ms=ok))
        assert r.error == E.MEMBER_ID_REQUIRED


@run_async
async def test_join_with_bad_ids() -> None:
    h = H()
    assert (await result(await h.join("", group=""))).error == E.INVALID_GROUP_ID
    assert (await result(await h.join("ghost-1", group="nobody"))).error == E.UNKNOWN_MEMBER_ID
    await h.stable(1)
    assert (await result(await h.join("ghost-1"))).error == E.UNKNOWN_MEMBER_ID


@run_async
async def test_group_max_size() -> None:
    h = H(max_size=2)
    await h.stable(2)
    r = await result(await h.join(""))
    assert r.error == E.GROUP_MAX_SIZE_REACHED
    assert h.g.state is S.STABLE


@run_async
async def test_rejoin_with_unchanged_metadata() -> None:
    h = H()
    a, b = await h.stable(2)
    # a follower that missed its JoinGroup response: the current generation, no rebalance
    r = await result(await h.join(b))
    assert (r.error, r.generation, r.leader, r.members) == (0, 1, a, [])
    assert h.g.state is S.STABLE
    # the leader rejoining forces a rebalance (it may have seen topic metadata change)
    ta = await h.join(a)
    assert not ta.done() and h.g.state is S.PREPARING_REBALANCE
    tb = await h.join(b)
    assert (await result(ta)).generation == (await result(tb)).generation == 2


@run_async
async def test_rejoin_during_completing_rebalance_gets_the_current_generation() -> None:
    h = H()
    a = await h.member_id()
    b = await h.member_id()
    ta, tb = await h.join(a), await h.join(b)
    assert (await result(ta)).generation == 1 and h.g.state is S.COMPLETING_REBALANCE
    again = await result(await h.join(a))  # the leader lost its response: same generation
    assert again.generation == 1 and again.leader == a and [m[0] for m in again.members] == [a, b]
    assert h.g.state is S.COMPLETING_REBALANCE
    # changed metadata during CompletingRebalance: a new rebalance
    tb2 = await h.join(b, protocols=[("range", sub("audit"))])
    assert not tb2.done() and h.g.state is S.PREPARING_REBALANCE
    assert tb.done()


@run_async
async def test_follower_changing_its_subscription_triggers_a_rebalance() -> None:
    h = H()
    a, b = await h.stable(2)
    tb = await h.join(b, protocols=[("range", sub("orders", "audit"))])
    assert not tb.done() and h.g.state is S.PREPARING_REBALANCE
    ta = await h.join(a)
    ra = await result(ta)
    assert ra.generation == 2 and ra.members[1] == (b, None, sub("orders", "audit"))
    assert (await result(tb)).generation == 2


# -- SyncGroup -----------------------------------------------------------------------------------


@run_async
async def test_followers_wait_for_the_leader_and_get_their_own_assignment() -> None:
    h = H()
    ids = [await h.member_id() for _ in range(3)]
    tasks = [await h.join(mid) for mid in ids]
    a, b, c = ids
    for t in tasks:
        assert (await result(t)).generation == 1
    tb, tc = await h.sync(b, 1), await h.sync(c, 1)
    assert not tb.done() and not tc.done()
    assert h.hb(b, 1) == 0  # heartbeats while waiting are fine
    ta = await h.sync(a, 1, {a: b"A", b: b"B"})  # nothing for c: it gets an empty assignment
    assert await result(ta) == SyncResult(0, "consumer", "range", b"A")
    assert await result(tb) == SyncResult(0, "consumer", "range", b"B")
    assert await result(tc) == SyncResult(0, "consumer", "range", b"")
    assert h.g.state is S.STABLE


@run_async
async def test_sync_errors() -> None:
    h = H()
    a, b = await h.stable(2)
    assert (await result(await h.sync(b, 2))).error == E.ILLEGAL_GENERATION
    assert (await result(await h.sync(b, 0))).error == E.ILLEGAL_GENERATION
    assert (await result(await h.sync("ghost", 1))).error == E.UNKNOWN_MEMBER_ID
    assert (await result(await h.sync(b, 1, group="nobody"))).error == E.UNKNOWN_MEMBER_ID
    r = await result(await h.sync(b, 1, protocol_type="consumer", protocol_name="roundrobin"))
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = await result(await h.sync(b, 1, protocol_type="connect", protocol_name="range"))
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = await result(await h.sync(b, 1, protocol_type="consumer", protocol_name="range"))
    assert r == SyncResult(0, "consumer", "range", b"assignment-1")
    await h.join(await h.member_id())  # a newcomer: PreparingRebalance
    assert (await result(await h.sync(b, 1))).error == E.REBALANCE_IN_PROGRESS
    assert (await result(await h.sync(a, 1, {a: b"x"}))).error == E.REBALANCE_IN_PROGRESS


@run_async
async def test_stable_sync_returns_the_stored_assignment() -> None:
    h = H()
    a, b = await h.stable(2)
    assert (await result(await h.sync(b, 1))).assignment == b"assignment-1"
    # a late leader SyncGroup cannot change a stable group's assignment
    r = await result(await h.sync(a, 1, {a: b"other", b: b"other"}))
    assert r == SyncResult(0, "consumer", "range", b"assignment-0")
    assert (await result(await h.sync(b, 1))).assignment == b"assignment-1"


@run_async
async def test_members_that_never_sync_are_removed_at_the_rebalance_timeout() -> None:
    h = H()
    a = await h.member_id(session_ms=60_000, rebalance_ms=10_000)
    b = await h.member_id(session_ms=60_000, rebalance_ms=10_000)
    ta = await h.join(a, session_ms=60_000, rebalance_ms=10_000)
    tb = await h.join(b, session_ms=60_000, rebalance_ms=10_000)
    assert (await result(ta)).leader == a and (await result(tb)).generation == 1
    sb = await h.sync(b, 1)  # the leader never sends its assignment
    await h.sched.advance(9.99)
    assert not sb.done()
    await h.sched.advance(0.01)
    assert (await result(sb)).error == E.REBALANCE_IN_PROGRESS
    assert a not in h.g.members and h.g.state is S.PREPARING_REBALANCE
    assert h.hb(a, 1) == E.UNKNOWN_MEMBER_ID
    rb = await result(await h.join(b, session_ms=60_000, rebalance_ms=10_000))
    assert (rb.generation, rb.leader, [m[0] for m in rb.members]) == (2, b, [b])


@run_async
async def test_a_follower_waiting_for_the_leaders_sync_is_not_expired_by_its_session() -> None:
    # Kafka: members awaiting a JoinGroup or SyncGroup response satisfy their heartbeat; the
    # rebalance timeout governs the rebalance. The leader may take longer than the follower's
    # session timeout to send its assignment.
    h = H()
    kw: dict[str, Any] = {"session_ms": 6000, "rebalance_ms": 30_000}
    a, b = await h.member_id(**kw), await h.member_id(**kw)
    ta, tb = await h.join(a, **kw), await h.join(b, **kw)
    assert (await result(ta)).generation == (await result(tb)).generation == 1
    sb = await h.sync(b, 1)  # b waits, silently
    for _ in range(10):  # the leader keeps heartbeating but takes 10 s to assign
        await h.sched.advance(1.0)
        assert h.hb(a, 1) == 0
    assert not sb.done() and b in h.g.members
    await h.sync(a, 1, {a: b"A", b: b"B"})
    assert await result(sb) == SyncResult(0, "consumer", "range", b"B")
    # from the assignment on, b's session runs again: silent for 6 s, it is gone
    for _ in range(5):
        await h.sched.advance(1.0)
        assert h.hb(a, 1) == 0
    assert b in h.g.members and h.g.state is S.STABLE
    await h.sched.advance(1.0)
    assert b not in h.g.members and h.g.state is S.PREPARING_REBALANCE


# -- heartbeats and timeouts --------------------------------------------------------------------


@run_async
async def test_heartbeat_answers() -> None:
    h = H()
    a, b = await h.stable(2)
    assert h.hb(a, 1) == 0
    assert h.hb(b, 0) == E.ILLEGAL_GENERATION
    assert h.hb(b, 2) == E.ILLEGAL_GENERATION
    assert h.hb("ghost", 1) == E.UNKNOWN_MEMBER_ID
    assert h.hb(a, 1, group="nobody") == E.UNKNOWN_MEMBER_ID
    c = await h.member_id()
    tc = await h.join(c)
    assert h.hb(a, 1) == E.REBALANCE_IN_PROGRESS
    assert h.hb(b, 1) == E.REBALANCE_IN_PROGRESS
    ta, tb = await h.join(a), await h.join(b)
    assert (await result(tc)).generation == 2 and ta.done() and tb.done()
    assert h.g.state is S.COMPLETING_REBALANCE
    assert h.hb(c, 2) == 0  # heartbeats between JoinGroup and SyncGroup are normal
    assert h.hb(c, 1) == E.ILLEGAL_GENERATION


@run_async
async def test_heartbeats_keep_a_member_alive() -> None:
    h = H()
    (a,) = await h.stable(1, session_ms=10_000)
    for _ in range(12):
        await h.sched.advance(5.0)
        assert h.hb(a, 1) == 0
    assert h.g.state is S.STABLE and h.g.generation == 1


@run_async
async def test_commits_count_as_heartbeats() -> None:
    h = H()
    (a,) = await h.stable(1, session_ms=10_000)
    for i in range(6):
        await h.sched.advance(6.0)
        assert await h.commit(a, 1, {("orders", 0): (i, -1, None)}) == {("orders", 0): 0}
    assert h.g.state is S.STABLE and a in h.g.members


@run_async
async def test_silent_member_is_removed_after_its_session_timeout() -> None:
    h = H()
    a, b = await h.stable(2, session_ms=10_000)
    for _ in range(9):
        await h.sched.advance(1.0)
        assert h.hb(a, 1) == 0
    await h.sched.advance(0.99)
    assert b in h.g.members and h.g.state is S.STABLE
    await h.sched.advance(0.01)  # 10 s since b's SyncGroup
    assert b not in h.g.members
    assert h.g.state is S.PREPARING_REBALANCE
    assert h.hb(b, 1) == E.UNKNOWN_MEMBER_ID
    assert h.hb(a, 1) == E.REBALANCE_IN_PROGRESS
    r = await result(await h.join(a))
    assert (r.generation, r.leader, [m[0] for m in r.members]) == (2, a, [a])


@run_async
async def test_member_that_never_rejoins_is_removed_at_the_rebalance_timeout() -> None:
    h = H()
    a, b, c = await h.stable(3, session_ms=10_000, rebalance_ms=30_000)
    d = await h.member_id()
    td = await h.join(d)
    ta, tc = await h.join(a), await h.join(c)
    # b is alive (it heartbeats) but stuck: it never rejoins
    for _ in range(5):
        await h.sched.advance(5.0)
        assert h.hb(b, 1) == E.REBALANCE_IN_PROGRESS
    await h.sched.advance(4.99)
    assert not ta.done() and not td.done()
    await h.sched.advance(0.01)  # 30 s rebalance timeout
    ra = await result(ta)
    assert ra.generation == 2 and [m[0] for m in ra.members] == [a, c, d]
    assert (await result(tc)).generation == (await result(td)).generation == 2
    assert h.hb(b, 1) == E.UNKNOWN_MEMBER_ID


@run_async
async def test_a_dead_member_blocks_a_rebalance_no_longer_than_its_session_timeout() -> None:
    h = H()
    a, _b = await h.stable(2, session_ms=10_000, rebalance_ms=60_000)
    await h.sched.advance(4.0)
    assert h.hb(a, 1) == 0
    c = await h.member_id(rebalance_ms=60_000)
    tc = await h.join(c, rebalance_ms=60_000)
    ta = await h.join(a, rebalance_ms=60_000)
    await h.sched.advance(5.99)  # b (silent since its SyncGroup at t=0) expires at t=10
    assert not ta.done()
    await h.sched.advance(0.01)
    ra = await result(ta)
    assert ra.generation == 2 and [m[0] for m in ra.members] == [a, c]
    assert (await result(tc)).generation == 2


@run_async
async def test_a_leader_that_dies_after_joining_is_replaced() -> None:
    h = H()
    a, b = await h.stable(2, session_ms=10_000)
    for _ in range(10):
        await h.sched.advance(1.0)
        assert h.hb(b, 1) in (0, E.REBALANCE_IN_PROGRESS)
    assert a not in h.g.members
    r = await result(await h.join(b))
    assert (r.generation, r.leader) == (2, b)


# -- LeaveGroup ----------------------------------------------------------------------------------


@run_async
async def test_leave_triggers_a_rebalance() -> None:
    h = H()
    a, b = await h.stable(2)
    assert h.c.leave(G, [(b, None)]) == (0, [0])
    assert h.g.state is S.PREPARING_REBALANCE
    assert h.hb(a, 1) == E.REBALANCE_IN_PROGRESS
    r = await result(await h.join(a))
    assert (r.generation, [m[0] for m in r.members]) == (2, [a])
    assert h.c.leave(G, [(b, None)]) == (E.UNKNOWN_MEMBER_ID, [E.UNKNOWN_MEMBER_ID])
    assert h.c.leave("nobody", [(a, None)]) == (E.UNKNOWN_MEMBER_ID, [E.UNKNOWN_MEMBER_ID])


@run_async
async def test_leader_leaving_hands_leadership_over() -> None:
    h = H()
    a, b = await h.stable(2)
    h.c.leave(G, [(a, None)])
    r = await result(await h.join(b))
    assert (r.generation, r.leader) == (2, b)


@run_async
async def test_last_member_leaving_empties_the_group() -> None:
    h = H()
    (a,) = await h.stable(1)
    assert h.c.leave(G, [(a, None)]) == (0, [0])
    assert h.g.state is S.EMPTY
    assert (h.g.generation, h.g.leader_id, h.g.protocol_name) == (2, None, None)
    await settle()
    assert h.store.groups[G] == (None, 2, None, 0)
    assert h.hb(a, 1) == E.UNKNOWN_MEMBER_ID
    b = await h.member_id()
    r = await result(await h.join(b))
    assert (r.generation, r.leader) == (3, b)


@run_async
async def test_batch_leave_with_instance_ids() -> None:
    h = H(initial_rebalance_delay_ms=1000)
    _s1, s2, s3 = await h.stable(instances=["i1", "i2", "i3"])
    top, errors = h.c.leave(G, [("", "i1"), ("stale-id", "i2"), ("", "i9"), (s3, "i3")])
    assert top == 0
    assert errors == [0, E.FENCED_INSTANCE_ID, E.UNKNOWN_MEMBER_ID, 0]
    assert set(h.g.members) == {s2}
    assert h.g.state is S.PREPARING_REBALANCE
    r = await result(await h.join(s2, instance="i2"))
    assert (r.generation, r.leader, [m[0] for m in r.members]) == (2, s2, [s2])
    assert r.members == [(s2, "i2", RANGE[0][1])]


@run_async
async def test_a_pending_member_leaving_unblocks_the_rebalance() -> None:
    h = H()
    a = await h.member_id()
    b = await h.member_id()  # got its id, then gave up
    ta = await h.join(a)
    assert not ta.done()  # waiting for b
    assert h.c.leave(G, [(b, None)]) == (0, [0])
    await settle()
    assert (await result(ta)).members == [(a, None, RANGE[0][1])]


@run_async
async def test_a_pending_member_that_comes_back_after_the_rebalance_is_added() -> None:
    # Kafka keeps pending member ids until their session timeout, across join completion
    h = H()
    a = await h.member_id(rebalance_ms=10_000)
    b = await h.member_id(rebalance_ms=10_000, session_ms=30_000)
    ta = await h.join(a, rebalance_ms=10_000)
    await h.sched.advance(10.0)  # rebalance timeout: a completes alone
    ra = await result(ta)
    assert ra.generation == 1 and [m[0] for m in ra.members] == [a]
    await h.sync(a, 1, {a: b"A"})
    tb = await h.join(b, rebalance_ms=10_000, session_ms=30_000)
    assert not tb.done() and h.g.state is S.PREPARING_REBALANCE
    ta2 = await h.join(a, rebalance_ms=10_000)
    rb = await result(tb)
    assert rb.error == 0 and rb.generation == 2 and (await result(ta2)).generation == 2


# -- static membership (KIP-345, KIP-814) -------------------------------------------------------


@run_async
async def test_static_follower_restart_keeps_its_assignment_without_a_rebalance() -> None:
    h = H(initial_rebalance_delay_ms=1000)
    s1, s2 = await h.stable(instances=["i1", "i2"])
    before = list(h.store.calls)
    r = await result(await h.join("", instance="i2", client_id="i2"))
    assert r.error == 0
    assert r.member_id != s2 and r.member_id.startswith("i2-")
    assert (r.generation, r.leader, r.members, r.skip_assignment) == (1, s1, [], False)
    assert h.g.state is S.STABLE and h.g.generation == 1
    assert (await result(await h.sync(r.member_id, 1, instance="i2"))).assignment == b"assignment-1"
    await settle()
    assert ("write_group", G, ("range", 1, s1, 2)) in h.store.calls[len(before) :]
    # the old incarnation is fenced everywhere
    assert h.hb(s2, 1, "i2") == E.FENCED_INSTANCE_ID
    assert (await result(await h.sync(s2, 1, instance="i2"))).error == E.FENCED_INSTANCE_ID
    assert await h.commit(s2, 1, {("orders", 0): (1, -1, None)}, instance="i2") == {
        ("orders", 0): E.FENCED_INSTANCE_ID
    }
    assert (await result(await h.join(s2, instance="i2"))).error == E.FENCED_INSTANCE_ID
    assert h.c.leave(G, [(s2, "i2")]) == (E.FENCED_INSTANCE_ID, [E.FENCED_INSTANCE_ID])
    assert h.hb(s2, 1) == E.UNKNOWN_MEMBER_ID
    assert h.hb(r.member_id, 1, "i2") == 0 and h.hb(s1, 1, "i1") == 0


@run_async
async def test_static_leader_restart_is_told_to_skip_the_assignment() -> None:
    h = H(initial_rebalance_delay_ms=1000)
    s1, s2 = await h.stable(instances=["i1", "i2"])
    r = await result(await h.join("", instance="i1", client_id="i1"))
    new = r.member_id
    assert r.error == 0 and new != s1
    assert (r.generation, r.leader, r.skip_assignment) == (1, new, True)
    assert sorted(r.members) == sorted([(new, "i1", RANGE[0][1]), (s2, "i2", RANGE[0][1])])
    # whatever it sends, the stable group keeps its assignment
    s = await result(await h.sync(new, 1, {new: b"x", s2: b"y"}, instance="i1"))
    assert s.assignment == b"assignment-0"
    assert (await result(await h.sync(s2, 1, instance="i2"))).assignment == b"assignment-1"
    assert h.g.generation == 1


@run_async
async def test_static_restart_with_new_consumer_metadata_but_same_protocol_does_not_rebalance() -> None:
    # A Java consumer's subscription carries its owned partitions and generation; after a restart
    # both are reset, so the bytes differ. Kafka only checks that the selected protocol stays.
    h = H(initial_rebalance_delay_ms=1000)
    first = [
        [("range", sub("orders", owned={"orders": [0]}, generation=4))],
        [("range", sub("orders", owned={"orders": [1, 2]}, generation=4))],
    ]
    _s1, _s2 = await h.stable(instances=["i1", "i2"], protocols=first)
    r = await result(await h.join("", instance="i2", protocols=[("range", sub("orders"))]))
    assert (r.error, r.generation) == (0, 1)
    assert h.g.state is S.STABLE and h.g.generation == 1
    assert (await result(await h.sync(r.member_id, 1, instance="i2"))).assignment == b"assignment-1"


@run_async
async def test_static_restart_that_changes_the_selected_protocol_rebalances() -> None:
    h = H(initial_rebalance_delay_ms=1000)
    both = protos("range", "roundrobin")
    s1, _s2 = await h.stable(instances=["i1", "i2"], protocols=[both, both])
    assert h.g.protocol_name == "range"
    t2 = await h.join("", instance="i2", protocols=protos("roundrobin"))
    assert not t2.done() and h.g.state is S.PREPARING_REBALANCE
    t1 = await h.join(s1, instance="i1", protocols=both)
    r1, r2 = await result(t1), await result(t2)
    assert r1.generation == r2.generation == 2
    assert r1.protocol_name == r2.protocol_name == "roundrobin"


@run_async
async def test_static_member_restarting_during_a_rebalance() -> None:
    h = H(initial_rebalance_delay_ms=1000)
    s1, s2 = await h.stable(instances=["i1", "i2"])
    t2_old = await h.join(s2, instance="i2", protocols=[("range", sub("audit"))])  # rebalance
    assert not t2_old.done() and h.g.state is S.PREPARING_REBALANCE
    t2_new = await h.join("", instance="i2", protocols=[("range", sub("audit"))])  # it restarted
    assert (await result(t2_old)).error == E.FENCED_INSTANCE_ID
    t1 = await h.join(s1, instance="i1")
    r1, r2 = await result(t1), await result(t2_new)
    assert r1.generation == r2.generation == 2
    assert r2.member_id != s2 and r2.member_id in h.g.members and s2 not in h.g.members
    assert h.g.static_members == {"i1": s1, "i2": r2.member_id}


@run_async
async def test_static_member_absent_from_a_rebalance_keeps_its_place() -> None:
    # Kafka removes only dynamic members that did not rejoin; a static member keeps its
    # membership (and gets an assignment) until its session timeout, so a restart that
    # overlaps a rebalance does not cost another one.
    h = H(initial_rebalance_delay_ms=1000)
    kw: dict[str, Any] = {"session_ms": 60_000, "rebalance_ms": 10_000}
    s1, s2 = await h.stable(instances=["i1", "i2"], **kw)
    t2 = await h.join(s2, instance="i2", protocols=[("range", sub("orders", "audit"))], **kw)
    # s1 (the leader) is restarting and misses the rebalance
    await h.sched.advance(10.0)
    r2 = await result(t2)
    assert r2.error == 0 and r2.generation == 2
    assert r2.leader == s2  # a member that rejoined leads
    assert [m[0] for m in r2.members] == [s1, s2]
    assert s1 in h.g.members
    await h.sync(s2, 2, {s1: b"for-i1", s2: b"for-i2"}, instance="i2")
    assert h.g.state is S.STABLE
    r1 = await result(await h.join("", instance="i1", **kw))  # back, in the stable group
    assert (r1.error, r1.generation, r1.leader) == (0, 2, s2)
    assert (await result(await h.sync(r1.member_id, 2, instance="i1"))).assignment == b"for-i1"
    assert h.g.generation == 2


@run_async
async def test_static_member_that_never_comes_back_expires_with_its_session() -> None:
    h = H(initial_rebalance_delay_ms=1000)
    kw: dict[str, Any] = {"session_ms": 20_000, "rebalance_ms": 10_000}
    s1, s2 = await h.stable(instances=["i1", "i2"], **kw)
    for _ in range(19):
        await h.sched.advance(1.0)
        assert h.hb(s2, 1, "i2") == 0
    await h.sched.advance(1.0)
    assert s1 not in h.g.members and "i1" not in h.g.static_members
    assert h.g.state is S.PREPARING_REBALANCE


# -- offsets -------------------------------------------------------------------------------------


@run_async
async def test_commit_with_the_current_generation_is_stored_and_fetchable() -> None:
    h = H()
    a, b = await h.stable(2)
    res = await h.commit(a, 1, {("orders", 0): (42, 3, "m"), ("orders", 1): (7, -1, None)})
    assert res == {("orders", 0): 0, ("orders", 1): 0}
    now = h.sched.wall_ms()
    assert h.c.fetch_offsets(G, [("orders", 0), ("orders", 1), ("orders", 2)]) == {
        ("orders", 0): CommittedOffset(42, 3, "m", now),
        ("orders", 1): CommittedOffset(7, -1, "", now),
        ("orders", 2): None,
    }
    assert h.c.fetch_offsets(G, None) == {
        ("orders", 0): CommittedOffset(42, 3, "m", now),
        ("orders", 1): CommittedOffset(7, -1, "", now),
    }
    assert h.store.offsets[G][("orders", 0)] == CommittedOffset(42, 3, "m", now)
    assert h.c.fetch_offsets("nobody", [("orders", 0)]) == {("orders", 0): None}
    assert h.c.fetch_offsets("nobody", None) == {}
    # a later commit replaces the earlier one
    await h.sched.advance(1.0)
    assert await h.commit(b, 1, {("orders", 0): (50, 3, "n")}) == {("orders", 0): 0}
    assert h.c.fetch_offsets(G, [("orders", 0)])[("orders", 0)] == CommittedOffset(50, 3, "n", now + 1000)


@run_async
async def test_commit_generation_and_member_checks() -> None:
    h = H()
    a, b = await h.stable(2)
    tp = ("orders", 0)
    assert await h.commit(a, 0, {tp: (1, -1, None)}) == {tp: E.ILLEGAL_GENERATION}
    assert await h.commit(a, 2, {tp: (1, -1, None)}) == {tp: E.ILLEGAL_GENERATION}
    assert await h.commit("ghost", 1, {tp: (1, -1, None)}) == {tp: E.UNKNOWN_MEMBER_ID}
    # a "simple" commit (no generation, no member) to a group with members
    assert await h.commit("", -1, {tp: (1, -1, None)}) == {tp: E.UNKNOWN_MEMBER_ID}
    assert await h.commit("", 1, {tp: (1, -1, None)}, group="") == {tp: E.INVALID_GROUP_ID}
    assert h.c.fetch_offsets(G, [tp]) == {tp: None}
    # during PreparingRebalance the old generation may still commit (Kafka)
    await h.join(await h.member_id())
    assert h.g.state is S.PREPARING_REBALANCE
    assert await h.commit(b, 1, {tp: (5, -1, None)}) == {tp: 0}


@run_async
async def test_commit_during_completing_rebalance() -> None:
    h = H()
    a = await h.member_id()
    b = await h.member_id()
    ta, tb = await h.join(a), await h.join(b)
    assert (await result(ta)).generation == (await result(tb)).generation == 1
    assert h.g.state is S.COMPLETING_REBALANCE
    tp = ("orders", 0)
    assert await h.commit(b, 1, {tp: (1, -1, None)}) == {tp: E.REBALANCE_IN_PROGRESS}
    # member and generation are checked first, as in Kafka
    assert await h.commit(b, 0, {tp: (1, -1, None)}) == {tp: E.ILLEGAL_GENERATION}
    assert await h.commit("ghost", 1, {tp: (1, -1, None)}) == {tp: E.UNKNOWN_MEMBER_ID}
    assert h.c.fetch_offsets(G, [tp]) == {tp: None}


@run_async
async def test_simple_consumer_commits() -> None:
    h = H()
    tp = ("orders", 2)
    # a group nobody ever joined: generation -1 creates it
    assert await h.commit("", -1, {tp: (9, -1, "x")}, group="standalone") == {tp: 0}
    g = h.c.groups["standalone"]
    assert g.state is S.EMPTY and g.protocol_type is None and not g.members
    assert h.c.fetch_offsets("standalone", [tp])[tp] == CommittedOffset(9, -1, "x", h.sched.wall_ms())
    # ... but a generation from a group that does not exist is stale
    assert await h.commit("m-1", 3, {tp: (9, -1, None)}, group="vanished") == {tp: E.ILLEGAL_GENERATION}
    assert "vanished" not in h.c.groups
    # an emptied consumer group accepts simple commits (e.g. the admin client resetting offsets)
    (a,) = await h.stable(1)
    h.c.leave(G, [(a, None)])
    assert h.g.state is S.EMPTY
    assert await h.commit("", -1, {tp: (3, -1, None)}) == {tp: 0}
    # a consumer kicked out of the group committing with its stale id and generation -1 too
    assert await h.commit(a, -1, {tp: (4, -1, None)}) == {tp: 0}
    assert h.c.fetch_offsets(G, [tp])[tp].offset == 4  # type: ignore[union-attr]
    # a stale generation on an empty group: the member is unknown
    assert await h.commit(a, 1, {tp: (5, -1, None)}) == {tp: E.UNKNOWN_MEMBER_ID}


@run_async
async def test_commit_per_partition_errors() -> None:
    h = H(offset_metadata_max_bytes=10)
    (a,) = await h.stable(1)
    res = await h.commit(
        a,
        1,
        {
            ("orders", 0): (1, -1, "0123456789"),  # exactly the limit
            ("orders", 1): (1, -1, "0123456789x"),
            ("orders", 3): (1, -1, None),  # orders has 3 partitions
            ("nope", 0): (1, -1, None),
            ("audit", 1): (1, -1, "é" * 5),  # 10 bytes of UTF-8
        },
    )
    assert res == {
        ("orders", 0): 0,
        ("orders", 1): E.OFFSET_METADATA_TOO_LARGE,
        ("orders", 3): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("audit", 1): 0,
    }
    assert set(h.c.fetch_offsets(G, None)) == {("orders", 0), ("audit", 1)}
    assert set(h.store.offsets[G]) == {("orders", 0), ("audit", 1)}


@run_async
async def test_offset_delete_refuses_subscribed_topics() -> None:
    h = H()
    a, _b = await h.stable(2, protocols=[[("range", sub("orders"))], [("range", sub("orders", "events"))]])
    offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {
        ("orders", 0): (1, -1, None),
        ("audit", 0): (2, -1, None),
        ("audit", 1): (3, -1, None),
    }
    assert set((await h.commit(a, 1, offsets)).values()) == {0}
    top, res = await h.c.delete_offsets(G, [("orders", 0), ("audit", 0), ("events", 0)])
    assert top == 0
    assert res == {
        ("orders", 0): E.GROUP_SUBSCRIBED_TO_TOPIC,
        ("audit", 0): 0,
        ("events", 0): E.GROUP_SUBSCRIBED_TO_TOPIC,  # only the second member reads it
    }
    assert set(h.c.fetch_offsets(G, None)) == {("orders", 0), ("audit", 1)}
    assert ("delete_offsets", G, [("audit", 0)]) in h.store.calls


@run_async
async def test_offset_delete_on_empty_unknown_and_non_consumer_groups() -> None:
    h = H()
    (a,) = await h.stable(1)
    await h.commit(a, 1, {("orders", 0): (1, -1, None), ("orders", 1): (1, -1, None)})
    h.c.leave(G, [(a, None)])
    top, res = await h.c.delete_offsets(G, [("orders", 0)])
    assert (top, res) == (0, {("orders", 0): 0})
    assert set(h.c.fetch_offsets(G, None)) == {("orders", 1)}
    assert await h.c.delete_offsets("nobody", [("orders", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
    # a non-consumer protocol: the coordinator cannot tell what it uses
    r = await result(await h.join("", group="connect-cluster", protocol_type="connect", require_known=False))
    assert r.error == 0
    assert await h.c.delete_offsets("connect-cluster", [("orders", 0)]) == (E.NON_EMPTY_GROUP, {})


@run_async
async def test_offset_delete_with_unreadable_subscriptions_treats_every_topic_as_subscribed() -> None:
    # Kafka: a consumer group whose subscriptions cannot be parsed is subscribed to everything
    h = H()
    (a,) = await h.stable(1, protocols=[[("range", b"\xff")]])
    await h.commit(a, 1, {("audit", 0): (1, -1, None)})
    top, res = await h.c.delete_offsets(G, [("audit", 0)])
    assert (top, res) == (0, {("audit", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})
    assert set(h.c.fetch_offsets(G, None)) == {("audit", 0)}


@run_async
async def test_delete_groups() -> None:
    h = H()
    (a,) = await h.stable(1)
    await h.commit(a, 1, {("orders", 0): (1, -1, None)})
    assert await h.c.delete_group(G) == E.NON_EMPTY_GROUP
    h.c.leave(G, [(a, None)])
    assert await h.c.delete_group(G) == 0
    assert G not in h.c.groups and G not in h.store.groups and not h.store.offsets[G]
    assert h.store.names()[-2:] == ["delete_offsets", "delete_group"]
    assert h.c.fetch_offsets(G, [("orders", 0)]) == {("orders", 0): None}
    assert await h.c.delete_group(G) == E.GROUP_ID_NOT_FOUND
    assert await h.c.delete_group("nobody") == E.GROUP_ID_NOT_FOUND
    assert all(g.group_id != G for g in h.c.list_groups())


@run_async
async def test_offsets_of_an_emptied_group_expire_after_the_retention() -> None:
    h = H(offsets_retention_ms=60_000)
    (a,) = await h.stable(1)
    await h.commit(a, 1, {("orders", 0): (1, -1, None), ("orders", 1): (2, -1, None)})
    await h.sched.advance(5.0)
    h.c.leave(G, [(a, None)])
    assert h.g.state is S.EMPTY
    emptied = h.sched.now
    await h.sched.advance(59.0)
    assert await h.c.expire_offsets() == 0
    assert set(h.c.fetch_offsets(G, None)) == {("orders", 0), ("orders", 1)}
    await h.sched.advance(emptied + 60.001 - h.sched.now)
    assert await h.c.expire_offsets() == 2
    assert G not in h.c.groups
    assert ("delete_offsets", G, [("orders", 0), ("orders", 1)]) in h.store.calls
    assert h.store.calls[-1] == ("delete_group", G)


@run_async
async def test_offsets_of_a_live_group_do_not_expire() -> None:
    h = H(offsets_retention_ms=60_000)
    (a,) = await h.stable(1, session_ms=30_000)
    await h.commit(a, 1, {("orders", 0): (1, -1, None)})
    for _ in range(10):
        await h.sched.advance(20.0)
        assert h.hb(a, 1) == 0
    assert await h.c.expire_offsets() == 0
    assert set(h.c.fetch_offsets(G, None)) == {("orders", 0)}


@run_async
async def test_simple_consumer_offsets_expire_one_by_one() -> None:
    h = H(offsets_retention_ms=60_000)
    grp = "standalone"
    await h.commit("", -1, {("orders", 0): (1, -1, None)}, group=grp)
    await h.sched.advance(30.0)
    await h.commit("", -1, {("orders", 1): (1, -1, None)}, group=grp)
    await h.sched.advance(30.001)
    assert await h.c.expire_offsets() == 1
    assert set(h.c.fetch_offsets(grp, None)) == {("orders", 1)}
    assert grp in h.c.groups
    await h.sched.advance(30.0)
    assert await h.c.expire_offsets() == 1
    assert grp not in h.c.groups


# -- restore from the log ------------------------------------------------------------------------


def _member(mid: str, instance: str | None = None, session_ms: int = 10_000) -> Member:
    return Member(
        mid,
        instance,
        "client",
        "/10.0.0.1",
        session_ms,
        30_000,
        "consumer",
        RANGE,
        assignment=b"asg-" + mid.encode(),
    )


@run_async
async def test_restored_group_resumes_and_dead_members_expire() -> None:
    h = H()
    h.c.restore_offset(G, ("orders", 0), CommittedOffset(10, 1, "", 5))
    h.c.restore_offset(G, ("orders", 1), CommittedOffset(11, 1, "", 5))
    h.c.restore_offset(G, ("orders", 1), None)  # a tombstone later in the log
    h.c.restore_group(G, "consumer", 5, "range", "m1", 123, [_member("m1"), _member("m2", "i2")])
    assert h.g.state is S.STABLE and h.g.generation == 5
    assert h.g.static_members == {"i2": "m2"}
    assert h.c.fetch_offsets(G, None) == {("orders", 0): CommittedOffset(10, 1, "", 5)}
    # a member that survived the restart carries on
    assert (await result(await h.sync("m1", 5))).assignment == b"asg-m1"
    assert h.hb("m2", 5, "i2") == 0
    for _ in range(10):
        await h.sched.advance(1.0)
        assert h.hb("m1", 5) in (0, E.REBALANCE_IN_PROGRESS)
    # m2 went silent: after its session timeout it is gone and the group rebalances
    assert "m2" not in h.g.members and h.g.state is S.PREPARING_REBALANCE
    r = await result(await h.join("m1"))
    assert (r.generation, r.leader, [m[0] for m in r.members]) == (6, "m1", ["m1"])


@run_async
async def test_restored_empty_group_keeps_its_offsets_until_retention() -> None:
    h = H(offsets_retention_ms=60_000)
    now = h.sched.wall_ms()
    h.c.restore_group(G, "consumer", 4, None, None, now - 30_000, [])
    h.c.restore_offset(G, ("orders", 0), CommittedOffset(1, -1, "", now - 90_000))
    assert h.g.state is S.EMPTY
    assert await h.c.expire_offsets() == 0  # emptied 30 s ago
    await h.sched.advance(30.001)
    assert await h.c.expire_offsets() == 1
    assert G not in h.c.groups
    r = await result(await h.join(await h.member_id()))
    assert r.generation == 1  # the group was forgotten: a brand-new group


def test_fake_scheduler_fires_in_order_and_skips_cancelled() -> None:
    async def body() -> None:
        s = FakeScheduler(start=0.0)
        fired: list[str] = []
        s.call_later(2.0, lambda: fired.append("b"))
        s.call_later(1.0, lambda: fired.append("a"))
        s.call_later(1.5, lambda: fired.append("x")).cancel()
        s.call_later(3.0, lambda: fired.append("c"))
        await s.advance(2.0)
        assert fired == ["a", "b"] and s.now == 2.0
        await s.advance(5.0)
        assert fired == ["a", "b", "c"] and s.now == 7.0

    asyncio.run(body())
