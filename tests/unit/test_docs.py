"""The documentation site stays true to the code: its reference sections are generated from it,
every page is in the navigation, and no page reads like a work log.

`./run test` also builds the site with `mkdocs build --strict` (broken links and anchors fail it).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
_CACHE: dict[str, str] = {}  # each section generated once for all pages


@pytest.mark.parametrize("page", sorted(GEN.PAGES))
def test_generated_reference_section_is_current(page: str) -> None:
    committed = (ROOT / page).read_text()
    assert GEN.render(page, committed, _CACHE) == committed, f"{page} is stale: run {GEN.COMMAND}"


def test_configuration_reference_is_the_table_the_code_declares() -> None:
    from framework.cli.config_cmd import reference_markdown

    assert reference_markdown() in (DOCS / "reference" / "configuration.md").read_text(), (
        f"docs/reference/configuration.md is stale: run {GEN.COMMAND}"
    )


def test_every_metric_the_broker_serves_is_documented() -> None:
    page = (DOCS / "reference" / "metrics.md").read_text()
    missing = [name for name, *_ in GEN.metrics() if f"`{name}`" not in page]
    assert not missing, f"not in docs/reference/metrics.md: {missing}; run {GEN.COMMAND}"


def test_the_benchmark_chart_shown_is_the_published_runs() -> None:
    # the JSON a run wrote stays on its machine (load/results/ is ignored): the page's generated
    # section is the record, and its one chart is the one --publish rendered for that run's date
    page = (DOCS / "benchmarks.md").read_text()
    marks = r"<!-- generated: side-by-side .*?-->(.*?)<!-- end generated: side-by-side -->"
    section = re.search(marks, page, re.S)
    assert section, "docs/benchmarks.md keeps sftraffic bench --publish's side-by-side section"
    shown = re.findall(r"\]\((img/bench-[^)]+\.png)\)", section.group(1))
    dates = re.findall(r"`sftraffic bench [^`]*`, (\d{4}-\d\d-\d\d)\.", section.group(1))
    assert len(shown) == 1 and dates, "the section names its command and date and shows one chart"
    assert shown[0] == f"img/bench-{dates[0]}.png", f"{shown[0]} is not the chart of the {dates[0]} run"
    charts = sorted(f"img/{c.name}" for c in (DOCS / "img").glob("bench-*.png"))
    assert charts == shown, f"docs/img holds charts no page shows: {sorted(set(charts) - set(shown))}"


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _nav_pages(value)]
    return []


def test_every_page_is_in_the_navigation_and_every_entry_exists() -> None:
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages


WORK_LOG = [
    re.compile(r"\bissues? \d+", re.IGNORECASE),  # our tracker's numbers
    re.compile(r"\bthe issue('s)?\b", re.IGNORECASE),
    re.compile(r"\bthe seeds'", re.IGNORECASE),
    re.compile(r"\bthis session\b", re.IGNORECASE),
]


@pytest.mark.parametrize("page", sorted(str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md")))
def test_pages_read_as_documentation_not_a_work_log(page: str) -> None:
    # the hand-written text: generated sections quote the code's own help strings
    text = GEN._REGION.sub("", (ROOT / page).read_text())
    found = [m.group(0) for pattern in WORK_LOG for m in pattern.finditer(text)]
    assert not found, f"{page}: {found} (history goes into CHANGELOG.md)"
