"""The gateway's MQTT stream parser and PUBACK ordering (sensors/gateway.py), fed bytes by hand:
no Mosquitto, no broker, no sockets."""

from __future__ import annotations

from pathlib import Path

import pytest


# -- the gateway's MQTT stream, without services ------------------------------------------------
def _publish_packet(mid: int, topic: str, payload: bytes, props: bytes | None = None) -> bytes:
    t = topic.encode()
    body = len(t).to_bytes(2, "big") + t + mid.to_bytes(2, "big")
    if props is not None:  # MQTT 5: property length (one byte here) + properties
        body += bytes([len(props)]) + props
    body += payload
    n, rl = len(body), bytearray()
    while True:
        n, b = n >> 7, n & 127
        rl.append(b | (128 if n else 0))
        if not n:
            return bytes([0x32, *rl]) + body


class _Transport:
    def __init__(self) -> None:
        self.written = b""

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.mark.parametrize("v5", [False, True])
def test_link_parses_publish_packets_across_reads(tmp_path: Path, v5: bool) -> None:
    from sensors.gateway import Gateway, GatewayConfig

    gw = Gateway(GatewayConfig(bootstrap="127.0.0.1:1", queue_dir=str(tmp_path)))
    got: list[tuple[int, bytes, bytes]] = []
    gw._on_publish = lambda link, tag, topic, payload: got.append((tag & 0xFFFF, topic, payload))  # type: ignore[method-assign]
    link = gw._new_link(_Transport(), None, v5)
    props = b"\x01\x01" if v5 else None  # payload format indicator
    big = b"x" * 20_000  # a 3-byte remaining length
    stream = b"".join(
        [_publish_packet(7, "sf/a/b/c", b"one", props), _publish_packet(8, "sf/a/b/d", big, props)]
    )
    for i in range(0, len(stream), 3):  # cut everywhere, including inside the remaining length
        link.data_received(stream[i : i + 3])
    assert got == [(7, b"sf/a/b/c", b"one"), (8, b"sf/a/b/d", big)]
    assert link.rest == b""


def test_pubacks_for_a_reused_packet_id_wait_for_the_oldest_message(tmp_path: Path) -> None:
    """Mosquitto numbers a backlog of > 65,535 messages with ids in use twice; a PUBACK removes
    the oldest message with that id, so it may go out only once that one is stored."""
    from sensors.gateway import Gateway, GatewayConfig

    gw = Gateway(GatewayConfig(bootstrap="127.0.0.1:1", queue_dir=str(tmp_path)))
    tags: list[int] = []
    gw._on_publish = lambda link, tag, topic, payload: tags.append(tag)  # type: ignore[method-assign]
    link = gw._new_link(_Transport(), None, False)
    link.data_received(b"".join(_publish_packet(mid, "sf/a/b/c", b"{}") for mid in (1, 2, 1, 1)))
    first, other, second, third = tags
    gw._ack(link, second)  # stored before the older message with id 1: no PUBACK yet
    assert gw._acks == []
    gw._ack(link, other)
    assert gw._acks == [2]
    gw._ack(link, first)  # now both
    assert gw._acks == [2, 1, 1]
    gw._ack(link, third)
    assert gw._acks == [2, 1, 1, 1]
    assert link.pending == {} and link.done == set()
    gw._write_acks()
    assert link.transport.written == b"\x40\x02\x00\x02" + b"\x40\x02\x00\x01" * 3
