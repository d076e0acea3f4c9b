"""What is mirrored and what the copies are called (MM2's DefaultReplicationPolicy and filters).

A topic ``T`` of the cluster aliased ``A`` becomes ``A.T`` on the target. Internal topics
(``__*``, ``*.internal``, ``*-internal``, ``*.replica``, ``mm2-*``) and topics that are already
copies from the target (``<target-alias>.*``, which would loop in an active-active pair) are
never mirrored, whatever ``--topics`` says; consumer groups of Kafka's tools and of Connect
(``console-consumer-*``, ``connect-*``, ``__*``) are never checkpointed.

Topic configs are copied by allow-list (MM2 copies all but a deny-list; an allow-list keeps a
broker-specific or cluster-specific setting such as ``min.insync.replicas`` or
``message.timestamp.type`` from being imposed on the target). A copied topic keeps
``CreateTime``, so records keep the timestamps they had at the source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SEPARATOR = "."

# topic configs copied to remote topics (when set on the source topic, not broker defaults)
COPIED_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "compression.type",
        "delete.retention.ms",
        "max.compaction.lag.ms",
        "max.message.bytes",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.ms",
    }
)

_INTERNAL_TOPIC = re.compile(r"^(__.*|.*\.internal|.*-internal|.*\.replica|mm2-.*)$")
_EXCLUDED_GROUP = re.compile(r"^(console-consumer-.*|connect-.*|__.*)$")


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{what} {pattern!r}: not a regular expression ({exc})") from None


@dataclass(frozen=True)
class ReplicationPolicy:
    """Names and filters of one flow, ``source_alias`` → ``target_alias``."""

    source_alias: str
    target_alias: str = "target"
    topics: str = ".*"
    groups: str = ".*"

    def __post_init__(self) -> None:
        for alias, what in ((self.source_alias, "--source-alias"), (self.target_alias, "--target-alias")):
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,100}", alias):
                raise ValueError(f"{what} {alias!r}: use 1-100 of [A-Za-z0-9_-] (no dot)")
        if self.source_alias == self.target_alias:
            raise ValueError("--source-alias and --target-alias must differ")
        _compile(self.topics, "--topics")
        _compile(self.groups, "--groups")

    # names (DefaultReplicationPolicy)
    def remote_topic(self, topic: str) -> str:
        return f"{self.source_alias}{SEPARATOR}{topic}"

    def upstream_topic(self, remote: str) -> str | None:
        head, sep, rest = remote.partition(SEPARATOR)
        return rest if sep and head == self.source_alias else None

    @property
    def offsets_topic(self) -> str:
        """The mirror's own progress (source offsets copied), on the target."""
        return f"mm2-offsets.{self.source_alias}.internal"

    @property
    def offset_syncs_topic(self) -> str:
        """(upstream, downstream) offset pairs, on the target (MM2 keeps them in the source by
        default, ``offset-syncs.topic.location=target`` here: the mirror writes nothing to the
        source cluster)."""
        return f"mm2-offset-syncs.{self.source_alias}.internal"

    @property
    def checkpoints_topic(self) -> str:
        return f"{self.source_alias}.checkpoints.internal"

    heartbeats_topic = "heartbeats"

    # filters
    def mirrors_topic(self, topic: str) -> bool:
        if _INTERNAL_TOPIC.match(topic):
            return False
        if topic.startswith(self.target_alias + SEPARATOR):
            return False  # a copy from the target: mirroring it back would loop
        return re.fullmatch(self.topics, topic) is not None

    def mirrors_group(self, group: str) -> bool:
        if _EXCLUDED_GROUP.match(group):
            return False
        return re.fullmatch(self.groups, group) is not None


def copied_configs(configs: dict[str, str]) -> dict[str, str]:
    """The allow-listed subset of a source topic's (non-default) configs."""
    return {k: v for k, v in configs.items() if k in COPIED_CONFIGS}
