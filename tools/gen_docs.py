"""The documentation site's reference sections, generated from the code.

    .venv/bin/python tools/gen_docs.py           # rewrite every generated section in docs/
    .venv/bin/python tools/gen_docs.py --check   # list the stale pages, exit 1 if any

A page holds hand-written text and generated sections between two markers::

    <!-- BEGIN GENERATED cli (tools/gen_docs.py) -->
    ...
    <!-- END GENERATED cli -->

Only what lies between them is rewritten, so the prose around a table is edited by hand. The
sections and where they come from:

* ``cli``: every command of ``sftraffic``, walking ``framework.cli.main.build_parser()``'s
  subparsers recursively (usage, help, options and epilog as ``--help`` prints them);
* ``configuration``: ``framework.cli.config_cmd.reference_markdown()`` (``framework/config.py``);
* ``metrics``: what ``framework/server/metrics.py`` registers (its counters and histogram) and
  what its ``BrokerCollector`` yields at a scrape (the gauges), read from a broker made of
  empty stand-ins, so no broker is started;
* ``environment``: the ``SFTRAFFIC_<KEY>`` variable of every broker key, and ``environment-apps``:
  every other ``SFTRAFFIC_*`` variable (``framework.config.ENVIRONMENT_VARIABLES``);
* ``kafka-apis``: ``framework.protocol.api.API_TABLE`` (the versions served) beside the versions
  of Kafka's own message schemas the messages were generated from.

``tests/unit/test_docs.py`` regenerates each section and fails when a committed page differs.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

COMMAND = ".venv/bin/python tools/gen_docs.py"
# help is formatted at a fixed width, whatever the terminal that runs the generator
HELP_WIDTH = 100

# -- the CLI ---------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand of ``parser``, in the order they were added
    (an alias names the same parser and is skipped)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action._name_parser_map.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, helps.get(name, ""), sub


def _escape(text: str) -> str:
    """Plain text as Markdown that renders as the same text."""
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", text)


def _help_text(parser: argparse.ArgumentParser) -> str:
    os.environ["COLUMNS"] = str(HELP_WIDTH)
    return parser.format_help().rstrip()


def cli_reference() -> str:
    from framework.cli.main import GROUPS, build_parser

    os.environ["COLUMNS"] = str(HELP_WIDTH)
    with redirect_stderr(io.StringIO()):  # an application command may warn while it registers
        root = build_parser()
    out: list[str] = []

    def section(parser: argparse.ArgumentParser, help_: str, depth: int) -> None:
        out.append(f"{'#' * min(max(depth, 2), 6)} {parser.prog}")
        out.append("")
        if help_:
            out.extend([_escape(help_[0].upper() + help_[1:]) + ("" if help_.endswith(".") else "."), ""])
        out.extend(["```text", _help_text(parser), "```", ""])

    def walk(parser: argparse.ArgumentParser, help_: str, depth: int) -> None:
        section(parser, help_, depth)
        for _name, sub_help, sub in _subcommands(parser):
            walk(sub, sub_help, depth + 1)

    # the top-level commands in the groups of the top-level help, "other" last
    commands = {name: (help_, sub) for name, help_, sub in _subcommands(root)}
    placed = [n for names in GROUPS.values() for n in names]
    groups = {**GROUPS, "other": sorted(n for n in commands if n not in placed)}
    index: list[str] = []
    section(root, "", 1)  # the top level alone: its commands follow in the order of the groups
    for title, names in groups.items():
        present = [n for n in names if n in commands]
        if not present:
            continue
        index.extend([f"**{title[0].upper() + title[1:]}**", "", "| command | what it does |", "|---|---|"])
        for name in present:
            help_, sub = commands[name]
            index.append(f"| [`{sub.prog}`](#{_slug(sub.prog)}) | {_escape(help_)} |")
            walk(sub, help_, 2)
        index.append("")
    return "\n".join([*index, *out]).rstrip()


def _slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a plain-text heading."""
    value = re.sub(r"[^\w\s-]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


# -- configuration ---------------------------------------------------------------------------


def configuration_table() -> str:
    from framework.cli.config_cmd import reference_markdown

    return reference_markdown()


# -- metrics ---------------------------------------------------------------------------------

# What the code's help strings leave out: Kafka's name for the same figure, and how to read it.
METRIC_NOTES = {
    "sftraffic_request_latency_seconds": "Kafka's RequestsPerSec is its `_count`; an acks=0 produce "
    "(no response) is timed to the end of its handling.",
    "sftraffic_request_errors_total": "Kafka's ErrorsPerSec. Includes codes that are part of the "
    "protocol's normal course (MEMBER_ID_REQUIRED on a first JoinGroup, REBALANCE_IN_PROGRESS during "
    "a rebalance) and the errors of acks=0 produce requests, which get no response. A code without a "
    "name is labelled with its number.",
    "sftraffic_bytes_in_total": "Not counted for replication.",
    "sftraffic_isr_shrinks_total": "Whatever caused it: the leader's own AlterPartition or the "
    "controller fencing a follower (Kafka's IsrShrinksPerSec).",
    "sftraffic_isr_expands_total": "Kafka's IsrExpandsPerSec.",
    "sftraffic_leader_elections_total": "After a fencing, a controlled shutdown, a re-registration; a "
    "new partition's first leader is no election.",
    "sftraffic_high_watermark": "A follower's copy trails the leader's by up to one fetch.",
    "sftraffic_log_end_offset": "For every replica on this broker, leader or follower.",
    "sftraffic_leader_partitions": "Kafka's LeaderCount.",
    "sftraffic_under_replicated_partitions": "Kafka's UnderReplicatedPartitions.",
    "sftraffic_offline_partitions": "A fenced leader counts as none (Kafka's OfflinePartitionsCount).",
    "sftraffic_active_controller": "The sum over a cluster's brokers is 1 (Kafka's ActiveControllerCount).",
    "sftraffic_broker_state": "Kafka's BrokerState metric. The endpoint serves from RUNNING on and "
    "closes when the broker starts stopping.",
    "sftraffic_consumer_group_lag": "As `kafka-consumer-groups --describe` computes it. In a cluster, "
    "a partition with no replica on the group's coordinator is left out.",
    "sftraffic_replication_throttle_rate": "Side `leader` or `follower`; see "
    "[replication throttles](../operate/reassignment.md#replication-throttles).",
}


def _stand_in_broker() -> Any:
    """A broker with nothing in it, enough for ``BrokerCollector`` to name every gauge."""

    def quota(side: str) -> SimpleNamespace:
        return SimpleNamespace(side=side, throttled_bytes=0, throttled_skips=0, rate=0)

    replicas = SimpleNamespace(
        all_partitions=list,
        partitions={},
        leader_quota=quota("leader"),
        follower_quota=quota("follower"),
        removed_replicas=0,
    )
    return SimpleNamespace(
        node_id=1,
        replicas=replicas,
        groups=SimpleNamespace(coordinator=SimpleNamespace(groups={})),
        cache=SimpleNamespace(quorum=None),
        listener=SimpleNamespace(connections=[]),
        lifecycle=SimpleNamespace(state=0),
    )


def metrics() -> list[tuple[str, str, list[str], str]]:
    """(exposed name, type, labels, help) of every metric a broker serves."""
    from prometheus_client.metrics import MetricWrapperBase

    from framework.server import metrics as m

    found: list[tuple[str, str, list[str], str]] = []
    for value in vars(m).values():
        if isinstance(value, MetricWrapperBase):
            kind = str(value._type)
            name = value._name + ("_total" if kind == "counter" else "")
            found.append((name, kind, list(value._labelnames), value._documentation))
    for family in m.BrokerCollector(_stand_in_broker()).collect():
        found.append(
            (family.name, family.type, list(getattr(family, "_labelnames", ())), family.documentation)
        )
    names = [f[0] for f in found]
    unknown = sorted(set(METRIC_NOTES) - set(names))
    if unknown:
        raise SystemExit(
            f"tools/gen_docs.py: METRIC_NOTES names metrics the broker does not serve: {unknown}"
        )
    if len(set(names)) != len(names):
        raise SystemExit("tools/gen_docs.py: a metric name is registered twice")
    return found


def metrics_table() -> str:
    lines = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for name, kind, labels, doc in metrics():
        note = METRIC_NOTES.get(name, "")
        meaning = " ".join(s for s in (doc, note) if s)
        label_text = ", ".join(f"`{label}`" for label in labels)
        lines.append(f"| `{name}` | {kind} | {label_text} | {meaning} |")
    return "\n".join(lines)


# -- environment -----------------------------------------------------------------------------


def environment_table() -> str:
    from framework import config as cfg

    lines = ["| variable | broker key | type | default |", "|---|---|---|---|"]
    for k in sorted(cfg.keys(cfg.BROKER), key=lambda k: k.name):
        var = cfg.env_name(k.name)
        default = "unlimited" if k.default == cfg.LONG_MAX else k.render(k.default)
        shown = f"`{default}`" if default != "" else "(empty)"
        lines.append(f"| `{var}` | [`{k.name}`](configuration.md) | {k.type} | {shown} |")
    return "\n".join(lines)


def application_environment_table() -> str:
    from framework import config as cfg

    lines = ["| variable | read by | meaning |", "|---|---|---|"]
    for v in cfg.ENVIRONMENT_VARIABLES:
        lines.append(f"| `{v.name}` | {_escape(v.read_by)} | {v.doc} |")
    return "\n".join(lines)


# -- Kafka APIs ------------------------------------------------------------------------------


def kafka_api_table() -> str:
    from framework.protocol.api import API_TABLE

    lines = [
        "| API | key | versions served | versions in Kafka's schema |",
        "|---|---|---|---|",
    ]
    for e in sorted(API_TABLE.values(), key=lambda e: e.key):
        if e.kio_name is None:  # an sftraffic extension: no Kafka schema
            kafka = "sftraffic's own"
        else:
            lo, hi = e.request.VERSIONS  # type: ignore[attr-defined]
            kafka = f"{lo}-{hi}"
        lines.append(f"| {e.name} | {e.key} | {e.min_version}-{e.max_version} | {kafka} |")
    return "\n".join(lines)


# -- pages -----------------------------------------------------------------------------------

SECTIONS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "configuration": configuration_table,
    "metrics": metrics_table,
    "environment": environment_table,
    "environment-apps": application_environment_table,
    "kafka-apis": kafka_api_table,
}
# every page that holds generated sections, and which
PAGES: dict[str, list[str]] = {
    "docs/reference/cli.md": ["cli"],
    "docs/reference/configuration.md": ["configuration"],
    "docs/reference/metrics.md": ["metrics"],
    "docs/reference/environment.md": ["environment", "environment-apps"],
    "docs/reference/kafka-compatibility.md": ["kafka-apis"],
}

_REGION = re.compile(
    r"(<!-- BEGIN GENERATED (?P<name>[\w-]+) \(tools/gen_docs\.py\) -->\n)(?P<body>.*?)"
    r"(<!-- END GENERATED (?P=name) -->)",
    re.DOTALL,
)


def render(path: str, text: str, cache: dict[str, str] | None = None) -> str:
    """``text`` (the page at ``path``) with each of its generated sections brought up to date."""
    cache = {} if cache is None else cache
    wanted = PAGES.get(path, [])
    found = [m.group("name") for m in _REGION.finditer(text)]
    missing = [n for n in wanted if n not in found]
    if missing:
        raise SystemExit(
            f"{path}: no section {', '.join(missing)} between <!-- BEGIN GENERATED NAME "
            "(tools/gen_docs.py) --> and <!-- END GENERATED NAME -->"
        )

    def section(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in SECTIONS:
            raise SystemExit(f"{path}: unknown generated section {name!r}")
        if name not in cache:
            cache[name] = SECTIONS[name]()
        return f"{m.group(1)}{cache[name]}\n{m.group(4)}"

    return _REGION.sub(section, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="regenerate the reference sections of docs/")
    parser.add_argument("--check", action="store_true", help="only list the stale pages (exit 1 if any)")
    args = parser.parse_args(argv)
    cache: dict[str, str] = {}
    stale = []
    for rel in PAGES:
        page = ROOT / rel
        old = page.read_text()
        new = render(rel, old, cache)
        if new != old:
            stale.append(rel)
            if not args.check:
                page.write_text(new)
    if args.check:
        for rel in stale:
            print(f"{rel} is stale: run {COMMAND}")
        return 1 if stale else 0
    for rel in stale:
        print(f"rewrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
