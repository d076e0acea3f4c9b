"""ListPartitionReassignments (46): the ongoing reassignments, each partition's replicas (the
target first, then the replicas being removed) with its adding and removing replicas, as
``kafka-reassign-partitions --list`` / ``--verify`` and ``AdminClient.list_partition_reassignments``
read them. A null topic list means every reassigning partition; unknown topics and partitions
not being reassigned are left out, as Kafka leaves them out. The answer is this broker's view
of the metadata quorum. With an authorizer it needs Describe on the cluster.
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext


async def handle(
    ctx: RequestContext, req: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    authz.check_cluster(ctx, AclOperation.DESCRIBE)
    ongoing = ctx.admin.reassignments()
    wanted = None if req.topics is None else {(t.name, i) for t in req.topics for i in t.partition_indexes}
    by_topic: dict[str, list[OngoingPartitionReassignment]] = {}
    for (topic, index), (replicas, adding, removing) in sorted(ongoing.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        by_topic.setdefault(topic, []).append(
            OngoingPartitionReassignment(
                partition_index=index, replicas=replicas, adding_replicas=adding, removing_replicas=removing
            )
        )
    return ListPartitionReassignmentsResponse(
        error_code=ErrorCode.NONE,
        topics=[OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def error_response(
    req: ListPartitionReassignmentsRequest, code: int, message: str
) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=code, error_message=message)
