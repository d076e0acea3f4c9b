"""Share groups (KIP-932) over the wire, as ``kafka-share-groups --list/--describe`` reads them:
confluent-kafka's AdminClient has no share-group calls yet, so these speak ListGroups (type
filter "share"), FindCoordinator, ShareGroupDescribe, DescribeShareGroupOffsets and
AlterShareGroupOffsets directly.

Every call takes the broker address and librdkafka's security settings of the caller's
connection; ListGroups goes to every broker in Metadata (each coordinator lists its own groups).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from framework.client.wire import WireClient, from_client_config
from framework.errors import StoreError
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
)
from framework.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponse,
)
from framework.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from framework.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse
from framework.protocol.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

Security = Mapping[str, str]


def _client(address: str, security: Security, timeout: float) -> WireClient:
    return from_client_config(address, security, timeout).connect()


def _raise(code: int, message: str | None, what: str) -> None:
    if code:
        raise StoreError(f"{what}: {message or ErrorCode(code).name}", ErrorCode(code))


def list_share_groups(
    bootstrap: str, security: Security, timeout: float = 10.0
) -> tuple[list[dict[str, str]], list[str]]:
    """Every share group of the cluster as ``{"group_id", "state"}``, sorted, and one line per
    broker that did not answer (or does not serve share groups: an empty list, not an error)."""
    with _client(bootstrap, security, timeout) as w:
        md = w.send(MetadataRequest(topics=[]), MetadataResponse)
    groups: dict[str, str] = {}
    errors = []
    for b in sorted(md.brokers, key=lambda b: b.node_id):
        try:
            with _client(f"{b.host}:{b.port}", security, timeout) as w:
                if (w.version_for(ListGroupsRequest.API_KEY) or 0) < 5:
                    continue  # no group types before ListGroups v5: no share groups either
                r = w.send(ListGroupsRequest(types_filter=["share"]), ListGroupsResponse)
            _raise(r.error_code, None, f"broker {b.node_id}")
            groups.update((g.group_id, g.group_state) for g in r.groups if g.group_type == "share")
        except StoreError as exc:
            errors.append(exc.message)
    return [{"group_id": g, "state": s} for g, s in sorted(groups.items())], errors


def _coordinator(w: WireClient, group: str) -> dict[str, Any]:
    """The group's coordinator as ``{"id", "host", "port"}``."""
    r = w.send(
        FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group]), FindCoordinatorResponse
    )
    c: Any = r.coordinators[0] if r.coordinators else r
    _raise(c.error_code, c.error_message, f"group {group}")
    return {"id": c.node_id, "host": c.host, "port": c.port}


def describe_share_group(
    bootstrap: str, security: Security, group: str, timeout: float = 10.0
) -> dict[str, Any] | None:
    """A share group as ``kafka-share-groups --describe`` shows it: state, assignor, epochs, the
    members with their assignments, and each partition's share-partition start offset and lag.
    None when ``group`` is not a share group (absent, or a consumer group)."""
    with _client(bootstrap, security, timeout) as w:
        if w.version_for(ShareGroupDescribeRequest.API_KEY) is None:
            return None
        coordinator = _coordinator(w, group)
    with _client(f"{coordinator['host']}:{coordinator['port']}", security, timeout) as w:
        d = w.send(ShareGroupDescribeRequest(group_ids=[group]), ShareGroupDescribeResponse).groups[0]
        if d.error_code == ErrorCode.GROUP_ID_NOT_FOUND:  # absent, or not a share group
            return None
        _raise(d.error_code, d.error_message, f"group {group}")
        req = DescribeShareGroupOffsetsRequest(groups=[DescribeShareGroupOffsetsRequestGroup(group, None)])
        o = w.send(req, DescribeShareGroupOffsetsResponse).groups[0]
        _raise(o.error_code, o.error_message, f"offsets of group {group}")
    offsets = [
        {
            "topic": t.topic_name,
            "partition": p.partition_index,
            "start_offset": p.start_offset if p.start_offset >= 0 else None,
            "lag": p.lag if p.lag >= 0 else None,
        }
        for t in sorted(o.topics, key=lambda t: t.topic_name)
        for p in sorted(t.partitions, key=lambda p: p.partition_index)
        if not p.error_code
    ]
    members = [
        {
            "member_id": m.member_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "host": m.client_host,
            "subscribed_topics": sorted(m.subscribed_topic_names),
            "assignment": [
                {"topic": tp.topic_name, "partition": p}
                for tp in sorted(m.assignment.topic_partitions, key=lambda tp: tp.topic_name)
                for p in sorted(tp.partitions)
            ],
        }
        for m in sorted(d.members, key=lambda m: m.member_id)
    ]
    return {
        "group_id": group,
        "type": "share",
        "state": d.group_state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "partition_assignor": d.assignor_name or None,
        "coordinator": coordinator,
        "members": members,
        "offsets": offsets,
        "total_lag": sum(x["lag"] or 0 for x in offsets),
    }


def alter_share_group_offsets(
    bootstrap: str,
    security: Security,
    group: str,
    offsets: Mapping[tuple[str, int], int],
    timeout: float = 10.0,
) -> None:
    """Set the share-partition start offsets of an empty share group (as ``kafka-share-groups
    --reset-offsets --execute``); the first partition error raises."""
    by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
    for (topic, part), off in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(AlterShareGroupOffsetsRequestPartition(part, off))
    req = AlterShareGroupOffsetsRequest(
        group_id=group, topics=[AlterShareGroupOffsetsRequestTopic(t, ps) for t, ps in by_topic.items()]
    )
    with _client(bootstrap, security, timeout) as w:
        coordinator = _coordinator(w, group)
    with _client(f"{coordinator['host']}:{coordinator['port']}", security, timeout) as w:
        r = w.send(req, AlterShareGroupOffsetsResponse)
    _raise(r.error_code, r.error_message, f"group {group}")
    for t in r.responses:
        for p in t.partitions:
            _raise(p.error_code, p.error_message, f"group {group}, {t.topic_name}-{p.partition_index}")
