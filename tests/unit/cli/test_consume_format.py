"""``sftraffic consume``'s printing (framework/cli/records.py): kcat's format letters and
escapes, and the JSON object per record, with no broker."""

from __future__ import annotations

import base64
import json

import pytest

from framework.cli.records import Record, compile_format, json_object, text_formatter, unescape
from framework.errors import StoreError

REC = Record(
    topic="t",
    partition=3,
    offset=42,
    timestamp=1764620000000,
    timestamp_type="CreateTime",
    key=b"k1",
    value=b"hello",
    headers=(("src", b"cli"), ("flag", None)),
)


def test_kcat_letters_and_escapes() -> None:
    fmt = text_formatter(r"%t/%p@%o %k(%K)=%v(%S) %T {%h}\t100%%\n")
    assert fmt(REC) == b"t/3@42 k1(2)=hello(5) 1764620000000 {src=cli,flag=NULL}\t100%\n"
    assert text_formatter("%s")(REC) == b"hello"  # kcat's letter for the value
    assert text_formatter("%R%v")(REC) == b"\x00\x00\x00\x05hello"
    assert text_formatter(r"\x00\xff%v")(REC) == b"\x00\xffhello"


def test_null_and_empty_stay_apart() -> None:
    tomb = Record("t", 0, 1, None, None, key=b"", value=None)
    assert text_formatter("[%k|%K][%v|%S|%T]")(tomb) == b"[|0][|-1|-1]"
    assert text_formatter("%v", null=b"NULL")(tomb) == b"NULL"
    assert text_formatter("%R")(tomb) == b"\xff\xff\xff\xff"
    obj = json_object(tomb)
    assert (obj["key"], obj["value"], obj["timestamp"], obj["timestamp_type"]) == ("", None, None, None)


def test_unknown_letter_and_lone_percent_are_errors() -> None:
    with pytest.raises(StoreError, match="unknown %q"):
        compile_format("%q")
    with pytest.raises(StoreError, match="lone %"):
        compile_format("%v%")
    with pytest.raises(StoreError, match="two hex digits"):
        unescape(r"\xg1", "--key-sep")


def test_json_object_utf8_as_text_other_bytes_as_base64() -> None:
    raw = Record(
        "t", 0, 0, 1, "LogAppendTime", key=b"\xff\x00", value="żółw".encode(), headers=(("h", b"\x80"),)
    )
    obj = json_object(raw)
    assert obj["value"] == "żółw" and "value_encoding" not in obj
    assert obj["key_encoding"] == "base64" and base64.b64decode(obj["key"]) == b"\xff\x00"
    assert obj["headers"] == [{"key": "h", "value": base64.b64encode(b"\x80").decode(), "encoding": "base64"}]
    assert obj["timestamp_type"] == "LogAppendTime"


def test_decoded_avro_prints_as_json_with_its_schema_id() -> None:
    rec = Record(
        "t", 0, 0, 1, "CreateTime", key=b"s-1", value=b"\x00\x00\x00\x00\x07...", value_schema_id=7,
        value_data={"sensor_id": "s-1", "speed": 42, "raw": b"\x01"},
    )  # fmt: skip
    assert text_formatter("%v")(rec) == b'{"sensor_id":"s-1","speed":42,"raw":"\\u0001"}'
    obj = json_object(rec)
    assert obj["value"]["speed"] == 42 and obj["value_schema_id"] == 7 and obj["key"] == "s-1"
    json.dumps(obj, default=lambda b: b.decode("latin-1"))


def test_unescape_keeps_unknown_backslashes() -> None:
    assert unescape(r"a\tb\\c\qd\\", "--key-sep") == b"a\tb\\c\\qd\\"
    assert unescape("é", "--key-sep") == "é".encode()
