"""Running a benchmark: repetitions across systems, the processes it starts, its ``main``.

* :func:`rotation`: the order of the systems in repetition ``rep``. All systems run at once
  and every phase of a repetition runs on each in turn, the order rotating by one per
  repetition (A B C, B C A, C A B; with two systems A B, B A, A B, ...), so that a busy few
  seconds on a shared machine hit every system alike rather than whichever ran then.
* :class:`Processes`: every process a run starts (:class:`deploy.local.process.ManagedProcess`),
  stopped in reverse order when the ``with`` block ends, also on Ctrl-C or SIGTERM.
* :func:`run_main`: the ``main`` of every benchmark: SIGTERM unwinds like Ctrl-C (so the
  ``with`` blocks stop what they started), then render, write the JSON, and the exit code:
  0, 1 when the run recorded errors, 130 when interrupted.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from load.harness.report import stderr

T = TypeVar("T")


def rotation(items: Sequence[T], rep: int) -> list[T]:
    """``items`` rotated left by ``rep - 1`` (``rep`` counts from 1)."""
    k = (rep - 1) % len(items) if items else 0
    return [*items[k:], *items[:k]]


P = TypeVar("P")


class Processes(contextlib.ExitStack):
    """The processes of one run; each is stopped (SIGTERM, then SIGKILL, to its process group)
    when the block ends, in the reverse order of their start."""

    def add(self, proc: P) -> P:
        """Stop ``proc`` at the end (it is started, or being started, by the caller)."""
        self.callback(proc.stop)  # type: ignore[attr-defined]
        return proc

    def start(self, proc: P, timeout: float = 60.0) -> P:
        """Start ``proc`` (``proc.start(timeout)``), wait until it is ready, stop it at the end."""
        self.add(proc)
        proc.start(timeout)  # type: ignore[attr-defined]
        return proc


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def on_sigterm_interrupt() -> Any:
    """SIGTERM (CI timeouts, kill) unwinds like Ctrl-C, so every started process is stopped;
    returns the handler it replaced."""
    return signal.signal(signal.SIGTERM, _interrupt)


def run_main(
    run: Callable[[], dict[str, Any]],
    render: Callable[[dict[str, Any], Console], None],
    json_path: str | None = None,
    ok: Callable[[dict[str, Any]], bool] = lambda doc: not doc["errors"],
    name: str = "benchmark",
) -> int:
    previous = on_sigterm_interrupt()
    t0 = time.monotonic()
    try:
        doc = run()
    except KeyboardInterrupt:
        print(f"{name}: interrupted; every process it started was stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    doc.setdefault("elapsed_s", round(time.monotonic() - t0, 1))
    out = Console()
    render(doc, out if out.is_terminal else Console(width=160))  # a file or pipe: no wrapping at 80 columns
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(doc, indent=2, default=str) + "\n")
        stderr.print(f"results written to {json_path}")
    return 0 if ok(doc) else 1
