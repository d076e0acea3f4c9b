"""``py-spy record`` around a pid for the duration of a phase, and where its samples fall.

:class:`Profiler` records raw collapsed stacks, either for a fixed number of seconds or until
:meth:`Profiler.stop` (SIGINT: py-spy writes its output on Ctrl-C). ``--nonblocking`` by default
(Python frames only, the process is not paused); ``native=True`` adds C frames (librdkafka,
extensions, CPython) and pauses the process for each sample.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any


def py_spy() -> str | None:
    """The venv's py-spy, else one on PATH, else None."""
    exe = Path(sys.executable).with_name("py-spy")
    return str(exe) if exe.exists() else shutil.which("py-spy")


class Profiler:
    def __init__(
        self, pid: int, out: Path, seconds: float | None = None, rate: int = 100, *flags: str, focus: Any = ()
    ) -> None:
        """``flags``: more py-spy options (``--native`` instead of ``--nonblocking``,
        ``--subprocesses``); ``focus``: see :func:`summarize_collapsed`."""
        self.out, self.focus, self.timed = out, focus, seconds is not None
        self.proc: subprocess.Popen[bytes] | None = None
        if (exe := py_spy()) is None:
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [exe, "record", "-p", str(pid), "-r", str(rate), "-f", "raw", "-o", str(out), *flags]
        cmd += [] if "--native" in flags else ["--nonblocking"]
        cmd += ["-d", str(max(1, int(seconds)))] if seconds is not None else []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self, timeout: float = 60.0) -> str | None:
        """Wait for py-spy (SIGINT first when it records until stopped); its error, if any."""
        if self.proc is None:
            return "py-spy not installed"
        if not self.timed:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return None if self.out.exists() else (err or b"").decode(errors="replace")[-500:] or "no output"

    def summary(self, timeout: float = 60.0) -> dict[str, Any]:
        error = self.stop(timeout)
        if error is not None:
            return {"error": error}
        return summarize_collapsed(self.out.read_text(errors="replace"), 12, self.focus) | {
            "file": str(self.out)
        }


def count_collapsed(
    text: str, frame: Callable[[str], str] = str.strip, skip_leaf: str | None = None
) -> tuple[Counter[str], Counter[str], int]:
    """(samples by leaf frame, samples by any frame on the stack, samples) of py-spy's raw
    output; ``process``/``thread`` frames are dropped, stacks whose leaf is ``skip_leaf`` too."""
    leaf: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        frames = [frame(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if frames and n.isdigit() and frames[-1] != skip_leaf:
            leaf[frames[-1]] += int(n)
            inclusive.update(dict.fromkeys(frames, int(n)))
    return leaf, inclusive, leaf.total()


def summarize_collapsed(text: str, top: int = 12, focus: tuple[str, ...] = ()) -> dict[str, Any]:
    """Shares of samples (%): ``self`` by leaf frame, ``inclusive`` by any frame on the stack,
    ``focus`` inclusive but only frames whose text contains one of ``focus`` (e.g. a package's
    path), which skips the thread/event-loop frames every sample shares."""
    leaf, inclusive, total = count_collapsed(text)

    def pct(items: list[tuple[str, int]]) -> list[tuple[str, float]]:
        return [(f, round(100 * c / total, 1)) for f, c in items] if total else []

    focused = [(f, c) for f, c in inclusive.most_common() if focus and any(x in f for x in focus)]
    return {
        "samples": total,
        "self": pct(leaf.most_common(top)),
        "inclusive": pct(inclusive.most_common(top)),
        "focus": pct(focused[: 2 * top]),
    }
