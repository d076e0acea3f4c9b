"""Client quotas as Kafka keeps them: entities, precedence, rates and throttle times.

Pure decisions, no sockets and no clock of its own (the caller passes ``now`` in seconds), so
tests drive it with a fake clock. The listener records what each request costs and learns how
long to throttle; the metadata store keeps the quota configs (``plan_client_quotas``).

**Entities.** A quota entity names a ``user`` (the principal's name: ``ANONYMOUS`` without
SASL), a ``client-id`` (the request header's), or both; a component whose name is None is that
type's *default* (Kafka's ``<default>``). It is stored as a tuple of ``(type, name)`` pairs
sorted by type: ``(("client-id", None), ("user", "alice"))`` is
``/config/users/alice/clients/<default>``.

**Precedence** (Kafka's ClientQuotaManager), for each quota key on its own; the first entity
that sets the key wins::

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>

The rate is shared by everything the matching entity covers: a quota found at
``/config/users/<default>`` is one rate per user (all that user's clients together), one at
``/config/clients/<default>`` one rate per client id. As in Kafka, the quota is per broker.

**Rate** (Kafka's ``Rate`` over a ``SampledStat``): ``quota.window.num`` samples of
``quota.window.size.seconds`` each; the rate is the sum of the live samples divided by the
time since the oldest sample began, counted as at least ``num - 1`` whole windows (so a new
client is not judged on a few milliseconds). Over the quota, the throttle time is Kafka's
``(rate - quota) / quota * window``: how long the client must stay silent for its rate to
come back down to the quota.

Thread-safety: none; used from the broker's event loop only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from framework.errors import InvalidRequest

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
#: quota key → whether its value must be a whole number (Kafka: LONG) or may be a fraction (DOUBLE)
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
}

#: an entity: (type, name or None for the default) pairs sorted by type
Entity = tuple[tuple[str, str | None], ...]

# DescribeClientQuotas match types
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


def entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """Kafka's checks on an entity: not empty, each type once, user and client-id only."""
    items = list(pairs)
    if not items:
        raise InvalidRequest("Invalid empty client quota entity")
    types = [t for t, _ in items]
    if len(set(types)) != len(types):
        raise InvalidRequest(f"Invalid client quota entity: duplicate entity type in {types}")
    for t in types:
        if t == IP:
            raise InvalidRequest("ip quotas (connection_creation_rate) are not supported by this broker")
        if t not in ENTITY_TYPES:
            raise InvalidRequest(f"Unhandled client quota entity type: {t}")
    return tuple(sorted(items))


def check_value(key: str, value: float) -> None:
    """A quota key and value as Kafka accepts them: a known key, a positive number, whole for
    the byte rates."""
    whole = QUOTA_KEYS.get(key)
    if whole is None:
        raise InvalidRequest(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidRequest(f"Invalid value {value} for configuration key {key}: it must be greater than 0")
    if whole and value != math.floor(value):
        raise InvalidRequest(f"Invalid value {value} for configuration key {key}, which must be an integer")


def entity_matches(ent: Entity, components: list[tuple[str, int, str | None]], strict: bool) -> bool:
    """DescribeClientQuotas's filter: each component (type, match type, name) matches the
    entity's component of that type; with ``strict`` the entity has no other types."""
    have = dict(ent)
    for etype, match_type, name in components:
        if etype not in have:
            return False
        got = have[etype]
        if match_type == MATCH_EXACT and got != name:
            return False
        if match_type == MATCH_DEFAULT and got is not None:
            return False
        if match_type == MATCH_SPECIFIED and got is None:
            return False
    return not strict or len(have) == len(components)


def check_filter(components: list[tuple[str, int, str | None]]) -> None:
    types = [t for t, _, _ in components]
    if len(set(types)) != len(types):
        raise InvalidRequest(f"Duplicate entity type in the filter: {types}")
    for etype, match_type, name in components:
        if etype not in ENTITY_TYPES:
            raise InvalidRequest(f"Custom entity type {etype!r} is not supported")
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise InvalidRequest(f"Unknown match type {match_type}")
        if match_type == MATCH_EXACT and name is None:
            raise InvalidRequest(f"A match of type EXACT needs a name ({etype})")


def precedence(user: str, client_id: str) -> list[tuple[Entity, tuple[str, str]]]:
    """Kafka's order of the entities that may set a client's quota, each with the key of the
    rate it shares (user, client id; "" where the entity does not split by that type)."""
    u, c = USER, CLIENT_ID
    return [
        (((c, client_id), (u, user)), (user, client_id)),
        (((c, None), (u, user)), (user, client_id)),
        (((u, user),), (user, "")),
        (((c, client_id), (u, None)), (user, client_id)),
        (((c, None), (u, None)), (user, client_id)),
        (((u, None),), (user, "")),
        (((c, client_id),), ("", client_id)),
        (((c, None),), ("", client_id)),
    ]


def resolve(
    configs: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[float, tuple[str, str]] | None:
    """The quota on ``key`` for this user and client id, and the key of its shared rate; None
    when no entity sets it (unlimited)."""
    for ent, sensor in precedence(user, client_id):
        values = configs.get(ent)
        if values is not None and key in values:
            return float(values[key]), sensor
    return None


class Rate:
    """Kafka's ``Rate`` over ``samples`` windows of ``window_s`` seconds (see the module doc)."""

    __slots__ = ("_current", "_starts", "_values", "samples", "window_s")

    def __init__(self, samples: int, window_s: float, now: float) -> None:
        self.samples = max(samples, 2)
        self.window_s = window_s
        self._starts = [now]
        self._values = [0.0]
        self._current = 0

    def record(self, value: float, now: float) -> None:
        if now - self._starts[self._current] >= self.window_s:
            if len(self._starts) < self.samples:
                self._starts.append(now)
                self._values.append(0.0)
                self._current = len(self._starts) - 1
            else:
                self._current = (self._current + 1) % self.samples
                self._starts[self._current] = now
                self._values[self._current] = 0.0
        self._values[self._current] += value

    def unrecord(self, value: float) -> None:
        self._values[self._current] -= value

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_s
        for i, start in enumerate(self._starts):
            if now - start >= expire:
                self._starts[i] = now
                self._values[i] = 0.0

    def window(self, now: float) -> float:
        """The time the rate is measured over (Kafka's ``Rate.windowSize``), in seconds."""
        elapsed = now - min(self._starts)
        full = int(elapsed / self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return elapsed

    def value(self, now: float) -> float:
        """Units per second over the window."""
        self._purge(now)
        return sum(self._values) / self.window(now)

    def idle_since(self) -> float:
        return max(self._starts)


def throttle_ms(rate: float, quota: float, window_s: float) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: 0 within the quota, else how long the client must
    be silent for its rate over the window to fall back to the quota."""
    if rate <= quota:
        return 0
    return round((rate - quota) / quota * window_s * 1000)


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    samples: int = 11  # quota.window.num
    size_s: float = 1.0  # quota.window.size.seconds


class ClientQuotas:
    """Per-broker rates of the clients with a quota, and the throttle each request earns.

    ``configs`` is the store's quota table (entity → key → value), replaced whenever the
    store applies a quota change (:meth:`update`); a change applies to the next request.
    """

    def __init__(self, window: QuotaWindow | None = None) -> None:
        self.window = window or QuotaWindow()
        self.configs: dict[Entity, dict[str, float]] = {}
        self._rates: dict[tuple[str, str, str], Rate] = {}
        self._last_sweep = 0.0

    @property
    def active(self) -> bool:
        return bool(self.configs)

    def update(self, configs: Mapping[Entity, Mapping[str, float]]) -> None:
        self.configs = {e: dict(v) for e, v in configs.items()}
        self._rates.clear()  # rates are per matching entity, which may have changed

    def quota(self, key: str, user: str, client_id: str) -> float | None:
        found = resolve(self.configs, key, user, client_id)
        return None if found is None else found[0]

    def _rate(self, key: str, sensor: tuple[str, str], now: float) -> Rate:
        rk = (key, *sensor)
        r = self._rates.get(rk)
        if r is None:
            r = self._rates[rk] = Rate(self.window.samples, self.window.size_s, now)
        return r

    def record(self, key: str, user: str, client_id: str, value: float, now: float) -> int:
        """Record ``value`` (bytes, or percent-seconds of handler time) for this client; the
        throttle time in ms it has earned (0 when within its quota or it has none)."""
        if not self.configs:
            return 0
        found = resolve(self.configs, key, user, client_id)
        if found is None:
            return 0
        quota, sensor = found
        r = self._rate(key, sensor, now)
        r.record(value, now)
        self._sweep(now)
        return throttle_ms(r.value(now), quota, r.window(now))

    def unrecord(self, key: str, user: str, client_id: str, value: float) -> None:
        found = resolve(self.configs, key, user, client_id)
        if found is not None:
            r = self._rates.get((key, *found[1]))
            if r is not None:
                r.unrecord(value)

    def max_in_window(self, key: str, user: str, client_id: str) -> int | None:
        """Kafka's ``getMaxValueInQuotaWindow``: the most a client may take in one whole window
        (a fetch is capped to it so that one answer cannot exceed the quota many times over)."""
        q = self.quota(key, user, client_id)
        if q is None:
            return None
        return max(int(q * (self.window.samples - 1) * self.window.size_s), 1)

    def _sweep(self, now: float) -> None:
        # drop the rates of clients idle for longer than the window (Kafka expires sensors)
        expire = self.window.samples * self.window.size_s
        if now - self._last_sweep < expire:
            return
        self._last_sweep = now
        for k in [k for k, r in self._rates.items() if now - r.idle_since() > 2 * expire]:
            del self._rates[k]
