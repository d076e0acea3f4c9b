"""``sftraffic produce TOPIC``: lines of stdin (or ``--value``) as records, as kcat -P and rpk.

Each line is one record (the newline is not part of it). As kcat: an empty line is skipped;
``--key-sep SEP`` splits a line at its first SEP into key and value (``k:`` is key ``k`` with
an empty value, ``:v`` an empty key, and a line without SEP has no key, or the ``--key`` one);
``-Z`` sends an empty key or value as null instead (``k:`` is then a tombstone). ``--value V``
(repeatable) gives the records on the command line instead of stdin, split the same way; an
empty ``--value ''`` is sent (empty, or null with ``-Z``). Headers (``-H name=value``, or
``-H name`` for a null value) go on every record.

stdin is read as it arrives (a pipe of any size streams through a bounded producer queue; a
terminal's lines go out as they are typed) and everything is flushed at EOF. The exit code is 0
only when every record was acknowledged (``--acks``; with ``--acks 0`` when it was sent). The
first record that fails stops the reading: what was sent before it is flushed, one line names
the failing line, exit 2.

``--format json``: each value must be one JSON value; a line that is not is a one-line error
naming its number, and nothing after it is read (the lines before it are sent: give
``--transactional-id`` for all or nothing). The line is sent as written. ``--format avro``: each
value is JSON converted to Avro with the latest schema of the subject (``--subject``, default
TOPIC-value, Confluent's TopicNameStrategy) from the schema registry (``--registry``), and sent
in Confluent's wire format (magic byte 0, the schema id, the Avro body). The JSON is plain JSON
(a union's value as it is, not Avro's ``{"type": value}`` form); the key stays text.

``--transactional-id ID`` puts every record in one transaction, committed at EOF and aborted
on Ctrl-C or on any error, so read_committed consumers see all of it or nothing. Without one,
Ctrl-C ends the input as EOF does (as kcat): what was read is flushed and the exit code says
whether it was all acknowledged; an aborted transaction exits 130.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from framework.cli.common import add_registry, kafka_error, quiet_logger
from framework.cli.connection import add_connection, connection
from framework.cli.records import unescape
from framework.errors import StoreError

EPILOG = """\
examples:
  echo hello | sftraffic produce demo
  printf 'sensor-1:{"speed": 42}\\n' | sftraffic produce demo --key-sep : --format json -v
  sftraffic produce demo --value on --value off -k switch-7 -H source=cli --acks 1
  sftraffic produce demo --transactional-id loader-1 < events.txt      # all or nothing
  echo '{"sensor_id": "s-1", "speed": 42}' | sftraffic produce traffic --format avro \\
      --registry http://127.0.0.1:8081            # subject traffic-value, its latest schema

Each line is one record; empty lines are skipped. -v prints "TOPIC [PARTITION] @ OFFSET" per
record as it is acknowledged. Exit 0 when every record was acknowledged, 2 otherwise."""

ACKS = {"0": "0", "1": "1", "all": "all", "-1": "all"}
COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
# the producer queue's bound (librdkafka's default is 1 GiB): stdin is read no faster than the
# broker takes it, so a large input streams in bounded memory (-X queue.buffering.max.kbytes)
QUEUE_KBYTES = 65536


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "produce",
        help="write records from stdin lines (or --value) to a topic, as kcat -P",
        description="Write records to TOPIC: one per line of stdin, or one per --value.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", metavar="TOPIC")
    what = p.add_argument_group("records")
    what.add_argument(
        "--value",
        action="append",
        metavar="V",
        help="a record's value from the command line instead of stdin (repeatable)",
    )
    what.add_argument("-k", "--key", metavar="KEY", help="the key of every record (or of a line without SEP)")
    what.add_argument(
        "-K",
        "--key-sep",
        metavar="SEP",
        help="split each line at the first SEP into key and value (kcat -K; \\t, \\xHH understood)",
    )
    what.add_argument(
        "-H",
        "--header",
        dest="headers",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header on every record (repeatable; NAME alone: a null value)",
    )
    what.add_argument(
        "-Z", "--null-empty", action="store_true", help="send an empty key or value as null (kcat -Z)"
    )
    what.add_argument(
        "--format",
        choices=["text", "json", "avro"],
        default="text",
        help="text: lines as they are (default); json: each value must be JSON; avro: JSON "
        "converted with the subject's latest schema from --registry",
    )
    what.add_argument("--subject", metavar="SUBJECT", help="the subject of --format avro (TOPIC-value)")
    add_registry(what)
    how = p.add_argument_group("delivery")
    how.add_argument(
        "-p", "--partition", type=int, metavar="N", help="write to partition N (default: by key hash)"
    )
    how.add_argument(
        "--acks",
        choices=list(ACKS),
        default="all",
        help="acknowledgement each record waits for: 0 none, 1 the leader, all (-1) every in-sync "
        "replica (default all)",
    )
    how.add_argument("-z", "--compression", choices=COMPRESSION, default="none", help="batch compression")
    how.add_argument(
        "--idempotence", action="store_true", help="idempotent producer: a retry is never written twice"
    )
    how.add_argument(
        "--transactional-id",
        metavar="ID",
        help="all records in one transaction, committed at EOF, aborted on Ctrl-C or an error",
    )
    how.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help='print "TOPIC [PARTITION] @ OFFSET" per record acknowledged',
    )
    add_connection(p)
    p.set_defaults(func=run)


class _BadRecord(StoreError):
    """A line that cannot be sent (not JSON, not fitting the schema, refused by the client)."""


@dataclass
class _Tally:
    """Delivery reports, counted (they arrive on the poller thread)."""

    verbose: bool
    sent: int = 0
    delivered: int = 0
    failed: int = 0
    first_failure: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def report(self, where: str, err: Any, msg: Any) -> None:
        with self.lock:
            if err is not None:
                self.failed += 1
                if not self.first_failure:
                    self.first_failure = f"{where} not delivered: {err.name()}: {err.str()}"
                return
            self.delivered += 1
            if self.verbose:
                try:
                    sys.stdout.write(f"{msg.topic()} [{msg.partition()}] @ {msg.offset()}\n")
                    sys.stdout.flush()
                except BrokenPipeError:  # the reader of -v went away; the records still count
                    self.verbose = False
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _headers(items: list[str]) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        name, sep, value = item.partition("=")
        if not name:
            raise StoreError(f"-H {item!r}: expected NAME=VALUE or NAME")
        out.append((name, value.encode() if sep else None))
    return out


def _inputs(args: argparse.Namespace) -> Iterator[tuple[str, bytes]]:
    """(where, line) from --value or stdin, the newline removed; stdin is read as it arrives."""
    if args.value is not None:
        for i, v in enumerate(args.value, 1):
            yield f"--value #{i}", v.encode("utf-8", "surrogateescape")
        return
    for n, line in enumerate(sys.stdin.buffer, 1):
        if line.endswith(b"\n"):
            line = line[:-1]
        if not line:
            continue  # as kcat: an empty line is no record
        yield f"line {n}", line


class _Splitter:
    """A line → (key, value), as kcat -K / -k / -Z do."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.sep = unescape(args.key_sep, "--key-sep") if args.key_sep is not None else None
        if self.sep == b"":
            raise StoreError("--key-sep must not be empty")
        self.key = args.key.encode("utf-8", "surrogateescape") if args.key is not None else None
        self.null = args.null_empty

    def __call__(self, line: bytes) -> tuple[bytes | None, bytes | None]:
        key: bytes | None = None
        value: bytes | None = line
        if self.sep is not None:
            k, found, v = line.partition(self.sep)
            if found:
                key, value = k, v
        if key is None:
            key = self.key
        if self.null:
            key = key or None
            value = value or None
        return key, value


class _Encoder:
    """The value as it goes on the wire for ``--format``; a value that does not fit is an error
    naming its line."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.format = args.format
        self.topic = args.topic
        self._serialize: Any = None
        if self.format == "avro":
            self._serialize = _avro_serializer(
                args.registry, args.subject or f"{args.topic}-value", args.topic
            )

    def __call__(self, value: bytes | None, where: str) -> bytes | None:
        if value is None or self.format == "text":
            return value
        try:
            data = json.loads(value)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _BadRecord(f"{where}: not JSON ({exc})") from None
        if self.format == "json":
            return value
        return self._serialize(data, where)  # type: ignore[no-any-return]


def _avro_serializer(url: str, subject: str, topic: str) -> Any:
    """A function JSON data → Confluent wire-format Avro with ``subject``'s latest schema."""
    try:
        from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415
        from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: PLC0415
        from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: PLC0415
        from confluent_kafka.serialization import (  # noqa: PLC0415
            MessageField,
            SerializationContext,
            SerializationError,
        )
    except ImportError as exc:
        raise StoreError(
            f"--format avro needs Confluent's schema registry client (missing {exc.name}): "
            "pip install 'sftraffic[app]'"
        ) from None
    client = SchemaRegistryClient({"url": url})
    try:
        latest = client.get_latest_version(subject)
    except SchemaRegistryError as exc:
        if exc.error_code in (40401, 40403):
            raise StoreError(
                f"--format avro: subject {subject!r} has no schema in the registry at {_safe(url)}; "
                "register one first (or give --subject)"
            ) from None
        raise StoreError(f"--format avro: the registry at {_safe(url)}: {exc.error_message}") from None
    except Exception as exc:  # a refused connection, a bad URL: whatever the HTTP client raises
        raise StoreError(f"--format avro: no schema registry at {_safe(url)} ({exc})") from None
    ser = AvroSerializer(
        client,
        None,
        conf={
            "auto.register.schemas": False,
            "use.latest.version": True,
            "subject.name.strategy": lambda _ctx, _name: subject,
        },
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    label = f"subject {subject!r} version {latest.version} (schema id {latest.schema_id})"

    def serialize(data: object, where: str) -> bytes:
        try:
            return ser(data, ctx)  # type: ignore[no-any-return]
        except (SerializationError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise _BadRecord(f"{where}: does not fit {label}: {exc}") from None

    return serialize


def _safe(url: str) -> str:
    """A registry URL without the credentials it may carry."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else url


def _check(args: argparse.Namespace) -> None:
    transactional = args.transactional_id is not None
    if (args.idempotence or transactional) and ACKS[args.acks] != "all":
        flag = "--transactional-id" if transactional else "--idempotence"
        raise StoreError(f"{flag} needs --acks all (the broker must have every record before it counts)")
    if args.transactional_id == "":
        raise StoreError("--transactional-id must not be empty")
    if args.subject is not None and args.format != "avro":
        raise StoreError("--subject is for --format avro")
    if args.partition is not None and args.partition < 0:
        raise StoreError(f"--partition {args.partition}: must be 0 or more")


def _config(args: argparse.Namespace, conn_conf: dict[str, Any]) -> dict[str, Any]:
    conf: dict[str, Any] = {
        # Kafka's default partitioner (murmur2), as the Java console producer: a key lands where
        # a Java client would put it
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "queue.buffering.max.kbytes": QUEUE_KBYTES,
        "client.id": "sftraffic-produce",
    }
    conf.update(conn_conf)  # -X and --command-config win over the defaults above...
    conf.update(  # ...and the flags over them
        {
            "acks": ACKS[args.acks],
            "compression.type": args.compression,
            "enable.idempotence": args.idempotence or args.transactional_id is not None,
            "logger": quiet_logger(),
        }
    )
    if args.transactional_id is not None:
        conf["transactional.id"] = args.transactional_id
    return conf


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer  # noqa: PLC0415

    _check(args)
    headers = _headers(args.headers)
    split = _Splitter(args)
    conn = connection(args)
    encode = _Encoder(args)
    conn.check()
    try:
        producer = Producer(_config(args, conn.client_config()))
    except KafkaException as exc:
        raise kafka_error(exc) from None
    tally = _Tally(args.verbose)
    stop = threading.Event()
    poller = threading.Thread(target=_serve, args=(producer, stop), name="delivery-reports", daemon=True)
    poller.start()
    try:
        return _produce(args, producer, tally, split, encode, headers)
    finally:
        stop.set()
        poller.join(2)


def _produce(
    args: argparse.Namespace,
    producer: Any,
    tally: _Tally,
    split: _Splitter,
    encode: _Encoder,
    headers: list[tuple[str, bytes | None]],
) -> int:
    from confluent_kafka import KafkaException  # noqa: PLC0415

    transaction = args.transactional_id is not None
    try:
        if transaction:
            producer.init_transactions(30)
            producer.begin_transaction()
        try:
            _send_all(args, producer, tally, split, encode, headers)
            _flush(producer)
        except KeyboardInterrupt:
            if transaction:
                print(f"sftraffic produce: interrupted{_abort(producer)}", file=sys.stderr)
                return 130
            _flush(producer)  # Ctrl-C ends the input, as EOF (kcat)
            if not tally.failed:
                n = tally.delivered
                done = f"{_records(n)} read, all delivered" if n else "nothing was sent"
                print(f"sftraffic produce: interrupted; {done}", file=sys.stderr)
                return 0
        except StoreError as exc:
            if transaction:
                raise StoreError(f"{exc}{_abort(producer)}") from None
            _flush(producer)
            if isinstance(exc, _BadRecord) and not tally.failed:
                n = tally.delivered
                done = f"{_records(n)} before it delivered" if n else "nothing was sent"
                raise StoreError(f"{exc}; stopped there ({done})") from None
            raise
        if tally.failed:
            raise StoreError(_failure_line(tally) + (_abort(producer) if transaction else ""))
        if transaction:
            producer.commit_transaction(30)
    except KafkaException as exc:
        raise StoreError(f"{kafka_error(exc)}{_abort(producer) if transaction else ''}") from None
    return 0


def _send_all(
    args: argparse.Namespace,
    producer: Any,
    tally: _Tally,
    split: _Splitter,
    encode: _Encoder,
    headers: list[tuple[str, bytes | None]],
) -> None:
    from confluent_kafka import KafkaException  # noqa: PLC0415

    kw: dict[str, Any] = {"headers": headers} if headers else {}
    if args.partition is not None:
        kw["partition"] = args.partition
    topic = args.topic
    for where, line in _inputs(args):
        if tally.failed:
            break  # the first failure stops the reading
        key, value = split(line)
        value = encode(value, where)
        report = _reporter(tally, where)
        for attempt in itertools.count():
            try:
                producer.produce(topic, value=value, key=key, on_delivery=report, **kw)
                break
            except BufferError:  # the queue is full: wait for the broker to take some
                producer.poll(0.05 if attempt < 20 else 0.5)
            except KafkaException as exc:
                err = kafka_error(exc)
                raise _BadRecord(f"{where} not sent: {err.message}") from None
        with tally.lock:
            tally.sent += 1
    if tally.failed:
        raise StoreError(_failure_line(tally))


def _reporter(tally: _Tally, where: str) -> Any:
    return lambda err, msg: tally.report(where, err, msg)


def _serve(producer: Any, stop: threading.Event) -> None:
    """Serve delivery reports while the main thread waits on stdin (a terminal's records are
    confirmed, and -v printed, as they are acknowledged, not when the next line comes)."""
    while not stop.is_set():
        producer.poll(0.1)


def _flush(producer: Any) -> None:
    """Wait for every record sent to be acknowledged or to fail (Ctrl-C interrupts)."""
    while producer.flush(0.5) > 0:
        pass


def _abort(producer: Any) -> str:
    """Abort the transaction; the words that say so, to end the error line."""
    try:
        producer.abort_transaction(30)
    except Exception as exc:  # the coordinator aborts it when transaction.timeout.ms passes
        return f"; the transaction could not be aborted ({exc}): it will be at its time-out"
    return "; the transaction was aborted, none of it is visible"


def _records(n: int) -> str:
    return f"{n} record" if n == 1 else f"{n} records"


def _failure_line(tally: _Tally) -> str:
    extra = f" ({tally.failed} of {_records(tally.sent)} failed)" if tally.failed > 1 else ""
    return tally.first_failure + extra
