"""``sftraffic consume TOPIC``: print a topic's records, as kcat -C and rpk topic consume.

Where it starts:

* ``-g GROUP`` subscribes as a member of GROUP and commits what it printed (a record's offset
  is committed only once it is written to stdout), so the next consume of the group continues
  after it. A partition the group has no offset for starts at the end, or at the beginning with
  ``--from-beginning`` / ``--offset beginning`` (auto.offset.reset, as kafka-console-consumer).
  The group's committed offsets decide the rest: ``--offset N|-N``, ``--timestamp`` and
  ``--partition`` are refused with it (``sftraffic groups reset-offsets`` moves a group).
* Without a group it reads (assign, no commits) every partition of TOPIC, or those of
  ``--partition N`` (repeatable), from ``--offset``: ``beginning``, ``end`` (the default, as
  kcat and kafka-console-consumer), ``N`` (an offset), ``-N`` (N offsets before the end of each
  partition, as kcat -o -N; a transaction marker takes an offset too), or from the first record
  at or after ``--timestamp MS`` (the end when there is none).

When it stops: ``-n COUNT`` records printed; ``-e`` when every assigned partition has reached
its end (the high watermark; the last stable offset for read_committed), as kcat -e; Ctrl-C,
which exits 0 as kcat does, with no traceback, after a group member has committed what it
printed and left the group. A closed stdout (``| head``) stops it too, exit 141 as for a C
tool killed by SIGPIPE. ``--isolation`` is read_uncommitted by default, as Kafka's console
consumer (librdkafka's own default is read_committed).

How it prints (``-f/--format``): ``text`` (the default) is ``%v\\n``, the value and a newline;
any string with kcat's ``%`` letters (``%t %p %o %k %K %v %s %S %R %T %h``, see
:mod:`framework.cli.records`) prints each record that way; ``json`` prints one JSON object per
record (topic, partition, offset, timestamp, timestamp_type, key, value, headers; bytes that
are not UTF-8 as base64 with a ``*_encoding`` flag). ``-Z`` prints a null key or value as
``NULL`` in format strings (JSON has its null).

Avro: with a schema registry known (``--registry URL``, or ``$SFTRAFFIC_REGISTRY``), a key or
value in Confluent's wire format (magic byte 0, a 4-byte schema id) is decoded with the schema
of that id and printed as JSON (``%k``/``%v``); ``--format json`` gives the decoded value and
its ``value_schema_id``. Anything else prints as it is. ``-f avro`` is ``%v\\n`` with decoding
on (the registry defaulting to http://127.0.0.1:8081). A value that carries the magic byte but
cannot be decoded is a one-line error naming its offset, exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from framework.cli.common import kafka_error, quiet_logger
from framework.cli.connection import add_connection, connection
from framework.cli.records import (
    TIMESTAMP_TYPES,
    Formatter,
    Record,
    json_formatter,
    text_formatter,
)
from framework.errors import StoreError

EPILOG = """\
examples:
  sftraffic consume demo --from-beginning -e                  # all there is, then exit
  sftraffic consume demo -g billing                           # as a group member; commits
  sftraffic consume demo --offset -10 -f '%p@%o %k=%v\\n'      # the last 10 of each partition
  sftraffic consume demo -p 0 --timestamp 1764620000000 -n 5 --format json
  sftraffic consume traffic --from-beginning --registry http://127.0.0.1:8081   # Avro as JSON

format letters (kcat's): %t topic  %p partition  %o offset  %k key  %K key length
  %v (or %s) value  %S value length  %R value length (4 bytes, big-endian)  %T timestamp (ms)
  %h headers (name=value,...)  %% a percent sign; escapes \\n \\t \\r \\\\ \\xHH"""

DEFAULT_REGISTRY = "http://127.0.0.1:8081"
REGISTRY_ENV = "SFTRAFFIC_REGISTRY"
# errors after which waiting longer shows nothing (anything else librdkafka retries: a broker
# that went away, a leader that moved, and its message is printed once)
_FATAL = {
    "UNKNOWN_TOPIC_OR_PART",
    "_UNKNOWN_TOPIC",
    "_UNKNOWN_PARTITION",
    "TOPIC_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "_AUTHENTICATION",
    "SASL_AUTHENTICATION_FAILED",
    "_SSL",
}
# librdkafka's OFFSET_TAIL(n) is this minus n: n offsets before the end
_OFFSET_TAIL_BASE = -2000
# stdout closed under us: the exit code of a process SIGPIPE ended
EXIT_PIPE = 141


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "consume",
        help="print a topic's records (as a group member, or from given offsets), as kcat -C",
        description="Print TOPIC's records to stdout, one per line by default.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", metavar="TOPIC")
    where = p.add_argument_group("where to start")
    where.add_argument(
        "-g", "--group", metavar="GROUP", help="consume as a member of GROUP and commit what is printed"
    )
    where.add_argument(
        "-p",
        "--partition",
        dest="partitions",
        type=int,
        action="append",
        metavar="N",
        help="only partition N (repeatable; default all; not with -g)",
    )
    start = where.add_mutually_exclusive_group()
    start.add_argument(
        "-o",
        "--offset",
        metavar="WHERE",
        help="beginning, end (default), stored (-g's committed offsets), N, or -N (N before the end)",
    )
    start.add_argument(
        "--from-beginning",
        action="store_true",
        help="from the beginning (with -g: where the group has no committed offset)",
    )
    start.add_argument(
        "--timestamp", type=int, metavar="MS", help="from the first record at or after MS (ms)"
    )
    when = p.add_argument_group("when to stop")
    when.add_argument("-n", "--count", type=int, metavar="COUNT", help="exit after COUNT records")
    when.add_argument(
        "-e",
        "--exit-at-end",
        action="store_true",
        help="exit when every partition's end is reached (kcat -e)",
    )
    how = p.add_argument_group("what to print")
    how.add_argument(
        "-f",
        "--format",
        default="text",
        metavar="FORMAT",
        help="text (%%v\\n, the default), json, avro (%%v\\n, values decoded), or a format string "
        "of %%-letters (below)",
    )
    how.add_argument("-Z", "--null-str", action="store_true", help="print a null key or value as NULL")
    how.add_argument(
        "--isolation",
        choices=["read_uncommitted", "read_committed"],
        default="read_uncommitted",
        help="read_committed hides aborted and open transactions' records (default read_uncommitted)",
    )
    how.add_argument(
        "--registry",
        metavar="URL",
        help=f"schema registry: decode Avro keys and values (${REGISTRY_ENV}; -f avro: {DEFAULT_REGISTRY})",
    )
    add_connection(p)
    p.set_defaults(func=run)


@dataclass(frozen=True)
class _Start:
    """Where an assigned partition starts: a librdkafka logical offset, an offset, or a time."""

    offset: int = 0
    timestamp: int | None = None


def _start(args: argparse.Namespace) -> _Start | None:
    """The start of the partitions (None: a group's committed offsets, or auto.offset.reset)."""
    spec = args.offset
    if args.group is not None:
        if args.partitions:
            raise StoreError("--partition is not for a group member (the group assigns partitions); drop -g")
        if args.timestamp is not None or (spec is not None and spec not in ("beginning", "end", "stored")):
            raise StoreError(
                "with -g the group's committed offsets decide where it starts (--offset beginning|end "
                "only for partitions it has none for); move them with `sftraffic groups reset-offsets`"
            )
        return None
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END  # noqa: PLC0415

    if args.timestamp is not None:
        if args.timestamp < 0:
            raise StoreError(f"--timestamp {args.timestamp}: milliseconds since the epoch, 0 or more")
        return _Start(timestamp=args.timestamp)
    if args.from_beginning or spec == "beginning":
        return _Start(OFFSET_BEGINNING)
    if spec is None or spec == "end":
        return _Start(OFFSET_END)
    if spec == "stored":
        raise StoreError("--offset stored needs -g GROUP (the offsets a group committed)")
    text = spec[1:] if spec.startswith("-") else spec
    if not text.isdigit():
        raise StoreError(f"--offset {spec!r}: expected beginning, end, stored, N or -N")
    n = int(text)
    return _Start(_OFFSET_TAIL_BASE - n if spec.startswith("-") else n)


def _formatter(args: argparse.Namespace) -> Formatter:
    fmt = args.format
    if fmt == "json":
        return json_formatter
    if fmt in ("text", "avro"):
        fmt = "%v\\n"
    elif "%" not in fmt:
        raise StoreError(
            f"--format {fmt!r}: expected text, json, avro or a string with %-letters (%v, %k...)"
        )
    return text_formatter(fmt, b"NULL" if args.null_str else b"")


def _registry_url(args: argparse.Namespace) -> str | None:
    url: str | None = args.registry or os.environ.get(REGISTRY_ENV) or None
    if url is None and args.format == "avro":
        url = DEFAULT_REGISTRY
    return url


class _AvroDecoder:
    """Keys and values in Confluent's wire format, decoded with their writer's schema (by id)."""

    def __init__(self, url: str) -> None:
        try:
            from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415
            from confluent_kafka.schema_registry.avro import AvroDeserializer  # noqa: PLC0415
            from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: PLC0415
        except ImportError as exc:
            raise StoreError(
                f"Avro decoding needs Confluent's schema registry client (missing {exc.name}): "
                "pip install 'sftraffic[app]'"
            ) from None
        self.url = url
        self._deserialize = AvroDeserializer(SchemaRegistryClient({"url": url}))
        self._context = SerializationContext
        self._fields = {"key": MessageField.KEY, "value": MessageField.VALUE}

    def decode(self, data: bytes | None, part: str, msg: Any) -> tuple[int | None, Any]:
        """(schema id, decoded) for wire-format ``data``; (None, None) for anything else."""
        if data is None or len(data) < 5 or data[0] != 0:
            return None, None
        schema_id = int.from_bytes(data[1:5], "big")
        try:
            ctx = self._context(msg.topic(), self._fields[part])
            return schema_id, self._deserialize(data, ctx)
        except Exception as exc:  # the registry's answer or the decoder's: one line either way
            where = f"{msg.topic()} [{msg.partition()}] @ {msg.offset()}"
            host = self.url.partition("://")[2].rpartition("@")[2] or self.url
            raise StoreError(
                f"{where}: the {part} looks Avro-encoded (schema id {schema_id}) but cannot be decoded "
                f"with the registry at {host}: {exc}"
            ) from None


def _record(msg: Any, decoder: _AvroDecoder | None) -> Record:
    ts_type, ts = msg.timestamp()
    key, value = msg.key(), msg.value()
    kid = vid = kdata = vdata = None
    if decoder is not None:
        kid, kdata = decoder.decode(key, "key", msg)
        vid, vdata = decoder.decode(value, "value", msg)
    return Record(
        topic=msg.topic(),
        partition=msg.partition(),
        offset=msg.offset(),
        timestamp=ts if ts_type else None,
        timestamp_type=TIMESTAMP_TYPES.get(ts_type),
        key=key,
        value=value,
        headers=tuple(msg.headers() or ()),
        key_schema_id=kid,
        key_data=kdata,
        value_schema_id=vid,
        value_data=vdata,
    )


def _config(args: argparse.Namespace, conn_conf: dict[str, Any]) -> dict[str, Any]:
    earliest = args.from_beginning or args.offset == "beginning"
    conf: dict[str, Any] = {"client.id": "sftraffic-consume"}
    conf.update(conn_conf)
    conf.update(
        {
            # librdkafka wants a group id even to assign; without -g nothing is committed to it
            "group.id": args.group if args.group is not None else "sftraffic-consume",
            "enable.auto.commit": args.group is not None,
            # an offset is stored (and so committed) once its record is on stdout
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest" if earliest else "latest",
            "isolation.level": args.isolation,
            "enable.partition.eof": args.exit_at_end,
            "logger": quiet_logger(),
        }
    )
    return conf


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaException  # noqa: PLC0415

    if args.count is not None and args.count < 0:
        raise StoreError(f"--count {args.count}: must be 0 or more")
    start = _start(args)
    fmt = _formatter(args)
    conn = connection(args)
    url = _registry_url(args)
    decoder = _AvroDecoder(url) if url else None
    conn.check()
    if args.count == 0:
        return 0
    try:
        consumer = Consumer(_config(args, conn.client_config()))
    except KafkaException as exc:
        raise kafka_error(exc) from None
    try:
        partitions = _partitions(consumer, args.topic, args.partitions)
        if start is None:
            consumer.subscribe([args.topic])
        else:
            consumer.assign(_assignment(consumer, args.topic, partitions, start))
        return _Loop(args, consumer, fmt, decoder, None if start is None else partitions).run()
    except KafkaException as exc:
        raise kafka_error(exc) from None
    except KeyboardInterrupt:
        return 0  # as kcat; the group member commits and leaves below
    except _PipeClosed:
        return _pipe_closed()
    finally:
        _close(consumer)


def _close(consumer: Any) -> None:
    try:
        consumer.close()  # a group member: the final commit, then LeaveGroup
    except Exception as exc:  # the commit or the leave failed: the group's session times out
        print(f"sftraffic consume: warning: closing: {exc}", file=sys.stderr)


def _partitions(consumer: Any, topic: str, wanted: list[int] | None) -> list[int]:
    """The partitions to read (the topic must exist: a consumer does not create it)."""
    md = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if md is None or (md.error is not None and md.error.name() == "UNKNOWN_TOPIC_OR_PART"):
        raise StoreError(f"topic {topic!r} does not exist")
    if md.error is not None:
        raise StoreError(f"topic {topic!r}: {md.error.name()}: {md.error.str()}")
    have = sorted(md.partitions)
    for p in wanted or ():
        if p not in md.partitions:
            raise StoreError(f"--partition {p}: topic {topic!r} has partitions 0..{len(have) - 1}")
    return sorted(set(wanted)) if wanted else have


def _assignment(consumer: Any, topic: str, partitions: list[int], start: _Start) -> list[Any]:
    from confluent_kafka import OFFSET_END, TopicPartition  # noqa: PLC0415

    if start.timestamp is None:
        return [TopicPartition(topic, p, start.offset) for p in partitions]
    found = consumer.offsets_for_times(
        [TopicPartition(topic, p, start.timestamp) for p in partitions], timeout=10
    )
    # no record at or after the time: from the end (offset -1 in the answer)
    return [TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END) for tp in found]


@contextlib.contextmanager
def _ctrl_c_between_rounds() -> Iterator[threading.Event]:
    """Ctrl-C (SIGINT) ends the loop between two rounds, not inside one: a record printed is
    always stored before the member's final commit (a KeyboardInterrupt between the print and
    the store made the next member read it again). In the main thread only; elsewhere (tests)
    Python's own KeyboardInterrupt stands."""
    stopped = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopped
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: stopped.set())
    try:
        yield stopped
    finally:
        signal.signal(signal.SIGINT, previous)


class _Loop:
    """Poll, print, store offsets; stop at -n, at -e's end, on Ctrl-C or on a closed stdout."""

    def __init__(
        self,
        args: argparse.Namespace,
        consumer: Any,
        fmt: Callable[[Record], bytes],
        decoder: _AvroDecoder | None,
        assigned: list[int] | None,
    ) -> None:
        self.consumer = consumer
        self.fmt = fmt
        self.decoder = decoder
        self.topic = args.topic
        self.count = args.count
        self.exit_at_end = args.exit_at_end
        self.group = args.group is not None
        self.assigned = None if assigned is None else {(args.topic, p) for p in assigned}
        self.printed = 0
        self.at_end: set[tuple[str, int]] = set()
        self.warned = ""
        self.out = sys.stdout.buffer

    def run(self) -> int:
        with _ctrl_c_between_rounds() as stopped:
            while not stopped.is_set():
                msg = self.consumer.poll(0.5)
                last: dict[tuple[str, int], int] = {}
                while msg is not None:
                    if self._take(msg, last) and self.count is not None and self.printed >= self.count:
                        break
                    msg = self.consumer.poll(0)
                try:
                    self.out.flush()
                except BrokenPipeError:
                    raise _PipeClosed from None
                if last and self.group:
                    self._store(last)
                if self.count is not None and self.printed >= self.count:
                    return 0
                if self.exit_at_end and self._all_at_end():
                    return 0
        return 0  # Ctrl-C, as kcat: what was printed is stored, the member commits it on close

    def _store(self, last: dict[tuple[str, int], int]) -> None:
        from confluent_kafka import KafkaException, TopicPartition  # noqa: PLC0415

        try:
            self.consumer.store_offsets(offsets=[TopicPartition(t, p, o + 1) for (t, p), o in last.items()])
        except KafkaException:  # a rebalance took the partition away: its new owner reads on
            pass

    def _take(self, msg: Any, last: dict[tuple[str, int], int]) -> bool:
        """Print a record (True) or note an event (False)."""
        err = msg.error()
        if err is not None:
            if err.name() == "_PARTITION_EOF":
                self.at_end.add((msg.topic(), msg.partition()))
            elif err.fatal() or err.name() in _FATAL:
                raise StoreError(f"{err.name()}: {err.str()}")
            elif err.str() != self.warned:  # librdkafka retries; say it once
                self.warned = err.str()
                print(f"sftraffic consume: warning: {err.str()} (retrying)", file=sys.stderr)
            return False
        tp = (msg.topic(), msg.partition())
        self.at_end.discard(tp)
        try:
            self.out.write(self.fmt(_record(msg, self.decoder)))
        except BrokenPipeError:
            raise _PipeClosed from None
        last[tp] = msg.offset()
        self.printed += 1
        return True

    def _all_at_end(self) -> bool:
        assigned = self.assigned
        if assigned is None:  # a group member: what the group gave it now
            assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        return bool(assigned) and assigned <= self.at_end


class _PipeClosed(Exception):
    """stdout's reader went away (``| head``)."""


def _pipe_closed() -> int:
    # nothing more can be written: later writes (and the interpreter's last flush) go to
    # /dev/null instead of failing again
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_PIPE
