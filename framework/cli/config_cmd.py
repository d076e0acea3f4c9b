"""``sftraffic config reference``: the configuration table, generated from framework/config.py."""

from __future__ import annotations

import argparse

from framework import config as cfg


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "config",
        help="configuration reference",
        description="The store's configuration keys (a running cluster's values: sftraffic configs).",
        epilog="example:\n  sftraffic config reference > docs/configuration.md",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    csub = p.add_subparsers(dest="action", metavar="ACTION")
    csub.required = True
    r = csub.add_parser(
        "reference",
        help="print every configuration key as a Markdown table",
        description="Print every configuration key (scopes, type, default, doc) as a Markdown table.",
        epilog="example:\n  sftraffic config reference | grep retention",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.set_defaults(func=lambda args: print(reference_markdown()) or 0)


def _default(k: cfg.ConfigKey) -> str:
    if k.default == cfg.LONG_MAX:
        return "unlimited"
    return f"`{k.render(k.default)}`" if k.render(k.default) != "" else "(empty)"


def reference_markdown() -> str:
    lines = [
        "| key | scopes | type | default | broker synonym | description |",
        "|---|---|---|---|---|---|",
    ]
    for k in sorted(cfg.keys(), key=lambda k: (cfg.BROKER not in k.scopes or cfg.TOPIC in k.scopes, k.name)):
        scopes = ", ".join(
            s for s in (cfg.BROKER, cfg.STREAM, cfg.TOPIC, cfg.CLIENT_METRICS) if s in k.scopes
        )
        lines.append(
            f"| `{k.name}` | {scopes} | {k.type} | {_default(k)} | "
            f"{'`' + k.broker_name + '`' if k.broker_name else ''} | {k.doc} |"
        )
    return "\n".join(lines)
