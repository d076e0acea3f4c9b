"""The README stays true: its configuration table is the one the code declares."""

from pathlib import Path

from framework.cli.config_cmd import reference_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_readme_configuration_reference_is_current() -> None:
    assert reference_markdown() in (ROOT / "README.md").read_text(), (
        "README's configuration table is stale: paste `sftraffic config reference` into it"
    )


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines() if line.strip()]
    assert commands == ["./run demo", "./run test"]
    assert "./run test" in (ROOT / ".ci" / "run").read_text()
