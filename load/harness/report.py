"""What a benchmark writes: the machine it ran on, its goals, the head of its JSON, the console
table, and its section of the docs' benchmarks page.

JSON documents go where ``--json`` says (``load/results/``, not in git, with ``--publish``);
every document has ``machine`` (:func:`machine_info`) and, for the single-system benchmarks,
``goals`` (:func:`goal`) and ``errors``. ``--publish`` writes the run's section of
``docs/benchmarks.md`` (:func:`publish`), the page that keeps the published figures.
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
from typing import Any, Literal

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
        "command": command(module),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def command(module: str) -> str:
    """This run's command line: ``sftraffic ...`` or ``python -m MODULE ...``."""
    if Path(sys.argv[0]).name == "sftraffic" or sys.argv[0].endswith("framework/cli/main.py"):
        return shlex.join(["sftraffic", *sys.argv[1:]])
    return shlex.join([Path(sys.executable).name, "-m", module, *sys.argv[1:]])


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


def _shown(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def figure_rows(path: str, value: Any) -> list[tuple[str, str]]:
    """``value`` as (path, shown) rows: one per scalar leaf; a spread (median, min, max) in one row."""
    if isinstance(value, dict):
        if {"median", "min", "max"} <= value.keys():
            spread = f"{_shown(value['min'])}-{_shown(value['max'])}"
            return [(path, f"{_shown(value['median'])} ({spread})" if value["median"] is not None else "n/a")]
        return [row for k, v in value.items() for row in figure_rows(f"{path}.{k}" if path else str(k), v)]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [row for i, v in enumerate(value) for row in figure_rows(f"{path}[{i}]", v)]
    return [(path, ", ".join(map(_shown, value)) if isinstance(value, list) else _shown(value))]


def lookup(doc: dict[str, Any], path: str) -> Any:
    """``doc["a"]["b"]`` for "a.b"; None where a key is missing."""
    value: Any = doc
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def render_figures(doc: dict[str, Any], console: Console, title: str, figures: tuple[str, ...]) -> None:
    """The console view of a benchmark: the JSON's ``figures`` (keys, "a.b" for nested ones) as
    rows, its goals, its errors and the machine."""
    rows = [row for key in figures if (v := lookup(doc, key)) is not None for row in figure_rows(key, v)]
    console.print(table(title, "figure|>value", *((escape(k), escape(v)) for k, v in rows)))
    print_goals(console, doc.get("goals") or [])
    for e in doc.get("errors") or []:
        console.print(f"[red]error:[/red] {escape(str(e))}")
    print_footer(console, doc)


def log(text: str) -> None:
    stderr.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {text}")


def table(title: str, columns: str, *rows: Any, **kw: Any) -> Table:
    """A rich table with ``rows``; ``columns`` separated by "|", a name starting with ">" is
    right-aligned, with "^" centred."""
    t = Table(title=title, **kw)
    align: dict[str, Literal["right", "center"]] = {">": "right", "^": "center"}
    for c in columns.split("|"):
        t.add_column(c.lstrip(">^"), justify=align.get(c[:1], "left"))
    for row in rows:
        t.add_row(*map(str, row))
    return t


def document(benchmark: str, args: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    """The head of a single-system benchmark's JSON: name, machine, config (with the mode), errors."""
    machine = machine_info(f"load.bench_{benchmark.replace('-', '_')}")
    return {"benchmark": benchmark, "machine": machine, "config": config | {"mode": mode(args)}, "errors": []}


def mode(args: argparse.Namespace) -> str:
    """ "smoke", "quick" or "full" from ``--smoke`` / ``--quick``."""
    return "smoke" if getattr(args, "smoke", False) else "quick" if args.quick else "full"


# -- the docs' benchmarks page --------------------------------------------------------------
ROOT = HERE.parents[1]
DOCS_PAGE = ROOT / "docs" / "benchmarks.md"
LATEST = "## Latest published runs"


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- generated: {name} (sftraffic bench --publish) -->", f"<!-- end generated: {name} -->"


def section(page_text: str, name: str) -> str | None:
    """The generated section ``name`` of the page (between its markers), or None."""
    start, end = _markers(name)
    if start not in page_text or end not in page_text:
        return None
    return page_text.partition(start)[2].partition(end)[0].strip("\n")


def publish(name: str, markdown: str, page: Path = DOCS_PAGE) -> Path:
    """Write ``markdown`` as the generated section ``name`` of the docs' benchmarks page: in
    place of the section's last version, or at the end under "Latest published runs"."""
    start, end = _markers(name)
    text = page.read_text()
    block = f"{start}\n{markdown.strip()}\n{end}"
    if section(text, name) is not None:
        head, _, rest = text.partition(start)
        text = head + block + rest.partition(end)[2]
    else:
        text = text.rstrip("\n") + ("" if LATEST in text else f"\n\n{LATEST}") + f"\n\n{block}\n"
    page.write_text(text)
    stderr.print(f"published to {page} ({name})")
    return page


def run_line(doc: dict[str, Any]) -> str:
    """ "`COMMAND`, DATE": how a published figure was made."""
    m = doc.get("machine") or {}
    return f"`{m.get('command') or '?'}`, {str(m.get('started_at') or '?')[:10]}"


def goals_markdown(title: str, doc: dict[str, Any]) -> str:
    """A run's goals as a table: the section any benchmark can publish."""
    lines = [f"### {title}", "", f"{run_line(doc)}:", "", "| goal | measured | target | met |"]
    lines.append("|---|---|---|---|")
    for g in doc.get("goals") or []:
        if "goal" in g:
            name, value, target, ok = g["goal"], g["value"], g["target"], g["met"]
        else:
            name, value, target, ok = g["name"], g["measured"], g["target"], g["passed"]
        shown = "—" if value is None else f"{value:,.3g}" if isinstance(value, float) else str(value)
        lines.append(f"| {name} | {shown} | {target} | {({True: 'yes', False: 'no'}).get(ok, 'n/a')} |")
    return "\n".join(lines)
