"""All partition logs of one data directory, and the files that describe them.

Layout of the data directory::

    .lock                             flock'ed while a broker uses the directory
    .clean-shutdown                   present only after a clean stop (skips recovery)
    recovery-point-offset-checkpoint  per partition: offsets below are known fsynced
    log-start-offset-checkpoint       per partition: first offset still readable
    <topic>-<partition>/              one directory per partition log (see log.py)
    __metadata/metadata.json          streams and topics (see metadata/store.py)

Checkpoint files use Kafka's text format: a version line (0), a count line, then one
``<topic> <partition> <offset>`` line per partition, written to a temporary file and renamed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path

from framework.clock import SYSTEM, Clock
from framework.errors import StoreError
from framework.storage.files import write_durably
from framework.storage.log import LoadReport, Log, partition_dir_name
from framework.storage.log_config import LogConfig

log = logging.getLogger("sftraffic.storage")

CLEAN_SHUTDOWN = ".clean-shutdown"
RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"
START_CHECKPOINT = "log-start-offset-checkpoint"


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return out
    try:
        if not lines or lines[0].strip() != "0":
            raise ValueError("bad version")
        count = int(lines[1])
        for line in lines[2 : 2 + count]:
            topic, part, off = line.rsplit(" ", 2)
            out[(topic, int(part))] = int(off)
    except (ValueError, IndexError):
        log.warning("ignoring unreadable checkpoint %s", path)
        return {}
    return out


def write_checkpoint(path: Path, entries: dict[tuple[str, int], int]) -> None:
    body = [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    text = "\n".join(["0", str(len(body)), *body]) + "\n"
    write_durably(path, text.encode())


class LogManager:
    def __init__(self, data_dir: Path, clock: Clock = SYSTEM) -> None:
        self.dir = data_dir
        self.clock = clock  # given to every log it opens
        self.logs: dict[tuple[str, int], Log] = {}
        self.clean_shutdown = False
        self._lock_fd = -1
        self._recovery: dict[tuple[str, int], int] = {}
        self._starts: dict[tuple[str, int], int] = {}
        self.load_reports: dict[tuple[str, int], LoadReport] = {}

    def start(self) -> None:
        """Lock the directory and read the checkpoints (logs open lazily via ``open_log``)."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create data dir {self.dir}: {exc.strerror}") from None
        self._lock_fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise StoreError(
                f"data dir {self.dir} is in use by another broker; give each broker its own --data-dir"
            ) from None
        marker = self.dir / CLEAN_SHUTDOWN
        self.clean_shutdown = marker.exists()
        if self.clean_shutdown:
            marker.unlink()
        elif any(p.is_dir() for p in self.dir.iterdir()):  # a brand-new data dir has nothing to recover
            log.info("no clean-shutdown marker in %s: logs will be recovered", self.dir)
        self._recovery = read_checkpoint(self.dir / RECOVERY_CHECKPOINT)
        self._starts = read_checkpoint(self.dir / START_CHECKPOINT)
        for d in self.dir.glob("*-delete"):
            shutil.rmtree(d, ignore_errors=True)

    def partition_dirs(self) -> list[tuple[str, int, Path]]:
        out = []
        for d in self.dir.iterdir():
            if (
                not d.is_dir()
                or d.name.startswith(("__metadata", "."))
                or d.name.endswith(("-delete", ".stray"))
            ):
                continue
            topic, dash, part = d.name.rpartition("-")
            if dash and part.isdigit():
                out.append((topic, int(part), d))
        return out

    def open_log(self, topic: str, partition: int, config: LogConfig) -> Log:
        key = (topic, partition)
        lg = self.logs.get(key)
        if lg is not None:
            return lg
        d = self.dir / partition_dir_name(topic, partition)
        t0 = time.perf_counter()
        lg, report = Log.open(
            d,
            topic,
            partition,
            config,
            recovery_point=self._recovery.get(key, 0),
            log_start_offset=self._starts.get(key, 0),
            clean_shutdown=self.clean_shutdown,
            clock=self.clock,
        )
        self.load_reports[key] = report
        if report.recovered_segments or report.truncated_bytes or report.rebuilt_indexes:
            log.info(
                "%s: loaded in %.0f ms (%d segments, %d recovered, %d bytes truncated, %d indexes rebuilt)",
                lg.name,
                (time.perf_counter() - t0) * 1000,
                report.segments,
                report.recovered_segments,
                report.truncated_bytes,
                report.rebuilt_indexes,
            )
        self.logs[key] = lg
        return lg

    def remove_log(self, topic: str, partition: int) -> None:
        """Forget a partition and delete its files in the background."""
        lg = self.logs.pop((topic, partition), None)
        d = self.dir / partition_dir_name(topic, partition)
        if lg is not None:
            lg.close()
        if d.exists():
            target = d.with_name(f"{d.name}.{uuid.uuid4().hex[:8]}-delete")
            os.replace(d, target)
            threading.Thread(target=shutil.rmtree, args=(target, True), daemon=True).start()

    def quarantine(self, path: Path) -> None:
        target = path.with_name(path.name + ".stray")
        log.warning("%s belongs to no known topic: moved to %s", path.name, target.name)
        os.replace(path, target)

    def checkpoint(self) -> None:
        rec = {k: lg.recovery_point for k, lg in self.logs.items()}
        starts = {k: lg.log_start_offset for k, lg in self.logs.items()}
        write_checkpoint(self.dir / RECOVERY_CHECKPOINT, rec)
        write_checkpoint(self.dir / START_CHECKPOINT, starts)

    def flush_due(self, now_ms: int) -> None:
        for lg in self.logs.values():
            if lg.unflushed_messages and now_ms - lg.last_flush_ms >= lg.config.flush_ms:
                lg.flush()

    def enforce_retention(self, now_ms: int) -> int:
        freed = 0
        for lg in list(self.logs.values()):
            try:
                freed += lg.delete_retained_segments(now_ms)
            except OSError as exc:
                log.error("%s: retention failed: %s", lg.name, exc)
        return freed

    def shutdown(self) -> None:
        """Flush everything, write checkpoints and the clean-shutdown marker (once: a second
        call, e.g. a forced stop after a clean one, does nothing)."""
        if self._lock_fd < 0:
            return
        clean = True
        for lg in self.logs.values():
            try:
                lg.flush()
            except StoreError as exc:
                clean = False  # the next start must recover this data
                log.error("%s: flush at shutdown failed: %s", lg.name, exc)
            lg.close()
        self.checkpoint()
        if clean:
            (self.dir / CLEAN_SHUTDOWN).write_text(str(self.clock.wall_ms() // 1000))
        self.logs.clear()
        if self._lock_fd >= 0:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1
