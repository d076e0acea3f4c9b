"""The gateway's payload validation: every bad payload becomes InvalidEvent with a reason."""

from __future__ import annotations

import pytest

from sensors import schema

INFRA = b'{"type": "infrastructure", "sensor_id": "a", "kind": "k", "asset": "b", '


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"type": []}', "unknown type"),
        (b'{"type": "boat"}', "unknown type"),
        (b'{"type": "infrastructure", "sensor_id": "a"}', "missing"),
        (
            INFRA + b'"seq": 0, "event_time": "x"}',
            "event_time",
        ),
        (
            INFRA + b'"seq": -1, "event_time": 5}',
            "seq",
        ),
    ],
)
def test_bad_payloads_are_invalid_events_with_the_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(schema.InvalidEvent, match=reason):
        schema.decode(payload)


def test_a_valid_event_round_trips() -> None:
    ev = {
        "type": "infrastructure",
        "sensor_id": "a",
        "seq": 3,
        "event_time": 5,
        "kind": "bridge",
        "asset": "b",
    }
    assert schema.decode(schema.encode(ev)) == ev
