"""An ``os`` stand-in that records the calls a crash-safe file replacement makes."""

from __future__ import annotations

import os
import stat
from typing import Any


class RecordingOs:
    """Delegates to :mod:`os`; ``calls`` lists "fsync file", "fsync dir" and "replace" in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def replace(self, src: Any, dst: Any) -> None:
        self.calls.append("replace")
        os.replace(src, dst)

    def fsync(self, fd: int) -> None:
        self.calls.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        os.fsync(fd)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)
