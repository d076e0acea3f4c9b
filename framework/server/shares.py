"""What ShareFetch and ShareAcknowledge share: the manager, the leader, acknowledgements."""

from __future__ import annotations

from framework import config as cfg
from framework.coordinator.groups import Scheduler
from framework.coordinator.share_groups import SharePartitionManager, ShareSession
from framework.coordinator.share_partition import SharePartitionConfig
from framework.errors import StoreError
from framework.protocol.error_codes import ErrorCode
from framework.replication.partition import Partition
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import kafka_error


def share_partitions(config: cfg.BrokerConfig, scheduler: Scheduler) -> SharePartitionManager:
    return SharePartitionManager(
        scheduler,
        SharePartitionConfig(
            lock_duration_ms=config.int("group.share.record.lock.duration.ms"),
            delivery_count_limit=config.int("group.share.delivery.count.limit"),
            max_record_locks=config.int("group.share.partition.max.record.locks"),
        ),
        config.int("group.share.max.share.sessions"),
    )


def share_manager(ctx: RequestContext) -> SharePartitionManager:
    shares = ctx.services.shares
    if shares is None:
        raise StoreError("share groups are not enabled on this broker", ErrorCode.UNSUPPORTED_VERSION)
    return shares


def leader_partition(ctx: RequestContext, topic: str, index: int) -> tuple[Partition | None, int]:
    """The partition if this broker leads it, else None and the error answering it."""
    try:
        return ctx.partitions.leader(topic, index), ErrorCode.NONE
    except StoreError as exc:
        named = kafka_error(exc)
        assert named is not None
        return None, named[0]


def start_offset(ctx: RequestContext, part: Partition) -> int:
    if ctx.config.str("share.auto.offset.reset") == "earliest":
        return part.log.log_start_offset
    return part.log.high_watermark


def acknowledge(
    ctx: RequestContext,
    shares: SharePartitionManager,
    session: ShareSession,
    topic: str,
    index: int,
    batches: list[tuple[int, int, list[int]]],
) -> int:
    """Apply one partition's acknowledgement batches; the first error, or NONE."""
    part, code = leader_partition(ctx, topic, index)
    if part is None:
        return code
    key = (session.group_id, topic, index)
    sp = shares.find(key)
    if sp is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # never fetched here
    now = shares.sched.time()
    result: int = ErrorCode.NONE
    previous = -1
    for first, last, types in batches:
        if first <= previous:
            result = ErrorCode.INVALID_REQUEST
        else:
            result = sp.acknowledge(session.member_id, first, last, types, now)
        if result:
            break  # as Kafka, the first refused batch ends the partition's acknowledgements
        previous = last
    shares.wake(key)  # released records may be handed out again (their locks' timers stand)
    return result


def resolve_topic(ctx: RequestContext, topic_id: bytes) -> tuple[str | None, int]:
    info = ctx.cluster.topic_by_id(topic_id)
    if info is None:
        return None, ErrorCode.UNKNOWN_TOPIC_ID
    if not authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, info.name):
        return info.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return info.name, ErrorCode.NONE


def group_state_error(ctx: RequestContext, group_id: str, empty: bool) -> tuple[int, str | None]:
    """The group-level error of an offsets request for a share group: not coordinated here,
    not a share group, or (``empty``) not empty."""
    code = ctx.groups.coordinator_error(group_id)
    if code:
        return code, None
    g = ctx.groups.share.describe(group_id)
    if g is None:
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    if empty and g.members:
        return ErrorCode.NON_EMPTY_GROUP, f"The group {group_id} has active members."
    return ErrorCode.NONE, None


def not_here(ctx: RequestContext, topic: str, index: int) -> tuple[int, str | None]:
    """A partition whose share state this broker cannot answer for: its leader keeps it."""
    part, code = leader_partition(ctx, topic, index)
    if part is not None:
        return ErrorCode.NONE, None
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return code, f"{topic}-{index}: its share state is kept by its leader, not by this broker"
    return code, None


def offsets_refusal(ctx: RequestContext, group_id: str, op: AclOperation) -> tuple[int, str | None]:
    """Why AlterShareGroupOffsets or DeleteShareGroupOffsets is refused for the whole group
    (NONE: it is not): no group id, not authorized for ``op``, not here, not empty."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, None
    if not authz.allowed(ctx, op, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    return group_state_error(ctx, group_id, empty=True)
