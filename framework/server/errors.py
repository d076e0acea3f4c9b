"""The one place where failures become Kafka error codes.

Every part of the store raises :class:`StoreError` subclasses carrying their Kafka code; a
disk failure (``OSError``) is KAFKA_STORAGE_ERROR. Handlers never map codes themselves:

* a failure for the request as a whole propagates to the listener, which answers with the
  handler's ``error_response(request, code, message)`` (:func:`kafka_error`);
* a failure for one partition, topic or resource is caught by :class:`answer_errors` around
  the work for it, which sets that result's ``error_code`` (and ``error_message`` where the
  response has one) and lets the handler go on with the next;
* metadata changes proposed to the quorum are awaited by :func:`when_committed`, which sets
  the error of each result whose change did not apply.

Anything else escaping a handler is a bug: the listener logs it with a traceback and answers
UNKNOWN_SERVER_ERROR. Every error answered is counted in ``sftraffic_request_errors`` by the
listener, from the response it sends (``metrics.count_errors``), not here: the codes a
handler or the group coordinator sets directly are counted the same way.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, TypeVar

from framework.errors import StoreError
from framework.metadata.admin import Committed
from framework.protocol.error_codes import ErrorCode
from framework.replication.partition import Partition
from framework.server.context import PartitionLookup

R = TypeVar("R")
QUORUM_TIMEOUT_S = 15.0


def kafka_error(exc: BaseException) -> tuple[ErrorCode, str] | None:
    """(code, message) for a failure the store can name; None for a bug."""
    if isinstance(exc, StoreError):
        code, message = exc.code, exc.message
    elif isinstance(exc, OSError):
        code, message = ErrorCode.KAFKA_STORAGE_ERROR, f"storage error: {exc.strerror or exc}"
    else:
        return None
    return code, message


def resolve_replica(
    partitions: PartitionLookup, topic: str, index: int
) -> tuple[Partition | None, ErrorCode]:
    """The local replica of a partition, or None and the error code that answers for it."""
    try:
        return partitions.replica(topic, index), ErrorCode.NONE
    except StoreError as exc:
        named = kafka_error(exc)
        assert named is not None
        return None, named[0]


def set_error(result: Any, code: int, message: str | None = None) -> None:
    """Record an error on a response element (one partition, topic or resource)."""
    result.error_code = code
    if message is not None and hasattr(result, "error_message"):
        result.error_message = message


class answer_errors:
    """Context manager: a StoreError/OSError inside becomes ``result``'s error code."""

    __slots__ = ("result",)

    def __init__(self, result: Any) -> None:
        self.result = result

    def __enter__(self) -> answer_errors:
        return self

    def __exit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if exc is None:
            return False
        named = kafka_error(exc)
        if named is None:
            return False  # a bug: the listener logs it and answers UNKNOWN_SERVER_ERROR
        set_error(self.result, *named)
        return True


async def when_committed(resp: R, pending: list[tuple[Any, Committed]]) -> R:
    """``resp`` once the quorum applied each result's change (cluster); at once without any.

    ``pending`` pairs a response element with the future of its change; an element whose
    change did not apply gets that error, or REQUEST_TIMED_OUT after 15 s without a quorum.
    Waits with ``asyncio.wait``, not ``asyncio.timeout``: a handler awaits this before it runs
    in a Task (:mod:`framework.server.router`).
    """
    if not pending:
        return resp
    await asyncio.wait([fut for _, fut in pending], timeout=QUORUM_TIMEOUT_S)
    for result, fut in pending:
        problem: StoreError | None
        if not fut.done():
            problem = StoreError(
                "the metadata quorum did not commit the change within 15 s; is a majority of "
                "controller.quorum.voters running?",
                ErrorCode.REQUEST_TIMED_OUT,
            )
        else:
            exc = fut.exception()
            if exc is not None and not isinstance(exc, StoreError):
                raise exc
            problem = exc if exc is not None else fut.result()
        if problem is not None:
            named = kafka_error(problem)
            assert named is not None
            set_error(result, *named)
    return resp
