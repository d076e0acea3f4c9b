"""Small durable files (checkpoints, metadata): replace a file so a crash leaves old or new.

``write_durably`` writes the bytes to ``<name>.tmp`` beside the target, fsyncs it, renames it
over the target and fsyncs the directory, so after a crash the path holds either the previous
content or the new one, never a mix, and the rename itself survives a power loss.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
