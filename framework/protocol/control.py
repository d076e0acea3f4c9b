"""Control records: the transaction markers (COMMIT / ABORT) that end a transaction in a log.

A control batch is a v2 batch with attributes bit 5 (control) and bit 4 (transactional) set,
the producer id and epoch of the transaction it ends, base sequence -1, and one record whose
key and value are (Kafka's ``ControlRecordType`` and ``EndTransactionMarker``)::

    key   = version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
    value = version int16 (0) | coordinator_epoch int32

Pure functions over bytes (sans-io): used by the storage layer to write and recognise markers
and by the transaction coordinator (WriteTxnMarkers) to build them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from framework.protocol import records as rb
from framework.protocol.fields import Buffer

ABORT = 0
COMMIT = 1
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class InvalidControlRecord(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """COMMIT (``commit=True``) or ABORT of producer ``producer_id`` at ``producer_epoch``."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


def marker_key(commit: bool) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)


def marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)


def build_marker_batch(
    marker: EndTxnMarker, *, base_offset: int = 0, timestamp_ms: int = 0, leader_epoch: int = -1
) -> bytes:
    """One control batch holding ``marker`` (base sequence -1, as Kafka writes them)."""
    return rb.build_batch(
        [(marker_key(marker.commit), marker_value(marker.coordinator_epoch))],
        base_offset=base_offset,
        timestamp_ms=timestamp_ms,
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        base_sequence=-1,
        leader_epoch=leader_epoch,
        control=True,
        transactional=True,
    )


def read_marker(batch: Buffer) -> EndTxnMarker | None:
    """The transaction marker in control batch ``batch``; None for another control type.

    Raises :class:`InvalidControlRecord` for a control batch that is not exactly one record
    with a version-0 key (Kafka refuses such batches too) or whose marker value is short.
    """
    h, recs = rb.decode_batch(batch)
    if not h.is_control:
        raise InvalidControlRecord(f"batch at {h.base_offset} is not a control batch")
    if len(recs) != 1:
        raise InvalidControlRecord(f"control batch at {h.base_offset} holds {len(recs)} records, not 1")
    key, value = recs[0].key, recs[0].value
    if key is None or len(key) < _KEY.size:
        raise InvalidControlRecord(f"control record at {h.base_offset} has no valid key")
    version, kind = _KEY.unpack_from(key)
    if version != CONTROL_KEY_VERSION:
        raise InvalidControlRecord(f"control record key version {version} at {h.base_offset}")
    if kind not in (ABORT, COMMIT):
        return None
    if value is None or len(value) < _VALUE.size:
        raise InvalidControlRecord(f"end transaction marker at {h.base_offset} has a short value")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return EndTxnMarker(h.producer_id, h.producer_epoch, kind == COMMIT, coordinator_epoch)
