"""StreamAdmin (API key 10000): sftraffic's extension for stream policies.

Hand-written (not generated): Kafka has no streams. Kafka clients ignore API keys they do not
know in ApiVersions, so advertising it is harmless; ``sftraffic streams`` uses it and says so
clearly when pointed at a broker that lacks it (Apache Kafka, Redpanda).

Operations: 0 describe (``names`` empty = every stream), 1 create, 2 alter (a config whose
value is null is removed), 3 delete (refused while the stream has topics).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from framework.protocol.fields import FieldSpec, spec

__all__ = [
    "StreamAdminRequest",
    "StreamAdminResponse",
    "StreamConfig",
    "StreamConfigEntry",
    "StreamResult",
]

DESCRIBE, CREATE, ALTER, DELETE = 0, 1, 2, 3
SOURCE_STREAM, SOURCE_BROKER, SOURCE_DEFAULT = 0, 1, 2


@dataclasses.dataclass(slots=True)
class StreamConfig:
    SPECS: ClassVar[dict[str, FieldSpec]] = {
        "name": spec("string", "0+"),
        "value": spec("string", "0+", nullable="0+"),
    }
    name: str = ""
    value: str | None = None


@dataclasses.dataclass(slots=True)
class StreamAdminRequest:
    API_KEY: ClassVar[int] = 10000
    VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    FLEXIBLE: ClassVar[int] = 0
    SPECS: ClassVar[dict[str, FieldSpec]] = {
        "operation": spec("int8", "0+"),
        "names": spec("string", "0+", array=True),
        "configs": spec("struct", "0+", array=True, struct="StreamConfig"),
        "validate_only": spec("bool", "0+"),
    }
    operation: int = DESCRIBE
    names: list[str] = dataclasses.field(default_factory=list)
    configs: list[StreamConfig] = dataclasses.field(default_factory=list)
    validate_only: bool = False


@dataclasses.dataclass(slots=True)
class StreamConfigEntry:
    SPECS: ClassVar[dict[str, FieldSpec]] = {
        "name": spec("string", "0+"),
        "value": spec("string", "0+", nullable="0+"),
        "source": spec("int8", "0+"),
    }
    name: str = ""
    value: str | None = None
    source: int = SOURCE_DEFAULT


@dataclasses.dataclass(slots=True)
class StreamResult:
    SPECS: ClassVar[dict[str, FieldSpec]] = {
        "name": spec("string", "0+"),
        "error_code": spec("int16", "0+"),
        "error_message": spec("string", "0+", nullable="0+"),
        "created_ms": spec("int64", "0+"),
        "configs": spec("struct", "0+", array=True, struct="StreamConfigEntry"),
        "topics": spec("string", "0+", array=True),
    }
    name: str = ""
    error_code: int = 0
    error_message: str | None = None
    created_ms: int = 0
    configs: list[StreamConfigEntry] = dataclasses.field(default_factory=list)
    topics: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class StreamAdminResponse:
    API_KEY: ClassVar[int] = 10000
    VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    FLEXIBLE: ClassVar[int] = 0
    SPECS: ClassVar[dict[str, FieldSpec]] = {
        "throttle_time_ms": spec("int32", "0+"),
        "streams": spec("struct", "0+", array=True, struct="StreamResult"),
    }
    throttle_time_ms: int = 0
    streams: list[StreamResult] = dataclasses.field(default_factory=list)
