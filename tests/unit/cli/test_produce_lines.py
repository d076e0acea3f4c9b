"""``sftraffic produce``'s line → (key, value) split, as kcat -K / -k / -Z (no broker)."""

from __future__ import annotations

import argparse

import pytest

from framework.cli.produce import _headers, _Splitter
from framework.errors import StoreError


def split(key_sep: str | None = None, key: str | None = None, null: bool = False) -> _Splitter:
    return _Splitter(argparse.Namespace(key_sep=key_sep, key=key, null_empty=null))


def test_key_sep_splits_at_the_first_separator() -> None:
    s = split(":")
    assert s(b"k:v:w") == (b"k", b"v:w")
    assert s(b"k:") == (b"k", b"")  # an empty value, not null
    assert s(b":v") == (b"", b"v")  # an empty key, not null
    assert s(b"novalue") == (None, b"novalue")


def test_fixed_key_is_the_key_of_lines_without_a_separator() -> None:
    assert split(":", key="fixed")(b"plain") == (b"fixed", b"plain")
    assert split(":", key="fixed")(b"k:v") == (b"k", b"v")
    assert split(key="fixed")(b"a:b") == (b"fixed", b"a:b")


def test_null_empty_sends_tombstones() -> None:
    s = split(":", null=True)
    assert s(b"k:") == (b"k", None)
    assert s(b":v") == (None, b"v")


def test_escaped_and_multibyte_separators() -> None:
    assert split(r"\t")(b"k\tv") == (b"k", b"v")
    assert split("=>")(b"a=>b=>c") == (b"a", b"b=>c")
    with pytest.raises(StoreError, match="must not be empty"):
        split("")


def test_headers() -> None:
    assert _headers(["a=1", "b=", "c", "d=x=y"]) == [("a", b"1"), ("b", b""), ("c", None), ("d", b"x=y")]
    with pytest.raises(StoreError, match="NAME=VALUE"):
        _headers(["=v"])
