"""framework/properties.py: Java's .properties format, as Kafka reads server.properties."""

from pathlib import Path

import pytest

from framework import properties
from framework.errors import ConfigError


def test_java_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "\n"
        "plain=value\n"
        "spaced = padded value \n"
        "colon: yes\n"
        "blank separator\n"
        "  indented=1\n"
        "listeners=PLAINTEXT://:9092,\\\n"
        "    CONTROLLER://:9093\n"
        "escaped\\=key=a\\tb\\u00e9\n"
        "two\\\\=slashes\n"
        "empty=\n"
        "plain=last wins\n"
    )
    assert properties.parse(text) == {
        "plain": "last wins",
        "spaced": "padded value ",
        "colon": "yes",
        "blank": "separator",
        "indented": "1",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "escaped=key": "a\tb\u00e9",
        "two\\": "slashes",
        "empty": "",
    }


def test_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"server.properties: No such file"):
        properties.read(tmp_path / "server.properties", "config file")
    f = tmp_path / "bad.properties"
    f.write_text("a=1\nb=\\u12\n")
    with pytest.raises(ConfigError, match=r"bad.properties, line 2: malformed"):
        properties.read(f)
