"""Requests this broker passes on to another broker (Kafka's ``ForwardingManager``).

A Kafka broker forwards what only the active controller can answer; here that is DescribeQuorum
(55), since only the Raft leader knows every voter's progress. :class:`BrokerChannel` keeps one
connection per broker on the inter-broker listener (TLS and SASL as that listener needs, like
the replica fetchers and the transaction markers), requests one at a time on each. Forwarded
requests carry the client id ``FORWARDED_CLIENT_ID``, so a broker never forwards one again
(two brokers that disagree on who leads cannot bounce a request between them).

Thread-safety: event loop only.
"""

from __future__ import annotations

import ssl
from typing import Any, TypeVar

from framework.errors import StoreError
from framework.metadata.cache import MetadataCache
from framework.security.sasl import SaslLogin
from framework.server.txn_markers import _Connection

T = TypeVar("T")
FORWARDED_CLIENT_ID = "sftraffic-forwarded"


class BrokerChannel:
    """``forward(node, request, version, response class, timeout)``: the other broker's answer;
    raises OSError/TimeoutError/StoreError (and decoding errors) when it cannot be had."""

    def __init__(
        self, cache: MetadataCache, tls: ssl.SSLContext | None = None, sasl: SaslLogin | None = None
    ) -> None:
        self.cache = cache
        self.tls = tls
        self.sasl = sasl
        self.connections: dict[int, _Connection] = {}

    async def forward(self, node_id: int, req: Any, version: int, response_cls: type[T], timeout: float) -> T:
        addr = self.cache.registered_endpoint(node_id)
        if addr is None:
            raise StoreError(f"broker {node_id} is not registered")
        conn = self.connections.get(node_id)
        if conn is None or conn.address != addr:
            if conn is not None:
                conn.close()
            conn = self.connections[node_id] = _Connection(node_id, addr, self.tls, self.sasl)
        return await conn.call(req, version, response_cls, timeout, FORWARDED_CLIENT_ID)

    def close(self) -> None:
        for c in self.connections.values():
            c.close()
        self.connections.clear()
