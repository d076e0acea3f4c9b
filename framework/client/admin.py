"""Small admin calls over :class:`WireClient` for tools and applications.

Applications create their streams through :func:`ensure_stream` rather than building
sftraffic's StreamAdmin request themselves, so the protocol stays an implementation detail of
the store and the application keeps working on an Apache Kafka cluster (no streams there).
"""

from __future__ import annotations

from collections.abc import Mapping

from framework.client.security import wire_client
from framework.errors import StoreError
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse
from framework.protocol.messages.stream_admin import (
    CREATE,
    DESCRIBE,
    StreamAdminRequest,
    StreamAdminResponse,
    StreamConfig,
)


def live_broker_ids(bootstrap: str, timeout: float = 3.0) -> list[int] | None:
    """Broker ids the store's Metadata lists, or None when that broker does not answer."""
    try:
        with wire_client(bootstrap, timeout) as c:
            md = c.send(MetadataRequest(topics=[]), MetadataResponse)
    except (OSError, StoreError):
        return None
    return sorted(b.node_id for b in md.brokers)


def ensure_stream(
    bootstrap: str, name: str, configs: Mapping[str, str], client_id: str = "sftraffic-admin"
) -> bool:
    """Create stream ``name`` unless it exists; False when the store has no streams (Kafka).

    Raises :class:`StoreError` with the store's message when the stream cannot be created. An
    existing stream is looked up first, so a client that may describe it but not create streams
    (a producer with the stream's produce permission) gets True.
    """
    with wire_client(bootstrap, 10, client_id) as w:
        if w.version_for(StreamAdminRequest.API_KEY) is None:
            return False
        found = w.send(StreamAdminRequest(operation=DESCRIBE, names=[name]), StreamAdminResponse).streams
        if found and found[0].error_code == ErrorCode.NONE:
            return True
        req = StreamAdminRequest(
            operation=CREATE, names=[name], configs=[StreamConfig(k, v) for k, v in configs.items()]
        )
        r = w.send(req, StreamAdminResponse).streams[0]
    if r.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):  # exists: fine
        raise StoreError(f"cannot create stream {name}: {r.error_message}", ErrorCode(r.error_code))
    return True
