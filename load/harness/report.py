"""What a benchmark writes: the machine it ran on, its goals, the JSON document, the console.

JSON documents go where ``--json`` says (``load/results/<benchmark>-<date>.json`` for the
results kept in the repository); every document has ``machine`` (:func:`machine_info`) and,
for the single-system benchmarks, ``goals`` (:func:`goal`) and ``errors``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent


def package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def git(*args: str, cwd: Path | str = HERE) -> str:
    """Output of a read-only git command ('' when git or the repository is absent)."""
    try:
        out = subprocess.run(["git", *args], check=False, capture_output=True, text=True, timeout=5, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def git_commit(cwd: Path | str = HERE) -> str | None:
    """Short commit of the checkout at ``cwd``, with the number of modified files when dirty
    (the figures belong to the working tree, which may differ from the commit)."""
    commit = git("rev-parse", "--short", "HEAD", cwd=cwd)
    dirty = git("status", "--porcelain", "--untracked-files=no", cwd=cwd)
    if commit and dirty:
        commit += f" (+{len(dirty.splitlines())} modified files)"
    return commit or None


def command_line(module: str) -> str:
    return shlex.join([Path(sys.executable).name, "-m", module, *sys.argv[1:]])


def machine_info(module: str = "load.bench_broker") -> dict[str, Any]:
    """CPU, memory, kernel, Python, librdkafka, commit and the command line of this run."""
    cpu_model = platform.processor() or "unknown"
    mem_total = None
    try:
        with open("/proc/cpuinfo") as fh:
            cpu_model = next(
                (ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu_model
            )
        with open("/proc/meminfo") as fh:
            mem_total = int(fh.readline().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        from confluent_kafka import libversion

        librdkafka: str | None = libversion()[0]
    except ImportError:
        librdkafka = None
    return {
        "cpu_model": cpu_model,
        "cores": os.cpu_count(),
        "mem_total_mb": mem_total,
        "loadavg_at_start": os.getloadavg(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "confluent_kafka": package_version("confluent-kafka"),
        "librdkafka": librdkafka,
        "git_commit": git_commit(),
        "command": command_line(module),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def met(value: float | None, target: float, higher_is_better: bool) -> bool | None:
    """Whether ``value`` meets ``target`` (None when it could not be measured)."""
    if value is None:
        return None
    return value >= target if higher_is_better else value <= target


def goal(
    name: str, measured: float | None, target: float, unit: str, higher_is_better: bool
) -> dict[str, Any]:
    """One goal with pass/fail, as the single-system benchmarks write them."""
    return {
        "name": name,
        "target": target,
        "measured": measured,
        "unit": unit,
        "comparison": ">=" if higher_is_better else "<=",
        "passed": met(measured, target, higher_is_better),
    }


VERDICT = {True: "[green]pass[/green]", False: "[red]FAIL[/red]", None: "[yellow]n/a[/yellow]"}


def print_goals(console: Console, goals: list[dict[str, Any]]) -> None:
    for g in goals:
        console.print(
            f"{VERDICT[g['passed']]} {g['name']}: {g['measured']} {g['comparison']} {g['target']} {g['unit']}"
        )


def write_json(doc: dict[str, Any], path: str | Path | None) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(doc, indent=2, default=str) + "\n")
        Console(stderr=True).print(f"results written to {path}")


def console_out(width: int = 160) -> Console:
    """The terminal, or a console that does not wrap tables at 80 columns for a file or pipe."""
    out = Console()
    return out if out.is_terminal else Console(width=width)


def log(console: Console, text: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {text}")


def table(title: str, *columns: str, **kw: Any) -> Table:
    """A rich table; a column name starting with ">" is right-aligned, with "^" centred."""
    t = Table(title=title, **kw)
    for c in columns:
        t.add_column(c.lstrip(">^"), justify={">": "right", "^": "center"}.get(c[:1], "left"))
    return t


def mode(args: Any) -> str:
    """ "smoke", "quick" or "full" from ``--smoke`` / ``--quick``."""
    return "smoke" if getattr(args, "smoke", False) else "quick" if args.quick else "full"


def document(benchmark: str, config: dict[str, Any]) -> dict[str, Any]:
    """The head of a single-system benchmark's JSON: name, machine, config, errors."""
    return {
        "benchmark": benchmark,
        "machine": machine_info(f"load.bench_{benchmark}"),
        "config": config,
        "errors": [],
    }


def parser(benchmark: str, doc: str | None, quick: str, smoke: str) -> argparse.ArgumentParser:
    """``python -m load.bench_<benchmark>`` with ``--quick`` | ``--smoke`` and ``--json``."""
    p = argparse.ArgumentParser(
        prog=f"python -m load.bench_{benchmark}", description=(doc or "").split("\n\n")[0]
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help=quick)
    size.add_argument("--smoke", action="store_true", help=smoke)
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    return p
