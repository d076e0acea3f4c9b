"""What a benchmark writes: the machine it ran on, its goals, the head of its JSON, the console,
and the command line of the single-system benchmarks.

JSON documents go where ``--json`` says (``load/results/<benchmark>-<date>.json`` for the
results kept in the repository); every document has ``machine`` (:func:`machine_info`) and,
for the single-system benchmarks, ``goals`` (:func:`goal`) and ``errors``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

HERE = Path(__file__).resolve().parent
stderr = Console(stderr=True)


def package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def output(*cmd: str, cwd: Path | str | None = None) -> str:
    """A command's output ('' when it cannot run; its stderr only when it succeeded)."""
    try:
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=10, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() or (out.stderr.strip() if out.returncode == 0 else "")


def git_commit(cwd: Path | str = HERE) -> str | None:
    """Short commit of the checkout at ``cwd``, with the number of modified files when dirty
    (the figures belong to the working tree, which may differ from the commit)."""
    commit = output("git", "rev-parse", "--short", "HEAD", cwd=cwd)
    dirty = output("git", "status", "--porcelain", "--untracked-files=no", cwd=cwd)
    if commit and dirty:
        commit += f" (+{len(dirty.splitlines())} modified files)"
    return commit or None


def machine_info(module: str) -> dict[str, Any]:
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
    from confluent_kafka import libversion

    return {
        "cpu_model": cpu_model,
        "cores": os.cpu_count(),
        "mem_total_mb": mem_total,
        "loadavg_at_start": os.getloadavg(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "confluent_kafka": package_version("confluent-kafka"),
        "librdkafka": libversion()[0],
        "git_commit": git_commit(),
        "command": shlex.join([Path(sys.executable).name, "-m", module, *sys.argv[1:]]),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def met(value: float | None, target: float, higher_is_better: bool) -> bool | None:
    """Whether ``value`` meets ``target`` (None when it could not be measured)."""
    if value is None:
        return None
    return value >= target if higher_is_better else value <= target


def goal(name: str, measured: float | None, target: float, unit: str, higher: bool) -> dict[str, Any]:
    """One goal with pass/fail, as the single-system benchmarks write them."""
    return {
        "name": name,
        "target": target,
        "measured": measured,
        "unit": unit,
        "comparison": ">=" if higher else "<=",
        "passed": met(measured, target, higher),
    }


def verdict(name: str, value: float | None, target: float, higher: bool) -> dict[str, Any]:
    """A goal as the comparing benchmarks (bench_broker, sftraffic bench, bench_pipeline) write it."""
    return {"goal": name, "value": value, "target": target, "met": met(value, target, higher)}


VERDICT = {True: "[green]pass[/green]", False: "[red]FAIL[/red]", None: "[yellow]n/a[/yellow]"}


def print_goals(console: Console, goals: list[dict[str, Any]]) -> None:
    """Either kind of goal, one line each."""
    for g in goals:
        if "goal" in g:
            console.print(f"goal: {g['goal']}: {g['value']} (target {g['target']}) {VERDICT[g['met']]}")
        else:
            text = f"{g['name']}: {g['measured']} {g['comparison']} {g['target']} {g['unit']}"
            console.print(f"{VERDICT[g['passed']]} {text}")


def print_footer(console: Console, doc: dict[str, Any]) -> None:
    """The machine, the time taken and the command, in one dim line."""
    m = doc["machine"]
    console.print(
        f"[dim]{m['cpu_model']}, {m['cores']} cores, Python {m['python']}, librdkafka {m['librdkafka']}, "
        f"load {m['loadavg_at_start']} → {loadavg()}; {doc['elapsed_s']:.0f} s; {escape(m['command'] or '')}"
    )


def log(text: str) -> None:
    stderr.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {text}")


def table(title: str, columns: str, *rows: Any, **kw: Any) -> Table:
    """A rich table with ``rows``; ``columns`` separated by "|", a name starting with ">" is
    right-aligned, with "^" centred."""
    t = Table(title=title, **kw)
    for c in columns.split("|"):
        t.add_column(c.lstrip(">^"), justify={">": "right", "^": "center"}.get(c[:1], "left"))
    for row in rows:
        t.add_row(*map(str, row))
    return t


def document(benchmark: str, args: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    """The head of a single-system benchmark's JSON: name, machine, config (with the mode), errors."""
    machine = machine_info(f"load.bench_{benchmark}")
    return {"benchmark": benchmark, "machine": machine, "config": config | {"mode": mode(args)}, "errors": []}


def parser(
    benchmark: str, doc: str | None, quick: str, smoke: str | None, *specs: Any
) -> argparse.ArgumentParser:
    """``python -m load.bench_<benchmark>`` with ``--quick`` (| ``--smoke``), ``--json`` and the
    options ``specs``, each ``(flag, kind, help)``: ``kind`` a type (int, float, str: default None),
    ``bool`` (a switch) or the default value itself (the option takes its type)."""
    p = argparse.ArgumentParser(
        prog=f"python -m load.bench_{benchmark}", description=(doc or "").split("\n\n")[0]
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help=quick)
    if smoke:
        size.add_argument("--smoke", action="store_true", help=smoke)
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    for flag, kind, text in specs:
        if kind is bool:
            p.add_argument(flag, action="store_true", help=text)
        elif isinstance(kind, type):
            p.add_argument(flag, type=kind, help=text)
        else:
            p.add_argument(flag, type=type(kind), default=kind, help=f"{text} (default {kind})")
    return p


def mode(args: argparse.Namespace) -> str:
    """ "smoke", "quick" or "full" from ``--smoke`` / ``--quick``."""
    return "smoke" if getattr(args, "smoke", False) else "quick" if args.quick else "full"


def sized(args: argparse.Namespace, sizes: dict[str, tuple[Any, Any, Any]]) -> dict[str, Any]:
    """``{name: (full, quick, smoke)}`` → the values of this run's mode, except those the command
    line gives (an option named like the key, not None)."""
    i = ("full", "quick", "smoke").index(mode(args))
    return {k: v[i] if getattr(args, k, None) is None else getattr(args, k) for k, v in sizes.items()}
