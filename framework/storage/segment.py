"""One log segment: a file of record batches plus its offset and time indexes.

Files, named by the segment's base offset as 20 zero-padded digits (Kafka's layout)::

    00000000000000000000.log        record batches (Kafka v2 format), exactly as served
    00000000000000000000.index      sparse offset index (see offset_index.py)
    00000000000000000000.timeindex  sparse time index (see time_index.py)
    00000000000000000000.txnindex   aborted transactions whose ABORT marker is in this
                                    segment (see txn_index.py); created empty with the segment

The ``.log`` file is a concatenation of whole record batches whose base offsets strictly
increase, all >= the segment's base offset. Its size is only ever changed by appending whole
batches or by truncating back to a batch boundary, so after any crash the file is a valid
prefix followed at most by one torn batch, which :meth:`LogSegment.recover` cuts off.

Not thread-safe: one partition owns its segments and uses them from the event loop (fsync
may run in a worker thread; it does not touch in-memory state).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from framework.errors import CorruptStoredBatch, KafkaStorageError
from framework.protocol import records as rb
from framework.storage.offset_index import CorruptIndex, OffsetIndex, _fsync_path
from framework.storage.time_index import TimeIndex
from framework.storage.txn_index import TransactionIndex

log = logging.getLogger("sftraffic.storage")

SCAN_WINDOW = 64 * 1024
RECOVER_WINDOW = 4 * 1024 * 1024

# one background thread fsyncs rolled segments (Kafka flushes them asynchronously on roll)
_FLUSHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="segment-fsync")


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def _reason(exc: OSError) -> str:
    """The reason for messages: "disk full (ENOSPC)", "Input/output error (EIO)" ..."""
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    what = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
    return f"{what} ({name})"


_REPORTED: set[tuple[Path, int]] = set()  # damaged batches already logged (once each)


def _damaged(message: str, path: Path, position: int) -> CorruptStoredBatch:
    """The error for a damaged stored batch, logged the first time it is met."""
    if (path, position) not in _REPORTED:
        if len(_REPORTED) >= 10_000:
            _REPORTED.clear()
        _REPORTED.add((path, position))
        log.error("%s (reads that need its records answer CORRUPT_MESSAGE)", message)
    return CorruptStoredBatch(message)


class LogSegment:
    __slots__ = (
        "_bytes_since_index",
        "_fd",
        "_torn",
        "base_offset",
        "created_ms",
        "dir",
        "index",
        "index_interval",
        "max_timestamp",
        "next_offset",
        "offset_of_max_timestamp",
        "path",
        "size",
        "time_index",
        "txn_index",
    )

    def __init__(
        self, directory: Path, base_offset: int, index_interval: int = 4096, created_ms: int = 0
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.path = directory / segment_name(base_offset, ".log")
        self.index = OffsetIndex(directory / segment_name(base_offset, ".index"), base_offset)
        self.time_index = TimeIndex(directory / segment_name(base_offset, ".timeindex"), base_offset)
        self.txn_index = TransactionIndex(directory / segment_name(base_offset, ".txnindex"), base_offset)
        self.index_interval = index_interval
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.created_ms = created_ms  # the log's clock when it was created (see rolling_base_ms)
        self._bytes_since_index = 0
        self._fd = -1
        self._torn = False  # a failed write left bytes past ``size`` that could not be cut off

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def create(
        cls, directory: Path, base_offset: int, index_interval: int = 4096, created_ms: int = 0
    ) -> LogSegment:
        seg = cls(directory, base_offset, index_interval, created_ms)
        seg._fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            seg.index.flush()
            seg.time_index.flush()
            seg.txn_index.rewrite()
        except OSError:
            seg.delete()  # no half-created segment left to block the next attempt (O_EXCL)
            raise
        return seg

    @classmethod
    def open(cls, directory: Path, base_offset: int, index_interval: int = 4096) -> LogSegment:
        """Open an existing segment without scanning it (indexes loaded, checked by caller)."""
        seg = cls(directory, base_offset, index_interval)
        seg._fd = os.open(seg.path, os.O_RDWR)
        seg.size = os.fstat(seg._fd).st_size
        return seg

    def load_indexes(self) -> bool:
        """Load and check both indexes and find the next offset; False if a rebuild is needed."""
        try:
            self.index.load()
            self.index.sanity_check(self.size)
            self.time_index.load()
        except CorruptIndex:
            return False
        # find the end: scan batch prefixes from the last index entry to the end of file
        last_off, pos = self.index.last_entry()
        nxt = self.base_offset
        end_pos = pos
        while end_pos + rb.LOG_OVERHEAD <= self.size:
            prefix = os.pread(self._fd, rb.HEADER_SIZE, end_pos)
            if len(prefix) < rb.HEADER_SIZE:
                return False
            h = rb.read_header(prefix)
            if h.batch_length < rb.MIN_BATCH_LENGTH or end_pos + h.size > self.size:
                return False
            if end_pos == pos and self.index.offsets and h.base_offset != last_off:
                return False  # the last entry does not name the batch it points at
            nxt = h.next_offset
            end_pos += h.size
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.last_offset
        if end_pos != self.size:
            return False
        if self.size == 0:
            nxt = self.base_offset
        self.next_offset = max(nxt, last_off)
        try:
            self.time_index.sanity_check(self.next_offset)
        except CorruptIndex:
            return False
        if self.time_index.max_timestamp > self.max_timestamp:
            self.max_timestamp = self.time_index.max_timestamp
            self.offset_of_max_timestamp = self.time_index.offsets[-1]
        return True

    def load_txn_index(self) -> bool:
        """Load the aborted-transactions index; False when it must be rebuilt by the log
        (missing, or an entry outside this segment's offsets or out of order)."""
        try:
            self.txn_index.load(self.next_offset)
        except CorruptIndex:
            self.txn_index.entries = []
            return False
        return True

    def recover(self) -> int:
        """Validate every batch, truncate after the last valid one and rebuild the indexes.

        Returns the number of bytes cut off. CRC, framing, magic and offset order are checked
        (Kafka's ``LogSegment.recover``).
        """
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self._bytes_since_index = 0
        pos = 0
        nxt = self.base_offset
        size = os.fstat(self._fd).st_size
        while pos < size:
            chunk = os.pread(self._fd, min(RECOVER_WINDOW, size - pos), pos)
            valid, batches = rb.scan_valid_prefix(chunk, nxt)
            for bpos, bh in batches:
                self._index_batch(pos + bpos, bh)
                nxt = bh.next_offset
            pos += valid
            rest = len(chunk) - valid
            if rest == 0:
                continue
            if pos + rest >= size and rest < rb.HEADER_SIZE:
                break  # torn header at the end of the file
            if rest >= rb.HEADER_SIZE:
                h = rb.read_header(chunk, valid)
                if h.batch_length < rb.MIN_BATCH_LENGTH or pos + h.size > size:
                    break  # garbage or a torn batch at the end
                if h.size <= rest:
                    break  # a whole batch that failed validation
                # the batch straddles the window: read it whole
                whole = os.pread(self._fd, h.size, pos)
                v2, bs = rb.scan_valid_prefix(whole, nxt)
                if not bs:
                    break
                for bpos, bh in bs:
                    self._index_batch(pos + bpos, bh)
                    nxt = bh.next_offset
                pos += v2
            # else: header straddles the window; the next pread starts at pos
        truncated = size - pos
        if truncated:
            os.ftruncate(self._fd, pos)
        self.size = pos
        self.next_offset = nxt
        self._final_time_entry()
        self.index.flush()
        self.time_index.flush()
        return truncated

    def _final_time_entry(self) -> None:
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def _index_batch(self, position: int, h: rb.BatchHeader) -> None:
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.last_offset
        if self._bytes_since_index > self.index_interval:
            self.index.append(h.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += h.size

    # -- writes ----------------------------------------------------------------------------
    def append(self, data: memoryview, batches: list[rb.BatchHeader]) -> None:
        """Append whole batches (already validated and offset-patched) at the end.

        On an I/O error (a full disk: ENOSPC, EIO ...) the file is cut back to its previous
        size and nothing in memory changes (size, next offset, indexes, max timestamp), so the
        segment never holds a partial batch written by us; :class:`KafkaStorageError`
        (retriable) is raised and a later append, once the disk has room, goes on from there.
        If even the cut fails, the next append retries it before writing.
        """
        start = self.size
        if self._torn:
            self._cut_back(start, None)
        total = len(data)
        written = 0
        try:
            while written < total:
                written += os.pwrite(self._fd, data[written:], start + written)
        except OSError as exc:
            self._cut_back(start, exc)
            raise KafkaStorageError(f"cannot write {self.path}: {_reason(exc)}") from exc
        pos = start
        for h in batches:
            self._index_batch(pos, h)
            pos += h.size
        self.size = start + total
        self.next_offset = batches[-1].next_offset

    def _cut_back(self, size: int, cause: OSError | None) -> None:
        """Truncate the file to ``size`` after a failed write; remember if even that fails."""
        try:
            os.ftruncate(self._fd, size)
        except OSError as exc:
            self._torn = True
            log.error("%s: cannot cut a failed write back to %d bytes: %s", self.path, size, _reason(exc))
            if cause is None:
                raise KafkaStorageError(
                    f"cannot cut {self.path} back to {size} bytes after a failed write: {_reason(exc)}"
                ) from exc
            return
        self._torn = False

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset`` (a batch that straddles it
        goes whole); returns bytes removed."""
        if offset >= self.next_offset:
            return 0
        pos = self.position_of(offset) if offset > self.base_offset else 0
        removed = self.size - pos
        os.ftruncate(self._fd, pos)
        self.size = pos
        # rebuild in-memory state for what is left
        self.recover()
        self.txn_index.truncate_to(offset)
        return removed

    def flush(self) -> None:
        os.fsync(self._fd)
        self.index.flush(fsync=True)
        self.time_index.flush(fsync=True)
        self.txn_index.flush()

    def rolling_base_ms(self, now_ms: int) -> int:
        """When this segment's age for ``segment.ms`` starts: its first batch's max timestamp
        (Kafka's rule, so the age survives restarts), else the file's modification time; never
        past ``now_ms`` (the log's clock)."""
        if self.size >= rb.HEADER_SIZE:
            hdr = os.pread(self._fd, rb.HEADER_SIZE, 0)
            if len(hdr) == rb.HEADER_SIZE:
                ts = rb.read_header(hdr).max_timestamp
                if ts >= 0:
                    return min(int(ts), now_ms)
        try:
            return min(int(os.fstat(self._fd).st_mtime * 1000), now_ms)
        except OSError:
            return now_ms

    def fsync_in_background(self, done: Callable[[], None]) -> None:
        """fsync this (no longer active) segment in a worker thread, then call ``done`` there.

        The file descriptor is duplicated, so retention closing the segment meanwhile is safe.
        """
        fd = os.dup(self._fd)
        index_path, time_path, txn_path = self.index.path, self.time_index.path, self.txn_index.path

        def work() -> None:
            try:
                os.fsync(fd)
                for p in (index_path, time_path, txn_path):
                    try:
                        _fsync_path(p)
                    except FileNotFoundError:
                        pass
            except OSError as exc:
                log.error("fsync of %s failed: %s", self.path.name, exc)
                return
            finally:
                os.close(fd)
            done()

        _FLUSHER.submit(work)

    def roll_close(self) -> None:
        """Called when this segment stops being the active one: persist indexes."""
        self._final_time_entry()
        self.index.flush()
        self.time_index.flush()

    def close(self) -> None:
        if self._fd >= 0:
            if self._torn:
                self._cut_back(self.size, None)
            self._final_time_entry()
            self.index.flush()
            self.time_index.flush()
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for p in (self.path, self.index.path, self.time_index.path, self.txn_index.path):
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    # -- reads -----------------------------------------------------------------------------
    def position_of(self, offset: int) -> int:
        """Byte position of the batch containing ``offset`` (or the first batch after it).

        Returns ``self.size`` when every batch ends before ``offset``.
        """
        _, pos = self.index.lookup(offset)
        size = self.size
        fd = self._fd
        while pos < size:
            window = os.pread(fd, min(SCAN_WINDOW, size - pos), pos)
            wpos = 0
            wlen = len(window)
            while wlen - wpos >= rb.LOG_OVERHEAD:
                base, length = rb.read_prefix(window, wpos)
                bsize = length + rb.LOG_OVERHEAD
                if wlen - wpos >= rb.HEADER_SIZE:
                    h = rb.read_header(window, wpos)
                    if h.next_offset > offset:
                        return pos + wpos
                elif base >= offset:
                    return pos + wpos
                else:
                    break  # need the full header: re-read from here
                wpos += bsize
            if wpos == 0:
                # header straddles the window or batch bigger than the window
                hdr = os.pread(fd, rb.HEADER_SIZE, pos)
                if len(hdr) < rb.HEADER_SIZE:
                    return size
                h = rb.read_header(hdr)
                if h.next_offset > offset:
                    return pos
                wpos = h.size
            pos += wpos
        return size

    def read(self, offset: int, max_bytes: int, max_position: int, min_one: bool) -> bytes:
        """Bytes from the batch holding ``offset`` up to ``max_bytes`` (Kafka's FileRecords slice).

        The slice may end inside a batch (clients drop a partial trailing batch, as with
        Kafka). With ``min_one`` the first batch is returned whole even if it is larger than
        ``max_bytes`` (KIP-74). Nothing at or past ``max_position`` is returned.
        """
        pos = self.position_of(offset)
        limit = min(max_position, self.size)
        if pos >= limit:
            return b""
        length = min(max_bytes, limit - pos)
        if min_one:
            hdr = os.pread(self._fd, rb.LOG_OVERHEAD, pos)
            if len(hdr) == rb.LOG_OVERHEAD:
                first = rb.read_prefix(hdr)[1] + rb.LOG_OVERHEAD
                length = max(length, min(first, limit - pos))
        if length <= 0:
            return b""
        return os.pread(self._fd, length, pos)

    def iter_headers(self, start_offset: int) -> Iterator[rb.BatchHeader]:
        """Headers of the batches holding offsets >= ``start_offset``, in order."""
        for _, h in self.iter_positions(start_offset):
            yield h

    def iter_positions(self, start_offset: int) -> Iterator[tuple[int, rb.BatchHeader]]:
        """(byte position, header) of the batches holding offsets >= ``start_offset``."""
        pos = self.position_of(start_offset) if start_offset > self.base_offset else 0
        size = self.size
        while pos < size:
            window = os.pread(self._fd, min(RECOVER_WINDOW, size - pos), pos)
            wpos = 0
            while len(window) - wpos >= rb.HEADER_SIZE:
                h = rb.read_header(window, wpos)
                yield pos + wpos, h
                wpos += h.size
            if wpos == 0:
                hdr = os.pread(self._fd, rb.HEADER_SIZE, pos)
                if len(hdr) < rb.HEADER_SIZE:
                    return
                h = rb.read_header(hdr)
                yield pos, h
                wpos = h.size
            pos += wpos

    def read_at(self, position: int, length: int) -> bytes:
        return os.pread(self._fd, length, position)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``.

        Decodes the batches whose max timestamp reaches ``timestamp``; a damaged one raises
        :class:`CorruptStoredBatch` (CORRUPT_MESSAGE) naming it, a short read
        :class:`KafkaStorageError`.
        """
        if self.max_timestamp < timestamp:
            return None
        scan_from = max(self.time_index.lookup(timestamp), start_offset)
        pos = self.position_of(scan_from)
        while pos < self.size:
            h = self._stored_header(pos)
            if h.max_timestamp >= timestamp and h.next_offset > start_offset:
                for r in self.decode_at(pos, h):
                    if r.timestamp >= timestamp and r.offset >= start_offset:
                        return r.offset, r.timestamp
            pos += h.size
        return None

    def _stored_header(self, pos: int) -> rb.BatchHeader:
        hdr = os.pread(self._fd, rb.HEADER_SIZE, pos)
        if len(hdr) < rb.HEADER_SIZE:
            raise KafkaStorageError(f"{self.path}: short read of the batch header at position {pos}")
        h = rb.read_header(hdr)
        if h.batch_length < rb.MIN_BATCH_LENGTH or pos + h.size > self.size:
            raise CorruptStoredBatch(
                f"{self.path}: batch at position {pos} has length {h.batch_length}, past the segment's end"
            )
        return h

    def decode_at(self, pos: int, h: rb.BatchHeader) -> list[rb.Record]:
        """The records of the stored batch at ``pos`` (header ``h``), CRC checked first."""
        batch = os.pread(self._fd, h.size, pos)
        where = f"{self.path}: batch at offset {h.base_offset} (position {pos})"
        if len(batch) < h.size:
            raise KafkaStorageError(f"{where}: short read ({len(batch)} of {h.size} bytes)")
        if rb.compute_crc(batch) != h.crc:
            raise _damaged(f"{where}: CRC mismatch, the stored batch is damaged", self.path, pos)
        try:
            return rb.decode_batch(batch)[1]
        except rb.InvalidBatch as exc:
            raise _damaged(f"{where} cannot be decoded: {exc}", self.path, pos) from None

    def __repr__(self) -> str:
        return f"LogSegment({self.path.name}, size={self.size}, next={self.next_offset})"
