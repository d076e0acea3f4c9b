"""The broker's reader of ``_schemas`` (``framework/coordinator/schemas_topic.py``) over a real
log: lazy catch-up to the high watermark, a log replaced or truncated under it, no replica."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from framework.coordinator.schemas_topic import SchemasTopic
from framework.protocol import records as rb
from framework.storage.log import Log
from tests.support.schemas_topic import delete_subject, schema
from tests.support.storage import NOW, append, open_log


@dataclass
class FakePartition:
    log: Log

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark


def write(lg: Log, *records: tuple[bytes, bytes | None]) -> None:
    append(lg, rb.build_batch(list(records), timestamp_ms=NOW))


def test_reads_lazily_up_to_the_high_watermark(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path)
    part = FakePartition(lg)
    reader = SchemasTopic(lambda: part)
    write(lg, schema("t-value", 1, 1), schema("t-key", 1, 2))
    check = reader.check("t", key=True, value=True)
    assert check.value_ids == {1} and check.key_ids == {2} and check.note == ""
    assert (check.key_subject, check.value_subject) == ("t-key", "t-value")
    assert reader.check("t", key=False, value=True).key_ids is None
    assert reader.check("t", True, True) is reader.check("t", True, True)  # made once per topic

    write(lg, schema("t-value", 2, 7))  # registered after the first check: read at the next
    lg.high_watermark -= 1  # not committed yet: not read
    assert reader.check("t", False, True).value_ids == {1}
    lg.high_watermark += 1
    assert reader.check("t", False, True).value_ids == {1, 7}
    assert reader.next_offset == lg.log_end_offset == 3 and reader.records == 3

    write(lg, delete_subject("t-value", 2))
    assert check.value_ids == {1, 7}  # the set is changed on the event loop, not behind a check
    assert reader.check("t", False, True).value_ids == set()


def test_a_new_or_truncated_log_is_read_again_from_its_start(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "a")
    part = FakePartition(lg)
    reader = SchemasTopic(lambda: part)
    write(lg, schema("t-value", 1, 1))
    write(lg, schema("t-value", 2, 2))
    assert reader.check("t", False, True).value_ids == {1, 2}

    lg.truncate_to(1)  # a follower truncated to its leader's log
    lg.high_watermark = 1
    assert reader.check("t", False, True).value_ids == {1}

    other, _ = open_log(tmp_path / "b")  # the topic re-created: another log
    write(other, schema("t-value", 1, 9))
    part.log = other
    assert reader.check("t", False, True).value_ids == {9}


def test_without_a_replica_no_id_is_known_and_the_refusal_says_why(tmp_path: Path) -> None:
    reader = SchemasTopic(lambda: None)
    check = reader.check("t", True, True)
    assert check.value_ids == set() and check.key_ids == set()
    assert "holds no replica of _schemas" in check.note


def test_refresh_reads_on_to_the_log_end_once(tmp_path: Path) -> None:
    """A follower's records arrive a fetch before it learns they are committed: before a batch
    is refused, the reader reads what the replica holds."""
    lg, _ = open_log(tmp_path)
    part = FakePartition(lg)
    reader = SchemasTopic(lambda: part)
    write(lg, schema("t-value", 1, 1))
    lg.high_watermark = 0
    assert reader.check("t", False, True).value_ids == set()
    assert reader.refresh()
    assert reader.check("t", False, True).value_ids == {1}
    assert not reader.refresh()  # nothing more to read
    assert not SchemasTopic(lambda: None).refresh()
