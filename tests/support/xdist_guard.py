"""A guard for ``./run test``'s two workers (``pytest -n 2 --dist loadgroup``).

An xdist worker tags each test's id with its ``xdist_group`` (``tests/conftest.py`` gives every
test one); the controller then sends a group's tests to one worker, in order. pytest 9.2 keeps a
node's id where pytest-xdist 3.8 cannot tag it, and the groups are then silently ignored: a
module's tests scatter over both workers, its module fixtures (brokers, clusters) are set up
once per worker and a SparkSession starts in each. The suite then runs minutes longer on two
cores; this plugin refuses to run that way instead.
"""

from __future__ import annotations

from importlib.metadata import version

import pytest

HINT = "install the versions pyproject.toml names: pip install -e '.[app,test]'"


def _release(dist: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version(dist).split(".")[:3] if p.isdigit())


def pytest_configure(config: pytest.Config) -> None:
    """In the controller (which collects nothing): the known-bad pair, with a clear message."""
    bad = _release("pytest") >= (9, 2) and _release("pytest-xdist") <= (3, 8, 0)
    if bad and config.getoption("dist", "no") == "loadgroup":
        raise pytest.UsageError(
            f"pytest {version('pytest')} with pytest-xdist {version('pytest-xdist')} ignores "
            f"--dist loadgroup's groups: {HINT}"
        )


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook, which tags the ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if getattr(config.option, "loadgroup", False) and items and "@" not in items[0].nodeid:
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with pytest-xdist does not group tests (--dist loadgroup): {HINT}"
        )
