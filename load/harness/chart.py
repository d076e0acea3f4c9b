"""The chart of a ``sftraffic bench`` result: its side-by-side figures as a PNG.

``sftraffic bench --json PATH`` writes ``PATH`` with ``.png`` next to the JSON
(:func:`write_next_to`); ``python -m load.harness.chart RESULT.json [-o OUT.png]`` draws the
chart of an existing result (default: the JSON's path with ``.png``).

One panel per figure — produce acks=1, produce acks=all, consume msgs/s, p99 latency at the
fixed rate, server CPU µs per produced message, server RSS with 1,000 partitions — and in each
one bar per system: the primary (ours, or ``--external``'s broker), Tansu, noida-db,
Apache Kafka (when the result has it), Redis Streams, NATS JetStream. Every bar is labelled with
its value and, for the peers, the ratio ours/peer (as in the table: above 1 is better for the
↑ figures, below 1 for the ↓ ones). A system that did not run (not installed, did not start, not
selected with ``--peers``) keeps its place with "n/a", and the reason is in the footer; so does a
figure a system has no value for (RSS is measured for Kafka-API brokers in full runs only; CPU
needs the server's pid). The MQTT comparison (gateway path vs Mosquitto) is one footer line.

matplotlib draws with its Agg backend through :class:`matplotlib.figure.Figure` (no pyplot, no
display); the PNG is 1200×800 pixels. :func:`chart_data` (what is drawn) needs no matplotlib.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WIDTH_IN, HEIGHT_IN, DPI = 12.0, 8.0, 100  # 1200 x 800 pixels

# (summary key, panel title, unit, higher is better)
PANELS: tuple[tuple[str, str, str, bool], ...] = (
    ("produce_msgs_s", "produce acks=1", "msgs/s", True),
    ("produce_acksall_msgs_s", "produce acks=all", "msgs/s", True),
    ("consume_msgs_s", "consume", "msgs/s", True),
    ("p99_ms", "p99 produce latency @{rate}", "ms", False),
    ("server_cpu_us_per_msg_produce", "server CPU per message (produce)", "µs/msg", False),
    ("rss_mb_1000_partitions", "server RSS, 1,000 partitions", "MB", False),
)
# Figures older results have only under details.kafka.systems.<name>.figures.
DETAIL_FIGURES = {"rss_mb_1000_partitions": "rss_mb_1000_partitions"}

# Why a system that ran can have no value for a figure (footer).
MISSING = {
    "rss_mb_1000_partitions": "RSS with 1,000 partitions is measured for the Kafka-API brokers, in full runs",
    "server_cpu_us_per_msg_produce": "server CPU needs the server's pid (--broker-pid with --external)",
}

# The peers always shown (n/a when they did not run), in this order after the primary; "kafka"
# (Apache Kafka) is placed among them when the result has it.
PEER_ORDER = ("tansu", "noida", "kafka", "redis", "nats")
SHOWN_WHEN_ABSENT = ("tansu", "noida", "redis", "nats")
NAMES = {
    "ours": "ours",
    "external": "external",
    "tansu": "Tansu",
    "noida": "noida-db",
    "kafka": "Apache Kafka",
    "redis": "Redis Streams",
    "nats": "NATS JetStream",
    "ours-baseline": "ours-baseline",
}
COLOURS = {
    "ours": "#1f77b4",
    "external": "#1f77b4",
    "tansu": "#ff7f0e",
    "noida": "#2ca02c",
    "kafka": "#8c564b",
    "redis": "#d62728",
    "nats": "#9467bd",
}
OTHER_COLOURS = ("#17becf", "#bcbd22", "#e377c2", "#7f7f7f")


@dataclass
class SystemInfo:
    name: str
    label: str  # the x tick label
    colour: str
    ran: bool
    why_not: str | None  # when it did not run


@dataclass
class Panel:
    key: str
    title: str
    unit: str
    higher_is_better: bool
    values: list[float | None]  # one per system, None: n/a
    ratios: list[float | None]  # ours/peer; None for the primary and where n/a


@dataclass
class ChartData:
    title: str
    subtitle: str
    systems: list[SystemInfo]
    panels: list[Panel]
    footer: list[str] = field(default_factory=list)


def chart_path(json_path: str | Path) -> Path:
    """Where the chart of the result ``json_path`` goes: the same path with ``.png``."""
    return Path(json_path).with_suffix(".png")


def _figure(doc: dict[str, Any], name: str, key: str) -> float | None:
    value = doc["systems"][name].get(key)
    if value is None and key in DETAIL_FIGURES:
        details = ((doc.get("details") or {}).get("kafka") or {}).get("systems") or {}
        value = ((details.get(name) or {}).get("figures") or {}).get(DETAIL_FIGURES[key])
    return float(value) if isinstance(value, int | float) else None


def _system_names(doc: dict[str, Any]) -> list[str]:
    """The primary, the usual peers (present or not), then any other non-MQTT system."""
    systems, primary = doc["systems"], doc.get("primary", "ours")
    names = [primary]
    names += [n for n in PEER_ORDER if n != primary and (n in systems or n in SHOWN_WHEN_ABSENT)]
    names += [n for n, s in systems.items() if n not in names and s.get("kind") != "mqtt"]
    return names


def _why_not(doc: dict[str, Any], name: str) -> str:
    s = doc["systems"].get(name)
    if s is None:
        return "not selected (--peers)"
    errors = "; ".join(s.get("errors") or [])
    return s.get("reason") or (doc.get("not_run") or {}).get(name) or errors or "no figures"


def _title(doc: dict[str, Any]) -> str:
    cfg = doc.get("config") or {}
    kafka, streams = cfg.get("kafka") or {}, cfg.get("streams") or {}
    quick = " --quick" if cfg.get("quick") else ""
    primary = doc.get("primary", "ours")
    parts = [f"sftraffic bench{quick}: {NAMES.get(primary, primary)} and its peers"]
    if kafka.get("count"):
        sizes = f"Kafka {kafka['count']:,} msgs/phase"
        if streams.get("count"):
            sizes += f", Redis {streams['count']:,}, NATS {streams.get('nats_count', streams['count']):,}"
        parts.append(sizes)
    if kafka.get("reps"):
        parts.append(f"{kafka['reps']} rep(s), median")
    return "; ".join(parts)


def _subtitle(doc: dict[str, Any]) -> str:
    m = doc.get("machine") or {}
    bits = [
        f"{m['cpu_model']}, {m['cores']} cores" if m.get("cpu_model") else None,
        f"Python {m['python']}" if m.get("python") else None,
        f"librdkafka {m['librdkafka']}" if m.get("librdkafka") else None,
        str(m["started_at"])[:16].replace("T", " ") if m.get("started_at") else None,
        f"commit {m['git_commit']}" if m.get("git_commit") else None,
    ]
    head = "; ".join(b for b in bits if b)
    return (head + "\n" if head else "") + (
        "bar labels: value, above it ours/peer (green: ours better, red: ours worse; "
        "above 1 is better for ↑ figures, below 1 for ↓ ones); n/a: did not run or not measured"
    )


def _footer(doc: dict[str, Any], systems: list[SystemInfo], panels: list[Panel]) -> list[str]:
    lines = [f"n/a {s.label.replace(chr(10), ' ')}: {s.why_not}" for s in systems if not s.ran]
    for panel in panels:
        pairs = zip(systems, panel.values, strict=True)
        gaps = [s.label.replace("\n", " ") for s, v in pairs if s.ran and v is None]
        if gaps:
            why = MISSING.get(panel.key, "not measured")
            lines.append(f"n/a {panel.title}: {', '.join(gaps)} ({why})")
    if any(s.label.endswith("\n(mem)") for s in systems):
        lines.append("(mem): keeps its log in memory only; the others write to disk")
    if any(s.ran and s.name in ("redis", "nats") for s in systems):
        lines.append(
            "Redis and NATS have one acknowledgement mode (reply once stored): "
            "their acks=all bar is their produce figure"
        )
    mos, gw = doc["systems"].get("mosquitto"), doc["systems"].get("gateway")
    if mos is not None and gw is not None and mos.get("ran") and gw.get("ran"):
        a, b = gw.get("produce_msgs_s"), mos.get("produce_msgs_s")
        ratio = f" = {a / b:.2f}x" if a and b else ""
        lines.append(
            f"MQTT QoS 1: gateway path {_fmt(a, 'msgs/s')} msgs/s until stored, "
            f"Mosquitto alone {_fmt(b, 'msgs/s')} msgs/s{ratio}"
        )
    elif mos is not None:
        lines.append(f"MQTT: not run — {_why_not(doc, 'mosquitto')}")
    notes = doc.get("notes") or []
    lines += [n for n in notes if "measured phases ran while" in n or n.startswith("--quick")]
    return lines


def chart_data(doc: dict[str, Any]) -> ChartData:
    """What the chart of the ``sftraffic bench`` result ``doc`` shows."""
    rate = ((doc.get("config") or {}).get("kafka") or {}).get("latency_rate")
    rate_text = f"{rate // 1000}k msgs/s" if isinstance(rate, int) and rate >= 1000 else "a fixed rate"
    systems: list[SystemInfo] = []
    spare = iter(OTHER_COLOURS * 4)
    for name in _system_names(doc):
        s = doc["systems"].get(name)
        label = NAMES.get(name, name).replace(" ", "\n", 1)
        if s is not None and s.get("persists") is False:
            label += "\n(mem)"
        ran = bool(s is not None and s.get("ran"))
        colour = COLOURS.get(name) or next(spare)
        systems.append(SystemInfo(name, label, colour, ran, None if ran else _why_not(doc, name)))
    panels = []
    for key, title, unit, higher in PANELS:
        values = [_figure(doc, s.name, key) if s.ran else None for s in systems]
        ours = values[0]
        ratios = [
            None if i == 0 or v is None or not ours or not v else ours / v for i, v in enumerate(values)
        ]
        panels.append(Panel(key, title.format(rate=rate_text), unit, higher, values, ratios))
    return ChartData(_title(doc), _subtitle(doc), systems, panels, _footer(doc, systems, panels))


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "msgs/s":
        if value >= 1e6:
            return f"{value / 1e6:.2f}M"
        if value >= 1e3:
            return f"{value / 1e3:.0f}k" if value >= 1e5 else f"{value / 1e3:.1f}k"
        return f"{value:.0f}"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _rate_tick(v: float, _pos: int) -> str:
    return f"{v / 1e6:g}M" if v >= 1e6 else f"{v / 1e3:g}k" if v else "0"


def render(doc: dict[str, Any], out: str | Path) -> Path:
    """Draw the chart of ``doc`` into the PNG ``out`` (1200×800)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    data = chart_data(doc)
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    FigureCanvasAgg(fig)
    footer_h = 0.03 + 0.022 * len(data.footer)
    fig.subplots_adjust(left=0.05, right=0.99, top=0.84, bottom=0.09 + footer_h, hspace=0.55, wspace=0.22)
    fig.suptitle(data.title, fontsize=13, fontweight="bold", y=0.985)
    fig.text(0.5, 0.925, data.subtitle, ha="center", va="center", fontsize=8.5, color="#444444")
    axes = fig.subplots(2, 3)
    xs = list(range(len(data.systems)))
    for ax, panel in zip(axes.flat, data.panels, strict=True):
        heights = [v or 0.0 for v in panel.values]
        colours = [s.colour for s in data.systems]
        bars = ax.bar(xs, heights, color=colours, width=0.72)
        top = max(heights) if any(heights) else 1.0
        ax.set_ylim(0, top * 1.25)
        if not any(heights):  # nothing measured: no scale to read
            ax.set_yticks([])
        for i, bar in enumerate(bars):
            value, ratio = panel.values[i], panel.ratios[i]
            if value is None:
                ax.text(
                    i,
                    top * 0.02,
                    "n/a",
                    ha="center",
                    va="bottom",
                    fontsize=8.5,
                    color="#888888",
                    style="italic",
                )
                continue
            if i == 0:
                bar.set_edgecolor("black")
                bar.set_linewidth(1.2)
            at = {"xy": (i, bar.get_height()), "textcoords": "offset points", "ha": "center", "va": "bottom"}
            ax.annotate(_fmt(value, panel.unit), xytext=(0, 2), fontsize=7.5, **at)
            if ratio is not None:
                ours_better = ratio > 1 if panel.higher_is_better else ratio < 1
                colour = "#2a7d2a" if ours_better else "#b22222" if ratio != 1 else "#444444"
                ax.annotate(f"{ratio:.2f}x", xytext=(0, 12), fontsize=7.5, color=colour, **at)
        arrow = "↑ higher is better" if panel.higher_is_better else "↓ lower is better"
        ax.set_title(f"{panel.title}\n{panel.unit}, {arrow}", fontsize=10)
        ax.set_xticks(xs)
        ax.set_xticklabels([s.label for s in data.systems], fontsize=7.5)
        for tick, s in zip(ax.get_xticklabels(), data.systems, strict=True):
            if not s.ran:
                tick.set_color("#999999")
        ax.tick_params(axis="y", labelsize=7.5)
        if panel.unit == "msgs/s":
            ax.yaxis.set_major_formatter(_rate_tick)
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    for i, line in enumerate(data.footer):
        fig.text(0.01, 0.015 + 0.022 * (len(data.footer) - 1 - i), line[:190], fontsize=8, color="#444444")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=DPI)
    return out


def write_next_to(json_path: str | Path) -> Path | None:
    """The chart of the result at ``json_path``, next to it (``.png``); a line on stderr either
    way. Never raises: the JSON is the result, the chart a view of it."""
    from load.harness.report import stderr

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        stderr.print("chart not written: matplotlib is not installed (pip install -e '.[app]')")
        return None
    try:
        out = render(json.loads(Path(json_path).read_text()), chart_path(json_path))
    except Exception as exc:  # a view of the result must not turn a finished run into a failure
        stderr.print(f"[red]chart not written: {type(exc).__name__}: {exc}[/red]")
        return None
    stderr.print(f"chart written to {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m load.harness.chart",
        description="Draw the chart (PNG, 1200x800) of a `sftraffic bench --json` result.",
    )
    p.add_argument("result", help="a sftraffic bench JSON, e.g. load/results/bench-2026-11-23.json")
    p.add_argument("-o", "--out", help="the PNG to write (default: RESULT with .png)")
    args = p.parse_args(argv)
    try:
        doc = json.loads(Path(args.result).read_text())
    except (OSError, ValueError) as exc:
        print(f"{p.prog}: cannot read {args.result}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(doc, dict) or not isinstance(doc.get("systems"), dict):
        print(f"{p.prog}: {args.result} is not a sftraffic bench result (no 'systems')", file=sys.stderr)
        return 2
    out = render(doc, args.out or chart_path(args.result))
    print(f"chart written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
