"""What a handler gets: the broker, the request header and the connection it came on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from framework.protocol.frames import RequestHeader

if TYPE_CHECKING:
    from framework.server.broker import Broker


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    peer: str

    @property
    def version(self) -> int:
        return self.header.api_version
