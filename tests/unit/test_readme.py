"""The README stays a short, true front door: the two quick-start commands, a size limit, and
links that lead somewhere. (The configuration table lives in the docs: tests/unit/test_docs.py.)"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_BYTES = 12 * 1024


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one() -> None:
    readme = README.read_text()
    block = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines() if line.strip()]
    assert commands == ["./run demo", "./run test"]
    assert "./run test" in (ROOT / ".ci" / "run").read_text()


def test_readme_is_at_most_12_kb() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes (at most {MAX_BYTES}): move detail into docs/"


def _relative_links(markdown: str) -> list[str]:
    targets = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", markdown)
    targets += re.findall(r"""\bsrc=["']([^"']+)["']""", markdown)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def test_every_relative_link_of_the_readme_points_at_a_file_that_exists() -> None:
    links = _relative_links(README.read_text())
    assert links, "the README links into docs/"
    missing = [t for t in links if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
