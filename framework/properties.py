"""Java ``.properties`` files, as Kafka reads them (``server.properties``, ``--command-config``).

The format of ``java.util.Properties.load``: a line is ``key=value``, ``key: value`` or
``key value`` (the first unescaped ``=``, ``:`` or whitespace ends the key; whitespace around
the separator is dropped); lines starting with ``#`` or ``!`` are comments; a line ending in an
odd number of backslashes continues on the next one (whose leading whitespace is dropped);
``\\t``, ``\\n``, ``\\r``, ``\\f``, ``\\uXXXX`` and ``\\<char>`` are escapes. A key given twice
keeps its last value, as in Java.
"""

from __future__ import annotations

import re
from pathlib import Path

from framework.errors import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=: \t\f"
_LINE_ENDS = re.compile(r"\r\n|\r|\n")  # Java's only: str.splitlines() also splits at \f, \v, \x1c...


def parse(text: str, source: str = "properties") -> dict[str, str]:
    """The key/value pairs of ``text``; a malformed ``\\u`` escape is a one-line ConfigError."""
    out: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        try:
            out[_unescape(key)] = _unescape(value)
        except ValueError as exc:
            raise ConfigError(f"{source}, line {number}: {exc}") from None
    return out


def read(path: str | Path, what: str = "properties file") -> dict[str, str]:
    """:func:`parse` of a file; a missing or unreadable file is a one-line ConfigError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        text = p.read_bytes().decode("latin-1")  # Java's own default for .properties
    except OSError as exc:
        raise ConfigError(f"{what} {p}: {exc.strerror or exc}") from None
    return parse(text, f"{what} {p}")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(_LINE_ENDS.split(text), 1):
        stripped = raw.lstrip(" \t\f")
        if pending is None:
            if not stripped or stripped[0] in "#!":
                continue
            start, pending = number, ""
        pending += stripped
        trailing = len(pending) - len(pending.rstrip("\\"))
        if trailing % 2 == 1:  # an odd run of backslashes: the line goes on
            pending = pending[:-1]
            continue
        lines.append((start, pending))
        pending = None
    if pending is not None:
        lines.append((start, pending))
    return lines


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in _SEPARATORS:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        n = s[i + 1]
        if n == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) < 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uxxxx escape {s[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(n, n))
        i += 2
    return "".join(out)
