"""Stream permissions (MapR's produceperm, consumeperm, topicperm, adminperm) as Kafka ACLs.

A stream's permissions are ordinary Kafka ACLs on the stream's name space, so every Kafka tool
(``kafka-acls``, ``AdminClient.describe_acls``) sees and edits the same rules:

=============  ==============================================================================
permission     ACLs (ALLOW, for the user, from any host)
=============  ==============================================================================
produce        Write, Describe on TOPIC PREFIXED ``<stream>.``
consume        Read, Describe on TOPIC PREFIXED ``<stream>.``; Read on GROUP PREFIXED ``<stream>.``
topic-admin    Create, Delete, Alter, DescribeConfigs, AlterConfigs on TOPIC PREFIXED ``<stream>.``
admin          Alter on TOPIC LITERAL ``<stream>.`` (the stream itself): may grant and revoke
               ACLs under ``<stream>.`` (sftraffic's extension of CreateAcls/DeleteAcls)
=============  ==============================================================================

A topic-admin's Alter is on the PREFIXED pattern, an admin's on the LITERAL one; the broker
tells them apart (:meth:`StandardAuthorizer.holds_literal`), so a topic admin cannot grant.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from framework.security.authorizer import AclBinding, AclOperation, PatternType, Permission, ResourceType

Op, Res = AclOperation, ResourceType
STREAM = re.compile(r"^[A-Za-z0-9_-]{1,200}$")  # the metadata store's stream names

PERMISSIONS: dict[str, tuple[tuple[ResourceType, PatternType, AclOperation], ...]] = {
    "produce": ((Res.TOPIC, PatternType.PREFIXED, Op.WRITE), (Res.TOPIC, PatternType.PREFIXED, Op.DESCRIBE)),
    "consume": (
        (Res.TOPIC, PatternType.PREFIXED, Op.READ),
        (Res.TOPIC, PatternType.PREFIXED, Op.DESCRIBE),
        (Res.GROUP, PatternType.PREFIXED, Op.READ),
    ),
    "topic-admin": tuple(
        (Res.TOPIC, PatternType.PREFIXED, op)
        for op in (Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    ),
    "admin": ((Res.TOPIC, PatternType.LITERAL, Op.ALTER),),
}
SEEDS_NAMES = {
    "produce": "produceperm",
    "consume": "consumeperm",
    "topic-admin": "topicperm",
    "admin": "adminperm",
}


def prefix(stream: str) -> str:
    return f"{stream}."


def bindings(stream: str, permission: str, principal: str, host: str = "*") -> list[AclBinding]:
    """The ACLs that make up ``permission`` on ``stream`` for ``principal`` (``User:alice``)."""
    if not STREAM.match(stream):
        raise ValueError(f"stream name {stream!r} is invalid: use 1-200 of [A-Za-z0-9_-] (no dot)")
    return [
        AclBinding(rt, prefix(stream), pt, principal, host, op, Permission.ALLOW)
        for rt, pt, op in PERMISSIONS[permission]
    ]


def stream_of(b: AclBinding) -> str | None:
    """The stream whose name space an ACL lies in: a TOPIC or GROUP pattern named
    ``<stream>.<anything>`` (literal or prefixed); None for any other ACL."""
    if b.resource_type not in (Res.TOPIC, Res.GROUP):
        return None
    head, dot, _ = b.name.partition(".")
    return head if dot and STREAM.match(head) else None


@dataclass(frozen=True, slots=True)
class Holder:
    principal: str
    host: str
    permissions: tuple[str, ...]  # the whole permissions held, in PERMISSIONS order


def holders(stream: str, acls: Iterable[AclBinding]) -> tuple[list[Holder], list[AclBinding]]:
    """Who holds which whole permission on the stream, and the stream's other ACLs (a DENY, a
    single operation granted with kafka-acls, a literal topic ...)."""
    mine = [b for b in acls if stream_of(b) == stream]
    shapes = {perm: {(rt, prefix(stream), pt, op) for rt, pt, op in ops} for perm, ops in PERMISSIONS.items()}
    by_who: dict[tuple[str, str], set[tuple[ResourceType, str, PatternType, AclOperation]]] = {}
    for b in mine:
        if b.permission == Permission.ALLOW:
            by_who.setdefault((b.principal, b.host), set()).add(
                (b.resource_type, b.name, b.pattern_type, b.operation)
            )
    out = []
    covered: set[AclBinding] = set()
    for (principal, host), have in sorted(by_who.items()):
        held = tuple(p for p, need in shapes.items() if need <= have)
        if held:
            out.append(Holder(principal, host, held))
            for p in held:
                covered.update(
                    AclBinding(rt, name, pt, principal, host, op, Permission.ALLOW)
                    for rt, name, pt, op in shapes[p]
                )
    return out, [b for b in mine if b not in covered]


def to_revoke(
    stream: str, permission: str, principal: str, host: str, acls: Iterable[AclBinding]
) -> list[AclBinding]:
    """The ACLs to delete to take ``permission`` away, keeping those another permission the
    principal still holds needs (produce and consume share Describe)."""
    held = next(
        (h.permissions for h in holders(stream, acls)[0] if (h.principal, h.host) == (principal, host)), ()
    )
    keep = {b for p in held if p != permission for b in bindings(stream, p, principal, host)}
    return [b for b in bindings(stream, permission, principal, host) if b not in keep]
