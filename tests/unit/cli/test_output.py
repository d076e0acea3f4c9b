"""What every admin command's parser has (framework/cli/output.py): a one-line help, an example
in its epilog, the shared connection options, and ``-o table|json`` on every list and describe."""

from __future__ import annotations

import argparse

import pytest

from framework.cli.main import build_parser

ADMIN = ("topics", "groups", "streams", "users", "transactions", "cluster", "configs", "acls")


def _subcommands() -> list[tuple[str, str, argparse.ArgumentParser]]:
    def choices(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        return dict(sub.choices)

    top = choices(build_parser())
    return [(c, a, p) for c in ADMIN for a, p in choices(top[c]).items()]


SUBCOMMANDS = _subcommands()


@pytest.mark.parametrize(
    ("command", "action", "parser"), SUBCOMMANDS, ids=[f"{c} {a}" for c, a, _ in SUBCOMMANDS]
)
def test_every_admin_subcommand_has_help_an_example_and_the_connection(
    command: str, action: str, parser: argparse.ArgumentParser
) -> None:
    assert parser.epilog and f"sftraffic {command} " in parser.epilog, "no example"
    assert parser.formatter_class is argparse.RawDescriptionHelpFormatter
    flags = {s for a in parser._actions for s in a.option_strings}
    assert {"-b", "--bootstrap-server", "--bootstrap", "--command-config", "-X"} <= flags
    if action.startswith(("list", "describe")) or action == "info":
        assert {"-o", "--output"} <= flags


def test_every_admin_command_has_a_one_line_help() -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in sub._choices_actions}
    for c in ADMIN:
        assert helps[c] and "\n" not in helps[c]
