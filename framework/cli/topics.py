"""``sftraffic topics``: placeholder until the admin commands land."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    pass
