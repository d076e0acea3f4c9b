"""No function over 80 lines outside generated code (ruff holds statements to 50: PLR0915).

A long function is a place where steps have no names; the few that are long on purpose are
named here with their reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = ("framework", "registry", "mirror", "chaos", "testing", "sensors", "pipelines", "dashboard")
TREES += ("deploy", "load", "tools")
GENERATED = (ROOT / "framework" / "protocol" / "messages",)
MAX_LINES = 80
LONG_ON_PURPOSE = {
    # the produce hot loop, compiled by mypyc: inline on purpose, a call costs more than a field
    "framework/protocol/record_walk.py:walk",
    # the routing table: one entry per API key, data rather than steps
    "framework/server/router.py:routes",
}


def long_functions(root: Path, trees: tuple[str, ...]) -> dict[str, int]:
    """``path:name`` → lines, of every function longer than :data:`MAX_LINES` under ``trees``."""
    found: dict[str, int] = {}
    for tree in trees:
        for path in sorted((root / tree).rglob("*.py")):
            if any(path.is_relative_to(g) for g in GENERATED):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_LINES:
                        found[f"{path.relative_to(root)}:{node.name}"] = lines
    return found


def test_no_function_is_over_80_lines_but_those_named_with_a_reason() -> None:
    found = long_functions(ROOT, TREES)
    assert set(found) - LONG_ON_PURPOSE == set(), {k: v for k, v in found.items() if k not in LONG_ON_PURPOSE}
    assert set(found) >= LONG_ON_PURPOSE, (
        f"no longer long, drop from LONG_ON_PURPOSE: {LONG_ON_PURPOSE - set(found)}"
    )


def test_the_check_finds_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path, ("pkg",)) == {"pkg/m.py:long": MAX_LINES + 1}
