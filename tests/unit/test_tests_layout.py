"""The test tree keeps one rule (docs/design/development.md, "The test tree"): ``tests/unit/<package>/``
mirrors the source, ``integration/``, ``system/`` and ``browser/`` hold the tests of those kinds, and
what test modules share is a module of ``tests/support/``, never imported from a test module or a
conftest (importing a test module collects it again, and a conftest is pytest's to load)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# the folders of test_*.py files; load/ holds the benchmarks' own tests (load/'s harness)
KINDS = {"unit", "integration", "system", "browser", "load"}

# Still imported from a test module or a conftest, by tests their owners have yet to change
# (fault injection, the benchmarks, the protocol and handler tests). None may join: delete an
# entry once its import is gone.
_HANDLERS = "tests.unit.server.handlers.test_admin_describe"
KNOWN_IMPORTS = {
    ("tests/integration/test_network_partition.py", "tests.conftest"),
    ("tests/load/test_bench_avro_decode.py", "tests.load.test_bench_scripts"),
    ("tests/load/test_bench_cli.py", "tests.load.test_chart"),
    ("tests/load/test_bench_kafka.py", "tests.load.test_bench_scripts"),
    ("tests/load/test_bench_registry.py", "tests.load.test_bench_scripts"),
    ("tests/load/test_bench_security.py", "tests.load.test_bench_scripts"),
    ("tests/soak/test_chaos_soak.py", "tests.conftest"),
    ("tests/system/test_chaos.py", "tests.conftest"),
    ("tests/system/test_chaos_transactions.py", "tests.system.test_chaos"),
    ("tests/unit/protocol/test_record_walk.py", "tests.unit.protocol.conftest"),
    ("tests/unit/server/handlers/test_reassignments.py", _HANDLERS),
    ("tests/unit/server/handlers/test_unregister_broker.py", _HANDLERS),
}
# the long chaos run, outside the folders of the kinds until fault injection's tests move
KNOWN_ELSEWHERE = {"tests/soak/test_chaos_soak.py"}

_FROM_TEST_MODULE = re.compile(r"^\s*from (tests(?:\.\w+)*\.(?:test_\w+|conftest)) import ", re.MULTILINE)


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def test_every_test_file_lives_in_the_folder_of_its_kind() -> None:
    misplaced = sorted(
        _rel(p)
        for p in TESTS.rglob("test_*.py")
        if p.relative_to(TESTS).parts[0] not in KINDS and _rel(p) not in KNOWN_ELSEWHERE
    )
    assert misplaced == [], "tests/unit, tests/integration, tests/system or tests/browser (by kind)"


def test_each_unit_folder_mirrors_a_package_of_the_source() -> None:
    folders = [d for d in (TESTS / "unit").iterdir() if d.is_dir() and d.name != "__pycache__"]
    assert folders
    orphans = [
        d.name
        for d in folders
        if not (ROOT / "framework" / d.name / "__init__.py").is_file()
        and not (ROOT / d.name / "__init__.py").is_file()
    ]
    assert orphans == [], "tests/unit/<package>/ is framework/<package>/ or the top-level <package>/"


def test_no_test_module_or_conftest_is_imported_for_its_helpers() -> None:
    found = {
        (_rel(p), module) for p in TESTS.rglob("*.py") for module in _FROM_TEST_MODULE.findall(p.read_text())
    }
    assert sorted(found - KNOWN_IMPORTS) == [], "move what is shared into a module of tests/support/"
