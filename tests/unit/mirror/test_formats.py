"""MM2's record layouts of offset syncs, checkpoints and heartbeats; the progress JSON."""

from __future__ import annotations

import pytest

from mirror.formats import (
    Checkpoint,
    FormatError,
    Heartbeat,
    OffsetSync,
    decode_progress,
    progress_key,
    progress_value,
)


def test_offset_sync_bytes_are_mm2s() -> None:
    s = OffsetSync("orders", 2, 1000, 998)
    assert s.key() == b"\x00\x06orders\x00\x00\x00\x02"
    assert s.value() == (1000).to_bytes(8, "big") + (998).to_bytes(8, "big")
    assert OffsetSync.decode(s.key(), s.value()) == s


def test_checkpoint_and_heartbeat_round_trip_with_version_0() -> None:
    c = Checkpoint("g", "east.orders", 1, 50, 49, "meta")
    assert c.value()[:2] == b"\x00\x00"
    assert Checkpoint.decode(c.key(), c.value()) == c
    h = Heartbeat("east", "west", 1_700_000_000_000)
    assert h.key() == b"\x00\x04east\x00\x04west"
    assert Heartbeat.decode(h.key(), h.value()) == h


def test_bad_records_raise_format_error() -> None:
    with pytest.raises(FormatError):
        OffsetSync.decode(b"\x00\x09short", b"")
    with pytest.raises(FormatError):
        Checkpoint.decode(Checkpoint("g", "t", 0, 1, 1).key(), b"\x00\x01" + bytes(20))
    with pytest.raises(FormatError):
        decode_progress(b"not json", b"{}")


def test_progress_records() -> None:
    key = progress_key("east", "orders", 3)
    assert key == b'["mirror-source",{"cluster":"east","partition":3,"topic":"orders"}]'
    assert decode_progress(key, progress_value(41)) == ("east", "orders", 3, 41)
    assert decode_progress(key, None) == ("east", "orders", 3, None)
