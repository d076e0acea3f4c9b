"""OffsetFetch (9): a group's committed offsets (-1 where none), one group or many (v8+).

With an authorizer: Describe on the group (else GROUP_AUTHORIZATION_FAILED); a topic the
principal may not Describe answers TOPIC_AUTHORIZATION_FAILED when asked for, and is left out
of an all-topics answer, as Kafka does. With ``require_stable`` (v7+, KIP-447: read_committed
consumers) a partition whose group has offsets of a transaction not yet ended answers
UNSTABLE_OFFSET_COMMIT (retriable): the consumer waits instead of starting from the offsets the
transaction is about to replace. A member of a KIP-848 consumer group (v9+: member id and epoch
given) is checked as for OffsetCommit: UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH.
"""

from __future__ import annotations

from collections import defaultdict

from framework.coordinator.groups import CommittedOffset
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


def _lookup(
    ctx: RequestContext, group: str, wanted: list[tuple[str, list[int]]] | None, stable: bool = False
) -> dict[str, list[tuple[int, CommittedOffset | None, int]]]:
    """topic → (partition, committed offset or None, error code) for what was asked; with
    ``stable`` (KIP-447 require_stable), UNSTABLE_OFFSET_COMMIT where a transaction's offsets
    are pending."""
    coord = ctx.groups.coordinator
    unstable = coord.pending_txn_partitions(group) if stable else set()

    def described(topic: str) -> bool:
        return authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    tps = None if wanted is None else [(t, p) for t, ps in wanted for p in ps if described(t)]
    found = coord.fetch_offsets(group, tps)
    out: dict[str, list[tuple[int, CommittedOffset | None, int]]] = defaultdict(list)
    if wanted is None:
        for t, p in sorted(set(found) | unstable):
            if described(t):
                if (t, p) in unstable:
                    out[t].append((p, None, ErrorCode.UNSTABLE_OFFSET_COMMIT))
                else:
                    out[t].append((p, found[(t, p)], ErrorCode.NONE))
        return out
    for t, ps in wanted:
        code = ErrorCode.NONE if described(t) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for p in ps:
            if code == ErrorCode.NONE and (t, p) in unstable:
                out[t].append((p, None, ErrorCode.UNSTABLE_OFFSET_COMMIT))
            else:
                out[t].append((p, found.get((t, p)), code))
    return out


async def handle(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    v = ctx.version
    if v >= 8:
        groups = []
        for g in req.groups:
            code = ctx.groups.coordinator_error(g.group_id)
            if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
                code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            member = v >= 9 and (g.member_id is not None or g.member_epoch >= 0)
            if not code and member and ctx.groups.consumer.is_consumer_group(g.group_id):
                code = ErrorCode(
                    ctx.groups.consumer.check_commit(g.group_id, g.member_id or "", g.member_epoch)
                )
            if code:
                groups.append(OffsetFetchResponseGroup(group_id=g.group_id, error_code=code, topics=[]))
                continue
            wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
            res = _lookup(ctx, g.group_id, wanted, req.require_stable)
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=ErrorCode.NONE,
                    topics=[
                        OffsetFetchResponseTopics(
                            name=t,
                            partitions=[
                                OffsetFetchResponsePartitions(
                                    partition_index=p,
                                    committed_offset=o.offset if o else -1,
                                    committed_leader_epoch=o.leader_epoch if o else -1,
                                    metadata=o.metadata if o else "",
                                    error_code=code,
                                )
                                for p, o, code in parts
                            ],
                        )
                        for t, parts in res.items()
                    ],
                )
            )
        return OffsetFetchResponse(groups=groups)
    authz.check(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, req.group_id)
    ctx.groups.check_coordinator(req.group_id)
    wanted = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
    res = _lookup(ctx, req.group_id, wanted, v >= 7 and req.require_stable)
    return OffsetFetchResponse(
        error_code=ErrorCode.NONE,
        topics=[
            OffsetFetchResponseTopic(
                name=t,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=p,
                        committed_offset=o.offset if o else -1,
                        committed_leader_epoch=o.leader_epoch if o else -1,
                        metadata=o.metadata if o else "",
                        error_code=code,
                    )
                    for p, o, code in parts
                ],
            )
            for t, parts in res.items()
        ],
    )


def error_response(req: OffsetFetchRequest, code: int, message: str) -> OffsetFetchResponse:
    return OffsetFetchResponse(
        error_code=code,
        groups=[OffsetFetchResponseGroup(group_id=g.group_id, error_code=code) for g in req.groups],
    )
