"""The record walk's builds (``framework/protocol/record_walk.py``): the mypyc extension is built,
agrees with the module run as Python on any input (a build older than its source shows here;
``./run`` rebuilds when the source changes), and is the faster one.

The validation cases themselves (every check, every error) run on both builds in
``test_record_validation.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.protocol import record_walk, records
from tests.unit.protocol.conftest import NOT_BUILT, PURE, SOURCE

NOW = 1_700_000_000_000
LONG_MIN, LONG_MAX = records.LONG_MIN, records.LONG_MAX

compiled_only = pytest.mark.skipif(not record_walk.COMPILED, reason=NOT_BUILT)


def _answer(
    module: ModuleType,
    b: bytes,
    count: int,
    lo: int,
    hi: int,
    require_key: bool,
    ids: tuple[set[int] | None, set[int] | None] = (None, None),
) -> object:
    try:
        return module.walk(b, 0, len(b), count, NOW, lo, hi, require_key, *ids)
    except module.MalformedRecords as exc:
        return ("malformed", str(exc))


@compiled_only
def test_the_installed_walk_is_the_compiled_one() -> None:
    path = Path(record_walk.__file__)
    assert path.suffix in (".so", ".pyd") and path.name.startswith("record_walk."), path
    assert path.parent == SOURCE.parent  # next to its source, which stays the fallback
    assert not PURE.COMPILED and PURE.__file__ == str(SOURCE)


def _record(i: int, key: bytes | None, value: bytes | None, ts_delta: int, headers: int) -> bytes:
    body = bytearray(b"\x00")
    records._write_varint(body, ts_delta)
    records._write_varint(body, i)
    for field in (key, value):
        records._write_varint(body, -1 if field is None else len(field))
        body += field or b""
    records._write_varint(body, headers)
    body += b"\x02h\x02v" * headers
    out = bytearray()
    records._write_varint(out, len(body))
    return bytes(out + body)


_field = st.one_of(
    st.none(),
    st.binary(max_size=4),
    st.sampled_from([b"x" * 200, b"\xff" * 9000]),
    # Confluent's framing (magic 0, 4-byte schema id) for schema validation
    st.builds(
        lambda sid, rest: b"\x00" + sid.to_bytes(4, "big") + rest,
        st.sampled_from([1, 7, 2**31]),
        st.binary(max_size=3),
    ),
)
_ids = st.sampled_from([None, set(), {1}, {7, 2**31}])


@compiled_only
@given(
    st.lists(
        st.tuples(_field, _field, st.sampled_from([0, 1, -1, 8191, -(10**9), 10**12]), st.integers(0, 2)),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.tuples(st.integers(0, 10**5), st.integers(0, 255)), max_size=3),
    st.integers(-1, 1),
    st.sampled_from([(LONG_MIN, LONG_MAX), (NOW - 5, NOW + 5), (NOW, NOW), (NOW + 10, NOW - 10)]),
    st.booleans(),
    st.tuples(_ids, _ids),
)
@settings(max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_compiled_walk_answers_as_the_source_does(
    recs: list[tuple[bytes | None, bytes | None, int, int]],
    changes: list[tuple[int, int]],
    count_off: int,
    window: tuple[int, int],
    require_key: bool,
    ids: tuple[set[int] | None, set[int] | None],
) -> None:
    body = bytearray(b"".join(_record(i, k, v, d, h) for i, (k, v, d, h) in enumerate(recs)))
    for where, value in changes:
        body[where % len(body)] = value
    count = max(1, len(recs) + count_off)
    lo, hi = window
    assert _answer(record_walk, bytes(body), count, lo, hi, require_key, ids) == _answer(
        PURE, bytes(body), count, lo, hi, require_key, ids
    )


@compiled_only
def test_the_compiled_walk_takes_bytes_only() -> None:
    """mypyc checks the declared ``bytes``: a memoryview would index through the generic
    protocol, so ``check_records`` copies the records section into bytes."""
    with pytest.raises(TypeError):
        record_walk.walk(memoryview(b"\x00"), 0, 1, 1, NOW, LONG_MIN, LONG_MAX, False)  # type: ignore[arg-type]


@compiled_only
def test_the_compiled_walk_is_several_times_faster() -> None:
    """A loose bound (measured: ~25x): a change that makes mypyc fall back to generic object
    operations in the loop (a Buffer instead of bytes, a big-int bound) would lose it."""
    n = 4000
    body = b"".join(_record(i, b"sf-%05d" % i, b'{"speed": %d}' % i * 10, 0, 0) for i in range(n))

    def best(module: ModuleType) -> float:
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            assert module.walk(body, 0, len(body), n, NOW, NOW - 1000, NOW + 1000, True) is None
            times.append(time.perf_counter() - t0)
        return min(times)

    assert best(PURE) > 4 * best(record_walk)


@compiled_only
def test_schema_validation_costs_the_compiled_walk_little() -> None:
    """The schema check reads five bytes and looks one id up per record: a loose bound on the
    walk with it on against off (a fall back to parse_record would cost several times)."""
    n = 4000
    body = b"".join(_record(i, b"sf-%05d" % i, b"\x00\x00\x00\x00\x07" + b"v" * 90, 0, 0) for i in range(n))
    ids = {7}

    def best(value_ids: set[int] | None) -> float:
        times = []
        for _ in range(9):
            t0 = time.perf_counter()
            assert (
                record_walk.walk(body, 0, len(body), n, NOW, NOW - 1000, NOW + 1000, False, None, value_ids)
                is None
            )
            times.append(time.perf_counter() - t0)
        return min(times)

    assert best(ids) < 2.5 * best(None)
