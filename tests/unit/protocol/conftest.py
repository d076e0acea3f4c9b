"""The record walk's two builds: the mypyc extension (what an install with a C compiler runs) and
the same module run from its source (what one without runs), side by side in one process."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from framework.protocol import record_walk, records

SOURCE = Path(records.__file__).with_name("record_walk.py")
NOT_BUILT = (
    f"framework.protocol.record_walk is not compiled (imported from {record_walk.__file__}): "
    "installed without a C compiler or with SFTRAFFIC_PURE_PYTHON=1; `pip install -e .` builds it"
)


def _from_source() -> ModuleType:
    """record_walk.py executed as Python under another name, whatever is installed."""
    spec = importlib.util.spec_from_file_location("framework.protocol._record_walk_source", SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not module.COMPILED
    return module


PURE = _from_source()
WALKS = {"compiled": record_walk if record_walk.COMPILED else None, "pure": PURE}


@pytest.fixture(scope="module", params=list(WALKS))
def walk_impl(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """Run the test on each build of the walk: ``records.check_records`` uses the one given
    (the compiled one is skipped, with the reason, where it was not built)."""
    module = WALKS[request.param]
    if module is None:
        pytest.skip(NOT_BUILT)
    saved = records.record_walk
    records.record_walk = module
    try:
        yield module
    finally:
        records.record_walk = saved
