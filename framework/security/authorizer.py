"""Kafka's StandardAuthorizer: "may this principal, from this host, do this to this resource?"

Pure decisions from a set of ACL bindings (Kafka's ``StandardAuthorizerData``), with Kafka's
codes for resource types, pattern types, operations and permissions, so that what the
CreateAcls/DescribeAcls/DeleteAcls messages carry is used as is.

The rules, as Kafka's (``StandardAuthorizerData.authorize`` / ``findResult``):

1. A principal listed in ``super.users`` may do anything.
2. The ACLs *on the resource* are those whose pattern matches its name: LITERAL with the
   same name, LITERAL ``*`` (any name), PREFIXED with a prefix of the name. Whose they are
   does not matter here.
3. An ACL *applies* when its principal is the requester's or ``User:*``, its host is the
   client's IP address or ``*``, and its operation matches: ``All`` matches every operation;
   an ALLOW of Read, Write, Delete or Alter also allows Describe, an ALLOW of AlterConfigs
   also allows DescribeConfigs (a DENY implies nothing: DENY Read does not deny Describe).
4. A DENY that applies wins; otherwise an ALLOW that applies allows; otherwise, when there are
   no ACLs on the resource at all, ``allow.everyone.if.no.acl.found`` decides (false: denied);
   otherwise the action is denied.

``authorize_by_resource_type`` is Kafka's ``Authorizer.authorizeByResourceType`` default (used
for InitProducerId: an idempotent producer needs IdempotentWrite on the cluster or Write on
*any* topic), ``authorized_operations`` the bit field of Metadata/DescribeGroups/DescribeCluster.

:class:`DecisionCache` keeps one connection's decisions per (operation, resource): a dict hit on
the produce and fetch paths. It is dropped whole when the ACLs change (:attr:`generation`).

Thread-safety: none needed; the broker uses it from its event loop only.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from framework import config as cfg
from framework.errors import ConfigError, InvalidRequest
from framework.security.principal import KafkaPrincipal

KAFKA_AUTHORIZER = cfg.STANDARD_AUTHORIZER  # authorizer.class.name
CLUSTER_NAME = "kafka-cluster"  # the only name of the cluster resource
WILDCARD = "*"  # LITERAL "*": any resource name; host "*": any host
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters: either pattern type, the name compared as is
    MATCH = 2  # filters: every pattern that would match the name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


R, Op = ResourceType, AclOperation
# operations an ALLOW implies (Kafka's IMPLIES_DESCRIBE / IMPLIES_DESCRIBE_CONFIGS)
IMPLIES = {
    Op.DESCRIBE: frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}),
    Op.DESCRIBE_CONFIGS: frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
}
# the operations of each resource type (Kafka's AclEntry.supportedOperations): the bits of the
# authorized-operations fields
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    R.TOPIC: (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ),
    R.GROUP: (Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    R.CLUSTER: (
        Op.CREATE,
        Op.ALTER,
        Op.DESCRIBE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
    ),
    R.TRANSACTIONAL_ID: (Op.WRITE, Op.DESCRIBE),
    R.DELEGATION_TOKEN: (Op.DESCRIBE,),
    R.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def _name(e: enum.IntEnum) -> str:
    """Kafka's spelling in tools: TOPIC, LITERAL, DESCRIBE_CONFIGS ..."""
    return e.name


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (Kafka's AclBinding)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str  # "User:alice", "User:*"
    host: str  # an IP address or "*"
    operation: AclOperation
    permission: Permission

    @classmethod
    def of(
        cls,
        resource_type: int,
        name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        """From the wire's codes; an unknown code becomes UNKNOWN (refused by :func:`check_new`)."""
        return cls(
            _enum(ResourceType, resource_type),
            name,
            _enum(PatternType, pattern_type),
            principal,
            host,
            _enum(AclOperation, operation),
            _enum(Permission, permission),
        )

    def to_json(self) -> list[Any]:
        """The stored form (metadata.json, the quorum's journal): a short list of codes."""
        return [
            int(self.resource_type),
            self.name,
            int(self.pattern_type),
            self.principal,
            self.host,
            int(self.operation),
            int(self.permission),
        ]

    @classmethod
    def from_json(cls, doc: list[Any]) -> AclBinding:
        rt, name, pt, principal, host, op, perm = doc
        return cls.of(int(rt), str(name), int(pt), str(principal), str(host), int(op), int(perm))

    def __str__(self) -> str:
        return (
            f"{_name(self.permission)} {self.principal} {_name(self.operation)} from {self.host} "
            f"on {_name(self.resource_type)}:{_name(self.pattern_type)}:{self.name}"
        )


def _enum(kind: type[Any], code: int) -> Any:
    try:
        return kind(code)
    except ValueError:
        return kind.UNKNOWN


def check_new(b: AclBinding) -> None:
    """Kafka's checks of an ACL to create (AclControlManager.validateNewAcl, AclApis): known
    types, a concrete pattern (LITERAL or PREFIXED), operation and permission, a non-empty name,
    ``kafka-cluster`` as the cluster's name; and a TYPE:NAME principal."""
    if b.resource_type in (R.UNKNOWN, R.ANY):
        raise InvalidRequest(f"Invalid resourceType {_name(b.resource_type)}")
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidRequest(f"Invalid patternType {_name(b.pattern_type)}")
    if b.operation in (Op.UNKNOWN, Op.ANY):
        raise InvalidRequest(f"Invalid operation {_name(b.operation)}")
    if b.permission not in (Permission.ALLOW, Permission.DENY):
        raise InvalidRequest(f"Invalid permissionType {_name(b.permission)}")
    if not b.name:
        raise InvalidRequest("Resource name should not be empty")
    if b.resource_type == R.CLUSTER and b.name != CLUSTER_NAME:
        raise InvalidRequest(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    try:
        KafkaPrincipal.parse(b.principal)
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
    if not b.host:
        raise InvalidRequest("the host must be an IP address or *")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Which ACLs a DescribeAcls or DeleteAcls filter selects (Kafka's AclBindingFilter).

    ``None`` fields and ANY codes match everything. A name with pattern type MATCH selects the
    ACLs that would apply to a resource of that name (its literal, ``*`` and prefixes); with ANY
    or a concrete type, the name is compared as is.
    """

    resource_type: ResourceType = R.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = Op.ANY
    permission: Permission = Permission.ANY

    @classmethod
    def of(
        cls,
        resource_type: int,
        name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclBindingFilter:
        return cls(
            _enum(ResourceType, resource_type),
            name,
            _enum(PatternType, pattern_type),
            principal,
            host,
            _enum(AclOperation, operation),
            _enum(Permission, permission),
        )

    def check(self) -> None:
        """Kafka's ``validateFilter``: a filter with an UNKNOWN field is refused."""
        if self.pattern_type == PatternType.UNKNOWN or self.resource_type == R.UNKNOWN:
            raise InvalidRequest("Unknown patternFilter.")
        if self.operation == Op.UNKNOWN or self.permission == Permission.UNKNOWN:
            raise InvalidRequest("Unknown entryFilter.")

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type not in (R.ANY, b.resource_type):
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != b.pattern_type:
            return False
        if self.name is not None:
            if pt in (PatternType.ANY, b.pattern_type):
                if self.name != b.name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:
                if b.name not in (self.name, WILDCARD):
                    return False
            elif not self.name.startswith(b.name):  # MATCH against a PREFIXED pattern
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation not in (Op.ANY, b.operation):
            return False
        return self.permission in (Permission.ANY, b.permission)


def _applies(b: AclBinding, principals: tuple[str, str], host: str, op: AclOperation) -> Permission | None:
    """Kafka's ``findResult``: the binding's verdict on the action, None when it does not apply."""
    if b.principal not in principals:
        return None
    if b.host not in (WILDCARD, host):
        return None
    if b.operation != Op.ALL:
        if b.permission == Permission.ALLOW:
            implied = IMPLIES.get(op)
            if implied is not None:
                if b.operation not in implied:
                    return None
            elif b.operation != op:
                return None
        elif b.operation != op:
            return None
    return b.permission


class _Section:
    """The ACLs of one resource type, indexed by pattern for the look-up of one resource name."""

    __slots__ = ("literal", "prefix_lengths", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, list[AclBinding]] = {}
        self.prefixed: dict[str, list[AclBinding]] = {}
        self.prefix_lengths: tuple[int, ...] = ()

    def on(self, name: str) -> list[AclBinding]:
        """Every ACL whose pattern matches ``name``: its literal, ``*``, its prefixes."""
        out: list[AclBinding] = []
        got = self.literal.get(name)
        if got:
            out += got
        if name != WILDCARD:
            got = self.literal.get(WILDCARD)
            if got:
                out += got
        prefixed = self.prefixed
        n = len(name)
        for k in self.prefix_lengths:
            if k > n:
                break
            got = prefixed.get(name[:k])
            if got:
                out += got
        return out


class StandardAuthorizer:
    """Decisions from the current ACLs, ``super.users`` and ``allow.everyone.if.no.acl.found``.

    :meth:`load` replaces the ACLs (the metadata store calls it through the broker whenever a
    CreateAcls/DeleteAcls change is applied, on every broker) and bumps :attr:`generation`,
    which empties every :class:`DecisionCache`.
    """

    def __init__(
        self,
        acls: Iterable[AclBinding] = (),
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.generation = 0
        self._acls: tuple[AclBinding, ...] = ()
        self._sections: dict[ResourceType, _Section] = {}
        self.load(acls)

    @classmethod
    def from_config(cls, config: cfg.BrokerConfig) -> StandardAuthorizer | None:
        """The authorizer ``authorizer.class.name`` asks for; None when it is empty (no ACLs)."""
        name = config.str("authorizer.class.name")
        if not name:
            return None
        if name != KAFKA_AUTHORIZER:  # the config's validator refuses it first
            raise ConfigError(f"authorizer.class.name={name}: {cfg.AUTHORIZER_CHOICES}")
        return cls(
            (), parse_super_users(config.str("super.users")), config.bool("allow.everyone.if.no.acl.found")
        )

    # -- the ACLs ----------------------------------------------------------------------------
    @property
    def acls(self) -> tuple[AclBinding, ...]:
        return self._acls

    def load(self, acls: Iterable[AclBinding]) -> None:
        sections: dict[ResourceType, _Section] = {}
        unique = tuple(dict.fromkeys(acls))
        for b in unique:
            s = sections.get(b.resource_type)
            if s is None:
                s = sections[b.resource_type] = _Section()
            where = s.literal if b.pattern_type == PatternType.LITERAL else s.prefixed
            where.setdefault(b.name, []).append(b)
        for s in sections.values():
            s.prefix_lengths = tuple(sorted({len(p) for p in s.prefixed}))
        self._acls = unique
        self._sections = sections
        self.generation += 1

    def matching(self, f: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self._acls if f.matches(b)]

    # -- decisions ---------------------------------------------------------------------------
    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return bool(self.super_users) and str(principal) in self.super_users

    def authorize(
        self, principal: KafkaPrincipal, host: str, op: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        if self.is_super_user(principal):
            return True
        section = self._sections.get(rtype)
        on = section.on(name) if section is not None else []
        if not on:
            return self.allow_if_no_acl
        principals = (str(principal), WILDCARD_PRINCIPAL)
        allowed = False
        for b in on:
            verdict = _applies(b, principals, host, op)
            if verdict == Permission.DENY:
                return False
            if verdict == Permission.ALLOW:
                allowed = True
        return allowed

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, op: AclOperation, rtype: ResourceType
    ) -> bool:
        """May the principal do ``op`` on *some* resource of this type (Kafka's default
        ``Authorizer.authorizeByResourceType``): an ALLOW for it (or All) on a pattern that no
        DENY of a literal of the same name or of a shorter-or-equal prefix covers."""
        if self.authorize(principal, host, op, rtype, "hardcode"):
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[AclBinding] = []
        for b in self._acls:
            if b.resource_type != rtype or b.principal not in principals:
                continue
            if b.host not in (WILDCARD, host):
                continue
            if b.operation not in (op, Op.ALL):
                continue
            if b.permission == Permission.DENY:
                if b.pattern_type == PatternType.LITERAL:
                    if b.name == WILDCARD:
                        return False
                    deny_literal.add(b.name)
                else:
                    deny_prefixed.add(b.name)
            elif b.permission == Permission.ALLOW:
                if b.pattern_type == PatternType.LITERAL and b.name == WILDCARD:
                    return True
                allow.append(b)
        for b in allow:
            if b.pattern_type == PatternType.LITERAL and b.name in deny_literal:
                continue
            if not any(b.name[:k] in deny_prefixed for k in range(1, len(b.name) + 1)):
                return True
        return False

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, rtype: ResourceType, name: str
    ) -> int:
        """The bit field (1 << operation code) of the resource type's operations allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[rtype]:
            if self.authorize(principal, host, op, rtype, name):
                bits |= 1 << op
        return bits

    def holds_literal(
        self, principal: KafkaPrincipal, host: str, op: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        """Whether an ALLOW of ``op`` on exactly this name (LITERAL ``name`` or ``*``), not one
        inherited from a prefix, applies, and no DENY does (any pattern); super users hold all.

        sftraffic's stream admins (``adminperm``) hold Alter on the LITERAL topic pattern
        ``<stream>.``, which the PREFIXED ``<stream>.`` patterns of the other stream permissions
        (topicperm's Alter among them) also match; this tells the two apart.
        """
        if self.is_super_user(principal):
            return True
        section = self._sections.get(rtype)
        if section is None:
            return False
        principals = (str(principal), WILDCARD_PRINCIPAL)
        held = False
        for b in section.on(name):
            verdict = _applies(b, principals, host, op)
            if verdict == Permission.DENY:
                return False
            if verdict == Permission.ALLOW and b.pattern_type == PatternType.LITERAL:
                held = True
        return held

    def session(self, principal: KafkaPrincipal, host: str) -> DecisionCache:
        return DecisionCache(self, principal, host)


class DecisionCache:
    """One connection's decisions, per (operation, resource type, name), while the ACLs stay."""

    __slots__ = ("_cache", "authorizer", "generation", "host", "principal")

    MAX_ENTRIES = 10_000  # a connection naming more resources starts over (bounded memory)

    def __init__(self, authorizer: StandardAuthorizer, principal: KafkaPrincipal, host: str) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.host = host
        self.generation = authorizer.generation
        self._cache: dict[tuple[int, int, str], bool] = {}

    def allowed(self, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        a = self.authorizer
        if self.generation != a.generation:
            self._cache.clear()
            self.generation = a.generation
        key = (op, rtype, name)
        got = self._cache.get(key)
        if got is None:
            if len(self._cache) >= self.MAX_ENTRIES:
                self._cache.clear()
            got = self._cache[key] = a.authorize(self.principal, self.host, op, rtype, name)
        return got


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users`` as Kafka reads it: principals separated by semicolons (``User:admin;User:ops``)."""
    out = set()
    for part in text.split(";"):
        p = part.strip()
        if p:
            try:
                KafkaPrincipal.parse(p)
            except ValueError as exc:
                raise ConfigError(f"super.users: {exc}") from None
            out.add(p)
    return frozenset(out)
