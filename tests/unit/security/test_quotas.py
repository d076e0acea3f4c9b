"""Client quotas: Kafka's precedence, validation, rate and throttle time, on a fake clock."""

from __future__ import annotations

import pytest

from framework.errors import InvalidRequest
from framework.security import quotas as q
from framework.security.quotas import ClientQuotas, QuotaWindow, Rate


def _ent(**kw: str | None) -> q.Entity:
    return q.entity((k.replace("_", "-"), v) for k, v in kw.items())


def test_precedence_is_kafkas_order() -> None:
    configs: dict[q.Entity, dict[str, float]] = {
        _ent(client_id=None): {"producer_byte_rate": 8},
        _ent(client_id="c"): {"producer_byte_rate": 7},
        _ent(user=None): {"producer_byte_rate": 6},
        _ent(user=None, client_id=None): {"producer_byte_rate": 5},
        _ent(user=None, client_id="c"): {"producer_byte_rate": 4},
        _ent(user="u"): {"producer_byte_rate": 3},
        _ent(user="u", client_id=None): {"producer_byte_rate": 2},
        _ent(user="u", client_id="c"): {"producer_byte_rate": 1},
    }
    order = list(configs)[::-1]
    for i, ent in enumerate(order):
        got = q.resolve(configs, "producer_byte_rate", "u", "c")
        assert got is not None and got[0] == i + 1
        del configs[ent]
    assert q.resolve(configs, "producer_byte_rate", "u", "c") is None


def test_each_key_resolves_on_its_own_and_rates_are_shared_by_the_matching_entity() -> None:
    configs = {
        _ent(user="u"): {"consumer_byte_rate": 10.0},
        _ent(client_id=None): {"producer_byte_rate": 20.0},
    }
    assert q.resolve(configs, "consumer_byte_rate", "u", "c") == (10.0, ("u", ""))
    assert q.resolve(configs, "producer_byte_rate", "u", "c") == (20.0, ("", "c"))
    assert q.resolve(configs, "consumer_byte_rate", "v", "c") is None


def test_entity_and_value_validation() -> None:
    assert _ent(user="a", client_id=None) == (("client-id", None), ("user", "a"))
    for bad in ([], [("user", "a"), ("user", "b")], [("ip", "1.2.3.4")], [("group", "g")]):
        with pytest.raises(InvalidRequest):
            q.entity(bad)
    q.check_value("producer_byte_rate", 1024)
    q.check_value("request_percentage", 12.5)
    for key, value in (
        ("producer_byte_rate", 1.5),
        ("nope", 1),
        ("consumer_byte_rate", 0),
        ("request_percentage", -1),
    ):
        with pytest.raises(InvalidRequest):
            q.check_value(key, value)


def test_filter_matching() -> None:
    ent = _ent(user="u", client_id=None)
    assert q.entity_matches(ent, [("user", q.MATCH_EXACT, "u")], strict=False)
    assert not q.entity_matches(ent, [("user", q.MATCH_EXACT, "u")], strict=True)
    assert q.entity_matches(
        ent, [("user", q.MATCH_SPECIFIED, None), ("client-id", q.MATCH_DEFAULT, None)], True
    )
    assert not q.entity_matches(ent, [("client-id", q.MATCH_SPECIFIED, None)], strict=False)
    assert q.entity_matches(ent, [], strict=False)
    with pytest.raises(InvalidRequest):
        q.check_filter([("user", q.MATCH_EXACT, None)])


def test_rate_counts_at_least_num_minus_one_windows() -> None:
    r = Rate(samples=11, window_s=1.0, now=100.0)
    r.record(1000, 100.0)
    # a new client is judged over 10 s, not over the few ms it has existed
    assert r.window(100.001) == pytest.approx(10.001)
    assert r.value(100.001) == pytest.approx(1000 / 10.001)
    for t in range(1, 30):
        r.record(1000, 100.0 + t)
    # 11 live samples covering the last ~10-11 s: 1000 bytes/s
    assert r.value(129.5) == pytest.approx(11000 / 10.5)


def test_throttle_time_is_kafkas_formula() -> None:
    assert q.throttle_ms(100, 100, 10) == 0
    assert q.throttle_ms(150, 100, 10) == 5000  # (150-100)/100 * 10 s


def test_throttled_client_converges_to_its_quota() -> None:
    """A client that sends as fast as it may (waiting its throttle time each time) gets the
    quota's rate over the run."""
    quotas = ClientQuotas(QuotaWindow(samples=11, size_s=1.0))
    quotas.update({_ent(client_id="slow"): {"producer_byte_rate": 10_000}})
    now, sent = 0.0, 0
    while now < 60.0:
        throttle = quotas.record("producer_byte_rate", "ANONYMOUS", "slow", 4096, now)
        sent += 4096
        now += 0.001 + throttle / 1000
    assert sent / now == pytest.approx(10_000, rel=0.1)
    # another client id has no quota and is never throttled
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "fast", 10**9, now) == 0


def test_quota_change_applies_at_once_and_unrecord() -> None:
    quotas = ClientQuotas()
    assert quotas.record("producer_byte_rate", "u", "c", 10**6, 0.0) == 0
    quotas.update({_ent(user="u"): {"producer_byte_rate": 1000}})
    # 2000 B/s over the 10 s window, twice the quota: 10 s of silence
    assert quotas.record("producer_byte_rate", "u", "c", 20_000, 0.0) == 10_000
    quotas.unrecord("producer_byte_rate", "u", "c", 20_000)
    assert quotas.record("producer_byte_rate", "u", "other", 5_000, 0.0) == 0  # same user, shared rate
    assert quotas.max_in_window("producer_byte_rate", "u", "c") == 10_000
    assert quotas.max_in_window("consumer_byte_rate", "u", "c") is None
