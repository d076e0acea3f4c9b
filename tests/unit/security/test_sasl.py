"""The SASL state machine of one connection (framework/security/sasl.py), with scramp as client."""

from __future__ import annotations

import pytest

from framework.clock import ManualClock
from framework.errors import IllegalSaslState, SaslAuthenticationFailed, UnsupportedSaslMechanism
from framework.security import scram
from framework.security.principal import KafkaPrincipal
from framework.security.sasl import FAILED, SaslClient, SaslServerSession, State

SECRET = b"s" * 32
ALL = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def _store(**users: str) -> dict[tuple[str, str], scram.ScramCredential]:
    return {
        (u, m): scram.from_password(m, p)
        for u, p in users.items()
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    }


CREDS = _store(alice="alice-secret", **{"bob,the=builder": "b0b"})


def session(
    mechs: list[str] = ALL, reauth_ms: int = 0, clock: ManualClock | None = None
) -> SaslServerSession:
    clock = clock if clock is not None else ManualClock(wall_ms=1_000)
    return SaslServerSession(mechs, lambda u, m: CREDS.get((u, m)), SECRET, reauth_ms, clock)


def run(s: SaslServerSession, mech: str, user: str, password: str) -> KafkaPrincipal | None:
    s.handshake(mech)
    c = SaslClient(mech, user, password)
    token: bytes | None = c.first()
    principal = None
    while token is not None:
        step = s.authenticate(token)
        principal = step.principal
        token = c.step(step.token)
        if principal is not None:
            assert token is None
    return principal


@pytest.mark.parametrize("mech", ALL)
def test_each_mechanism_authenticates_with_the_right_password(mech: str) -> None:
    s = session()
    assert run(s, mech, "alice", "alice-secret") == KafkaPrincipal("User", "alice")
    assert s.state is State.COMPLETE and s.authenticated


@pytest.mark.parametrize("mech", ALL)
def test_names_with_comma_and_equals_sign(mech: str) -> None:
    assert run(session(), mech, "bob,the=builder", "b0b") == KafkaPrincipal("User", "bob,the=builder")


@pytest.mark.parametrize("mech", ALL)
@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "alice-secret")])
def test_wrong_password_and_unknown_user_fail_alike(mech: str, user: str, password: str) -> None:
    s = session()
    with pytest.raises(SaslAuthenticationFailed) as exc:
        run(s, mech, user, password)
    assert exc.value.message == FAILED
    assert not s.authenticated
    assert s.last_failure  # the reason is kept for the broker's log only


def test_unknown_user_gets_a_plausible_server_first_message() -> None:
    """The first SCRAM answer for an unknown user looks like one for a known user (salt,
    iteration count), and is the same each time, so it tells nothing."""
    answers = []
    for user in ("alice", "mallory", "mallory"):
        s = session()
        s.handshake("SCRAM-SHA-256")
        first = s.authenticate(SaslClient("SCRAM-SHA-256", user, "x").first()).token.decode()
        fields = dict(f.split("=", 1) for f in first.split(","))
        assert set(fields) == {"r", "s", "i"} and fields["i"] == "4096"
        answers.append(fields["s"])
    assert answers[1] == answers[2] != answers[0]


def test_authenticate_before_handshake_is_illegal() -> None:
    with pytest.raises(IllegalSaslState):
        session().authenticate(b"\0alice\0alice-secret")


def test_mechanism_not_enabled_is_refused() -> None:
    s = session(["SCRAM-SHA-512"])
    with pytest.raises(UnsupportedSaslMechanism):
        s.handshake("PLAIN")
    with pytest.raises(UnsupportedSaslMechanism):
        s.handshake("GSSAPI")


def test_plain_refuses_another_authorization_id_and_malformed_tokens() -> None:
    for token in (b"bob\0alice\0alice-secret", b"alice\0alice-secret", b"\0\0", b"\xff\0alice\0x"):
        s = session()
        s.handshake("PLAIN")
        with pytest.raises(SaslAuthenticationFailed):
            s.authenticate(token)
    s = session()
    s.handshake("PLAIN")
    assert s.authenticate(b"alice\0alice\0alice-secret").principal == KafkaPrincipal("User", "alice")


def test_scram_refuses_delegation_tokens_and_garbage() -> None:
    s = session()
    s.handshake("SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationFailed):
        s.authenticate(b"n,,n=alice,r=abc,tokenauth=true")
    s = session()
    s.handshake("SCRAM-SHA-256")
    with pytest.raises(SaslAuthenticationFailed):
        s.authenticate(b"garbage")


def test_session_lifetime_and_expiry() -> None:
    clock = ManualClock(wall_ms=1_000)
    s = session(reauth_ms=5_000, clock=clock)
    s.handshake("SCRAM-SHA-256")
    c = SaslClient("SCRAM-SHA-256", "alice", "alice-secret")
    final = c.step(s.authenticate(c.first()).token)
    assert final is not None
    step = s.authenticate(final)
    assert step.session_lifetime_ms == 5_000 and step.principal == KafkaPrincipal("User", "alice")
    assert s.expires_at_ms == 6_000 and not s.expired()
    clock.advance(4_999)
    assert not s.expired()
    clock.advance(1)
    assert s.expired()


def test_reauthentication_renews_the_session_with_the_same_principal() -> None:
    clock = ManualClock(wall_ms=0)
    s = session(reauth_ms=1_000, clock=clock)
    run(s, "SCRAM-SHA-512", "alice", "alice-secret")
    clock.advance(900)
    assert run(s, "SCRAM-SHA-512", "alice", "alice-secret") == KafkaPrincipal("User", "alice")
    assert s.expires_at_ms == 1_900
    clock.advance(600)
    assert not s.expired()


def test_reauthentication_cannot_change_principal_or_mechanism() -> None:
    s = session(reauth_ms=1_000)
    run(s, "SCRAM-SHA-256", "alice", "alice-secret")
    with pytest.raises(IllegalSaslState):
        s.handshake("PLAIN")
    with pytest.raises(SaslAuthenticationFailed):
        run(s, "SCRAM-SHA-256", "bob,the=builder", "b0b")
    assert s.principal == KafkaPrincipal("User", "alice")


def test_no_lifetime_without_connections_max_reauth_ms() -> None:
    s = session()
    s.handshake("PLAIN")
    step = s.authenticate(b"\0alice\0alice-secret")
    assert step.session_lifetime_ms == 0 and s.expires_at_ms is None and not s.expired()


def test_client_detects_a_forged_server_signature() -> None:
    c = SaslClient("SCRAM-SHA-256", "alice", "alice-secret")
    s = session()
    s.handshake("SCRAM-SHA-256")
    final = c.step(s.authenticate(c.first()).token)
    assert final is not None
    with pytest.raises(SaslAuthenticationFailed):
        c.step(b"v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
