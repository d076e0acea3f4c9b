"""PySpark data source ``sftraffic``: read and write the store from Spark, no JVM jar needed.

Spark's own Kafka connector lives in a jar outside the Python packages, so the pipeline uses
this Python Data Source (``pyspark.sql.datasource``) instead. It talks to any Kafka-protocol
store through confluent-kafka, so the same jobs run against Apache Kafka or Redpanda.

Reading (batch and streaming), with options named like Spark's Kafka source::

    spark.readStream.format("sftraffic")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")   # or "bootstrap"
        .option("subscribe", "traffic_monitoring.traffic")       # comma-separated topics
        .option("startingOffsets", "earliest")                   # latest | earliest | JSON
        .option("maxOffsetsPerTrigger", 200000)                  # streaming admission control
        .load()

Columns: ``key`` binary, ``value`` binary, ``topic`` string, ``partition`` int, ``offset``
long, ``timestamp`` timestamp (UTC), ``timestampType`` int, and ``headers``
array<struct<key string, value binary>> with ``includeHeaders=true``.

``valueFormat=json`` with ``valueSchema`` (a ``StructType`` as JSON, ``schema.json()``) puts a
column ``json`` in place of ``value``: the value decoded by the executors' Python workers
(msgspec, ~1.5 µs a record) into that struct plus ``_corrupt_record`` string, which holds the
value as text when it is not a JSON object, a field has the wrong type (that field is then
null, as ``from_json`` in PERMISSIVE mode does) or a field named in ``valueRequired``
(comma-separated) is missing. The raw bytes do not travel to the JVM for the records that
decoded. This is our extension (Spark's Kafka source has no such option): ``from_json`` in the
JVM costs ~5-10x more per record and was most of the pipeline's CPU. Field types: string,
long, int, double, float, boolean and arrays of them.

``valueFormat=avro`` (with ``valueSchema`` and ``schemaRegistryUrl``) fills the same ``json``
column from Avro values in Confluent's wire format (magic byte 0, a 4-byte schema id, the Avro
body): each value is decoded with fastavro using its writer's schema, fetched from the registry
by id once per worker, and the optional reader schema ``valueAvroSchema`` (Avro JSON; its
defaults fill fields older writers lacked), so a topic mixing schema versions reads as one.
A registry wanting HTTP Basic credentials gets ``schemaRegistryUser`` and
``schemaRegistryPassword`` (Spark redacts options named like passwords in plans and its UI;
credentials in the URL work too, but show there); an https registry's certificate is checked
against the system's CAs or ``$REQUESTS_CA_BUNDLE``. Values that are JSON objects (a topic
written as JSON before the switch) are decoded as JSON; anything else lands in
``_corrupt_record``.

* Offsets are the store's per-partition log offsets, ``{"topic": {"0": 42, ...}}``; Spark
  checkpoints them, so a restarted query resumes exactly where it stopped.
* One Spark input partition per store partition and offset range (split into pieces of at most
  ``maxRecordsPerPartition``). Executors read with their own consumer (assign, no group) and
  yield Arrow record batches (~1M rows/s instead of ~300k for Python tuples).
* Batch reads take ``startingOffsets``/``endingOffsets`` or ``startingTimestamp``/
  ``endingTimestamp`` (ms; looked up with ListOffsets, i.e. seek by time).
* Offsets below the log start (deleted by retention) fail the query with a clear message unless
  ``failOnDataLoss=false``, which skips ahead, as Spark's Kafka source does.

Writing (batch and streaming sink): rows with ``value`` (and optional ``key``, ``topic``,
``partition``, ``headers``, ``timestamp``); option ``topic`` when rows carry none. Writes are
acknowledged by the store (acks=all, idempotent producer) before a Spark task commits.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, cast

import msgspec
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, Message

NAME = "sftraffic"
BATCH_ROWS = 20_000
CONSUME_MAX = 10_000  # records per consume() call
MIN_BATCH = 32  # valueFormat=avro: fewer values of a schema id are decoded record by record

HEADER_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADER_TYPE))
    return StructType(fields)


CORRUPT = "_corrupt_record"

_SCALARS: dict[str, tuple[Any, Any]] = {
    # Spark type name -> (Python type msgspec checks against, Arrow type)
    "string": (str, pa.string()),
    "long": (Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)], pa.int64()),
    "integer": (Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)], pa.int32()),
    "double": (float, pa.float64()),
    "float": (float, pa.float32()),
    "boolean": (bool, pa.bool_()),
}


def _field_type(dt: Any, name: str) -> tuple[Any, Any]:
    if isinstance(dt, ArrayType):
        inner, arrow = _field_type(dt.elementType, name)
        return list[inner], pa.list_(arrow)  # type: ignore[valid-type]
    kind = dt.typeName()
    if kind not in _SCALARS:
        raise SourceError(
            f"valueSchema field {name!r}: type {dt.simpleString()} is not supported with "
            "valueFormat=json (use string, long, int, double, float, boolean or arrays of them)"
        )
    return _SCALARS[kind]


class JsonValues:
    """Decodes JSON values into Arrow columns for a ``StructType`` (see the module docstring)."""

    def __init__(self, schema_json: str, required: tuple[str, ...] = ()) -> None:
        try:
            st = StructType.fromJson(json.loads(schema_json))
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceError(f"valueSchema must be a StructType as JSON (schema.json()): {exc}") from None
        self.spark_type = StructType([*st.fields, StructField(CORRUPT, StringType())])
        self.names = [f.name for f in st.fields]
        unknown = set(required) - set(self.names)
        if unknown:
            raise SourceError(f"valueRequired names fields not in valueSchema: {', '.join(sorted(unknown))}")
        self.required = [self.names.index(n) for n in required]
        types = [_field_type(f.dataType, f.name) for f in st.fields]
        self.checks = [t for t, _ in types]
        arrow_fields = [pa.field(n, a) for n, (_, a) in zip(self.names, types, strict=True)]
        self.arrow_type = pa.struct([*arrow_fields, pa.field(CORRUPT, pa.string())])
        # attributes f0, f1, ... renamed to the JSON names: any name works (``class``, ``a-b``)
        self.attrs = [f"f{i}" for i in range(len(self.names))]
        fields = [(a, t | None, None) for a, t in zip(self.attrs, self.checks, strict=True)]
        rename = dict(zip(self.attrs, self.names, strict=True))
        self.struct = msgspec.defstruct("Value", fields, rename=rename, forbid_unknown_fields=False)
        self.decoder = msgspec.json.Decoder(self.struct)
        self.batch_decoder = msgspec.json.Decoder(list[self.struct])  # type: ignore[name-defined]
        self.any = msgspec.json.Decoder()
        self.errors = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)

    def _slow(self, value: bytes) -> tuple[list[Any], str]:
        """A value the typed decoder refused: keep the fields that have the right type."""
        raw = value.decode("utf-8", "replace")
        try:
            obj = self.any.decode(value)
        except self.errors:
            return [None] * len(self.names), raw
        if not isinstance(obj, dict):
            return [None] * len(self.names), raw
        row: list[Any] = []
        for n, t in zip(self.names, self.checks, strict=True):
            v = obj.get(n)
            try:
                row.append(None if v is None else msgspec.convert(v, type=t))
            except self.errors:
                row.append(None)
        return row, raw

    def column(self, values: list[bytes | None]) -> pa.Array[Any]:
        try:
            # the common case, every value a good object: one decoder call for the whole batch
            objs = self.batch_decoder.decode(b"[" + b",".join(values) + b"]")  # type: ignore[arg-type]
        except (TypeError, *self.errors):
            return self._column_per_record(values)
        if len(objs) != len(values):  # a value held several comma-separated documents
            return self._column_per_record(values)
        cols = [[getattr(o, a) for o in objs] for a in self.attrs]
        if any(None in cols[i] for i in self.required):
            return self._column_per_record(values)
        arrays = [pa.array(c, type=f.type) for c, f in zip(cols, self.arrow_type, strict=False)]
        arrays.append(pa.nulls(len(values), type=pa.string()))
        return pa.StructArray.from_arrays(arrays, fields=list(self.arrow_type))

    def _column_per_record(self, values: list[bytes | None]) -> pa.Array[Any]:
        dec = self.decoder.decode
        attrs = self.attrs
        cols: list[list[Any]] = [[] for _ in attrs]
        corrupt: list[str | None] = []
        for v in values:
            try:
                if v is None:
                    raise ValueError
                obj = dec(v)
            except (ValueError, *self.errors):
                row, raw = self._slow(v or b"")
                for c, x in zip(cols, row, strict=True):
                    c.append(x)
                corrupt.append(raw)
                continue
            row = [getattr(obj, a) for a in attrs]
            if any(row[i] is None for i in self.required):
                corrupt.append(v.decode("utf-8", "replace"))
            else:
                corrupt.append(None)
            for c, x in zip(cols, row, strict=True):
                c.append(x)
        arrays = [pa.array(c, type=f.type) for c, f in zip(cols, self.arrow_type, strict=False)]
        arrays.append(pa.array(corrupt, type=pa.string()))
        return pa.StructArray.from_arrays(arrays, fields=list(self.arrow_type))


# (registry URL, credentials, schema id) -> the writer schema (Avro JSON), per Python worker
_WRITERS: dict[tuple[str, tuple[str, str] | None, int], Any] = {}


def remember_writer_schema(
    registry: str, schema_id: int, schema: Any, auth: tuple[str, str] | None = None
) -> None:
    """Put a writer schema in this process's cache, as if fetched (benchmarks, tests)."""
    _WRITERS[(registry, auth, schema_id)] = schema


def _writer_schema(registry: str, schema_id: int, auth: tuple[str, str] | None = None) -> Any:
    key = (registry, auth, schema_id)
    found = _WRITERS.get(key)
    if found is None:
        import requests

        from sensors.avro import split_url

        url, in_url = split_url(registry)
        try:
            resp = requests.get(
                f"{url.rstrip('/')}/schemas/ids/{schema_id}",
                headers={"Accept": "application/vnd.schemaregistry.v1+json"},
                auth=auth or in_url,
                timeout=30,
            )
        except requests.RequestException as exc:  # the query fails (and is retried), not the records
            raise SourceError(
                f"schema registry {url}: {type(exc).__name__} reading schema {schema_id}"
            ) from None
        if resp.status_code in (401, 403):
            raise SourceError(
                f"schema registry {url}: {resp.status_code} {resp.reason} reading schema {schema_id} "
                "(options schemaRegistryUser/schemaRegistryPassword)"
            )
        if resp.status_code >= 500:
            raise SourceError(f"schema registry {url}: {resp.status_code} reading schema {schema_id}")
        resp.raise_for_status()  # an id the registry does not know: the records are corrupt
        found = _WRITERS[key] = json.loads(resp.json()["schema"])
    return found


class AvroValues:
    """Decodes Confluent-framed Avro values into the same Arrow column as :class:`JsonValues`.

    A writer schema of a flat record is read by a decoder compiled for it and for the fields of
    ``valueSchema`` (:mod:`pipelines.avro_decode`: the other fields are skipped, the reader
    schema's defaults fill the ones the writer lacks); with aliases in the reader schema
    (renames) or any other writer schema, fastavro resolves writer and reader schemas."""

    def __init__(
        self,
        schema_json: str,
        registry: str,
        reader: str | None = None,
        required: tuple[str, ...] = (),
        auth: tuple[str, str] | None = None,
    ) -> None:
        import fastavro

        self.json = JsonValues(schema_json, required)
        self.arrow_type = self.json.arrow_type
        self.registry = registry
        self.auth = auth
        try:
            reader_schema = json.loads(reader) if reader else None
            self.reader = fastavro.parse_schema(reader_schema) if reader_schema is not None else None
        except (ValueError, KeyError, TypeError, fastavro.schema.SchemaParseException) as exc:
            raise SourceError(f"valueAvroSchema is not an Avro schema: {exc}") from None
        fields = reader_schema.get("fields", []) if isinstance(reader_schema, dict) else []
        self._defaults = {f["name"]: f["default"] for f in fields if "default" in f}
        # the compiled path applies defaults only: not for renames, or a reader that is no record
        self._simple = reader_schema is None or (
            isinstance(reader_schema, dict)
            and reader_schema.get("type") == "record"
            and not any("aliases" in f for f in fields)
        )
        self._rows: dict[int, Any] = {}  # schema id -> value -> the row (a tuple)
        self._columns: dict[int, Any] = {}  # schema id -> a batch's columns (None: not covered)

    def _row_reader(self, schema_id: int) -> Any:
        import io

        import fastavro

        from pipelines.avro_decode import compile_decoder

        writer = _writer_schema(self.registry, schema_id, self.auth)
        names = self.json.names
        compiled = compile_decoder(writer, names, self._defaults) if self._simple else None
        if compiled is not None:
            return lambda v: compiled(v, 5)
        parsed, reader, read = fastavro.parse_schema(writer), self.reader, fastavro.schemaless_reader

        def slow(v: bytes) -> tuple[Any, ...]:
            d = read(io.BytesIO(v[5:]), parsed, reader)
            return tuple(d.get(n) for n in names)  # type: ignore[union-attr]

        return slow

    def _column_reader(self, schema_id: int) -> Any:
        from pipelines.avro_decode import compile_columns

        if not self._simple:
            return None
        types = [f.type for f in self.arrow_type][: len(self.json.names)]
        writer = _writer_schema(self.registry, schema_id, self.auth)
        return compile_columns(writer, self.json.names, types, self._defaults)

    @staticmethod
    def _heads(values: list[bytes | None]) -> set[bytes]:
        """The values' first five bytes (magic byte and schema id); empty when one is null."""
        try:
            return {v[:5] for v in values}  # type: ignore[index]
        except TypeError:  # a null value
            return set()

    def _batch(self, values: list[bytes | None], heads: set[bytes] | None = None) -> pa.Array[Any] | None:
        """The column decoded all at once (:func:`pipelines.avro_decode.compile_columns`) when
        every value is Avro of one schema id, undamaged, with every required field; else None.
        ``heads``: :meth:`_heads` of the values, when the caller has it."""
        heads = self._heads(values) if heads is None else heads
        return self._one_id(values, next(iter(heads))) if len(heads) == 1 else None

    def _one_id(self, values: list[bytes | None], head: bytes) -> pa.Array[Any] | None:
        if len(head) != 5 or head[0] != 0:
            return None
        sid = int.from_bytes(head[1:5], "big")
        if sid not in self._columns:
            try:
                self._columns[sid] = self._column_reader(sid)
            except SourceError:  # the registry refused or is down: not the records' fault
                raise
            except Exception:  # an unknown id: the records are corrupt, record by record
                self._columns[sid] = None
        read = self._columns[sid]
        cols = None if read is None else read(values, 5)
        if cols is None or any(cols[i].null_count for i in self.json.required):
            return None
        cols.append(pa.nulls(len(values), type=pa.string()))
        return pa.StructArray.from_arrays(cols, fields=list(self.arrow_type))

    def _mixed(self, values: list[bytes | None]) -> pa.Array[Any] | None:
        """Each schema id's values decoded at once (as :meth:`_batch`), the others record by
        record, the rows put back in order; None when no id's values could be."""
        groups: dict[bytes | None, list[int]] = {}
        for i, v in enumerate(values):
            key = v[:5] if v is not None and len(v) > 5 and v[0] == 0 else None
            groups.setdefault(key, []).append(i)
        rest = groups.pop(None, [])
        parts, order = [], []
        for head, idx in groups.items():
            arr = self._one_id([values[i] for i in idx], head) if len(idx) >= MIN_BATCH else None  # type: ignore[arg-type]
            if arr is None:
                rest += idx
            else:
                parts.append(arr)
                order.append(idx)
        if not parts:
            return None
        if rest:
            rest.sort()
            parts.append(self._per_record([values[i] for i in rest]))
            order.append(rest)
        import numpy as np

        where = np.concatenate([np.asarray(o, dtype=np.int64) for o in order])
        back = np.empty_like(where)
        back[where] = np.arange(len(where))
        return pa.concat_arrays(parts).take(pa.array(back))

    def column(self, values: list[bytes | None]) -> pa.Array[Any]:
        if len(values) >= MIN_BATCH:
            heads = self._heads(values)
            # one schema id (or none): nothing to gain from grouping
            fast = self._batch(values, heads) if len(heads) == 1 else self._mixed(values)
            if fast is not None:
                return fast
        return self._per_record(values)

    def _per_record(self, values: list[bytes | None]) -> pa.Array[Any]:
        names, checks, required = self.json.names, self.json.checks, self.json.required
        nulls = (None,) * len(names)
        rows: list[Any] = []
        corrupt: list[str | None] = []
        readers = self._rows
        for v in values:
            row: Any = None
            try:
                if v is not None and len(v) > 5 and v[0] == 0:
                    sid = int.from_bytes(v[1:5], "big")
                    read = readers.get(sid)
                    if read is None:
                        read = readers[sid] = self._row_reader(sid)
                    row = read(v)
                elif v is not None and v[:1] == b"{":
                    obj = self.json.any.decode(v)
                    row = tuple(obj.get(n) for n in names) if isinstance(obj, dict) else None
            except SourceError:  # the registry refused or is down: not the record's fault
                raise
            except Exception:  # a damaged body, an unknown id: the record is corrupt, not the batch
                row = None
            if row is None:
                raw = None if v is None else v.hex() if v[:1] == b"\x00" else v.decode("utf-8", "replace")
                rows.append(nulls)
                corrupt.append(raw)
                continue
            rows.append(row)
            if any(row[i] is None for i in required):
                corrupt.append(json.dumps(dict(zip(names, row, strict=True)), default=str))
            else:
                corrupt.append(None)
        cols = list(zip(*rows, strict=True)) if rows else [() for _ in names]
        arrays = []
        for c, f, t in zip(cols, self.arrow_type, checks, strict=False):
            try:
                arrays.append(pa.array(c, type=f.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                arrays.append(pa.array([_convert(x, t) for x in c], type=f.type))
        arrays.append(pa.array(corrupt, type=pa.string()))
        return pa.StructArray.from_arrays(arrays, fields=list(self.arrow_type))


def _convert(x: Any, t: Any) -> Any:
    if x is None:
        return None
    try:
        return msgspec.convert(x, type=t, strict=False)
    except (msgspec.ValidationError, TypeError, ValueError):
        return None


def value_decoder(opts: Options) -> JsonValues | AvroValues | None:
    """The decoder of ``opts``' valueFormat (None: raw ``value``)."""
    if opts.value_schema is None:
        return None
    if opts.value_format == "avro":
        assert opts.registry_url is not None
        return AvroValues(
            opts.value_schema, opts.registry_url, opts.avro_reader, opts.value_required, opts.registry_auth
        )
    return JsonValues(opts.value_schema, opts.value_required)


def _arrow_schema(include_headers: bool) -> pa.Schema:
    fields: list[pa.Field[Any]] = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(
            pa.field("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
        )
    return pa.schema(fields)


def _quiet() -> logging.Logger:
    lg = logging.getLogger("sftraffic.spark.librdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


class SourceError(Exception):
    """A configuration or store problem, with what to do about it."""


@dataclass(frozen=True)
class Options:
    bootstrap: str
    topics: tuple[str, ...]
    starting: str
    ending: str
    starting_ts: int | None
    ending_ts: int | None
    max_per_trigger: int | None
    max_per_partition: int
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_s: float
    value_schema: str | None = None
    value_required: tuple[str, ...] = ()
    value_format: str = "json"  # json | avro (when value_schema is set)
    registry_url: str | None = None  # valueFormat=avro: where writers' schemas are
    registry_auth: tuple[str, str] | None = None  # its Basic credentials (schemaRegistryUser/Password)
    avro_reader: str | None = None  # valueFormat=avro: the reader schema (Avro JSON), optional
    # the client's security settings in librdkafka's names: options kafka.security.protocol,
    # kafka.sasl.*, kafka.ssl.* (as Spark's Kafka source passes kafka.* to its client), over
    # the driver's $SFTRAFFIC_KAFKA_CONFIG (framework.client.security)
    security: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, opts: dict[str, str]) -> Options:
        o = {k.lower(): v for k, v in opts.items()}
        bootstrap = o.get("kafka.bootstrap.servers") or o.get("bootstrap")
        if not bootstrap:
            raise SourceError(
                "option kafka.bootstrap.servers (or bootstrap) is required, e.g. 127.0.0.1:9092"
            )
        topics = tuple(t.strip() for t in (o.get("subscribe") or "").split(",") if t.strip())
        if not topics:
            raise SourceError("option subscribe is required: a comma-separated list of topics")

        def num(name: str) -> int | None:
            v = o.get(name.lower())
            if v is None:
                return None
            try:
                return int(v)
            except ValueError:
                raise SourceError(f"option {name} must be an integer, got {v!r}") from None

        return cls(
            bootstrap=bootstrap,
            topics=topics,
            starting=o.get("startingoffsets", "latest"),
            ending=o.get("endingoffsets", "latest"),
            starting_ts=num("startingTimestamp"),
            ending_ts=num("endingTimestamp"),
            max_per_trigger=num("maxOffsetsPerTrigger"),
            max_per_partition=num("maxRecordsPerPartition") or 2_000_000,
            include_headers=o.get("includeheaders", "false").lower() == "true",
            fail_on_data_loss=o.get("failondataloss", "true").lower() != "false",
            poll_timeout_s=float(o.get("polltimeoutms", "30000")) / 1000,
            value_schema=cls._value_schema(o),
            value_format=o.get("valueformat", "binary").lower(),
            registry_url=o.get("schemaregistryurl"),
            registry_auth=cls._registry_auth(o),
            avro_reader=o.get("valueavroschema"),
            value_required=tuple(n.strip() for n in o.get("valuerequired", "").split(",") if n.strip()),
            security=tuple(security_options(o).items()),
        )

    @staticmethod
    def _registry_auth(o: dict[str, str]) -> tuple[str, str] | None:
        user, password = o.get("schemaregistryuser"), o.get("schemaregistrypassword")
        if (user is None) != (password is None):
            raise SourceError("options schemaRegistryUser and schemaRegistryPassword go together")
        return (user, password) if user is not None and password is not None else None

    @staticmethod
    def _value_schema(o: dict[str, str]) -> str | None:
        fmt = o.get("valueformat", "binary").lower()
        if fmt == "binary":
            return None
        if fmt not in ("json", "avro"):
            raise SourceError(f"option valueFormat must be binary, json or avro, got {fmt!r}")
        vs = o.get("valueschema")
        if not vs:
            raise SourceError(f"valueFormat={fmt} needs option valueSchema, a StructType as JSON")
        required = tuple(n.strip() for n in o.get("valuerequired", "").split(",") if n.strip())
        JsonValues(vs, required)  # fail now, with the message, rather than in an executor
        if fmt == "avro":
            if not o.get("schemaregistryurl"):
                raise SourceError(
                    "valueFormat=avro needs option schemaRegistryUrl, e.g. http://127.0.0.1:8081"
                )
            AvroValues(vs, o["schemaregistryurl"], o.get("valueavroschema"), required)
        return vs


def security_options(o: dict[str, str]) -> dict[str, str]:
    """The security settings of lower-cased options ``o`` (``kafka.sasl.username`` ...), over
    this process's own (:func:`framework.client.security.client_security`)."""
    from framework.client.connection import is_security_key
    from framework.client.security import client_security

    conf = client_security()
    conf.update({k[6:]: v for k, v in o.items() if k.startswith("kafka.") and is_security_key(k[6:])})
    return conf


class _Offsets:
    """Driver-side offset look-ups (created lazily: never pickled to executors)."""

    def __init__(self, opts: Options) -> None:
        from confluent_kafka import Consumer

        self.opts = opts
        self.c = Consumer(
            {
                **dict(opts.security),
                "bootstrap.servers": opts.bootstrap,
                "group.id": "sftraffic-spark-offsets",
                "enable.auto.commit": False,
                "logger": _quiet(),
                "socket.timeout.ms": 10_000,
            }
        )

    def partitions(self) -> dict[str, list[int]]:
        try:
            md = self.c.list_topics(timeout=10)
        except Exception as exc:
            raise SourceError(f"the store at {self.opts.bootstrap} is not reachable: {exc}") from None
        out: dict[str, list[int]] = {}
        for t in self.opts.topics:
            tm = md.topics.get(t)
            if tm is None or tm.error is not None:
                raise SourceError(f"topic {t!r} does not exist in the store at {self.opts.bootstrap}")
            out[t] = sorted(tm.partitions)
        return out

    def watermarks(self) -> dict[str, dict[str, tuple[int, int]]]:
        from confluent_kafka import TopicPartition

        out: dict[str, dict[str, tuple[int, int]]] = {}
        for t, parts in self.partitions().items():
            out[t] = {}
            for p in parts:
                lo, hi = self.c.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)
                out[t][str(p)] = (int(lo), int(hi))
        return out

    def for_time(self, ts_ms: int) -> dict[str, dict[str, int]]:
        from confluent_kafka import TopicPartition

        wm = self.watermarks()
        out: dict[str, dict[str, int]] = {}
        for t, parts in wm.items():
            tps = [TopicPartition(t, int(p), ts_ms) for p in parts]
            found = self.c.offsets_for_times(tps, timeout=10)
            out[t] = {
                str(tp.partition): (tp.offset if tp.offset >= 0 else parts[str(tp.partition)][1])
                for tp in found
            }
        return out

    def resolve(self, spec: str, ts: int | None, default_latest: bool) -> dict[str, dict[str, int]]:
        if ts is not None:
            return self.for_time(ts)
        wm = self.watermarks()
        s = spec.strip()
        if s == "earliest":
            return {t: {p: lo for p, (lo, _) in ps.items()} for t, ps in wm.items()}
        if s == "latest":
            return {t: {p: hi for p, (_, hi) in ps.items()} for t, ps in wm.items()}
        try:
            given = json.loads(s)
        except ValueError:
            raise SourceError(
                f'offsets {spec!r}: use earliest, latest or JSON like {{"t":{{"0":12}}}}'
            ) from None
        out: dict[str, dict[str, int]] = {}
        for t, ps in wm.items():
            out[t] = {}
            for p, (lo, hi) in ps.items():
                v = int(given.get(t, {}).get(p, -1 if default_latest else -2))
                out[t][p] = hi if v == -1 else (lo if v == -2 else v)
        return out

    def close(self) -> None:
        self.c.close()


@dataclass(frozen=True)
class Range(InputPartition):
    topic: str
    partition: int
    start: int
    end: int


def _split(start: dict[str, dict[str, int]], end: dict[str, dict[str, int]], max_rows: int) -> list[Range]:
    out: list[Range] = []
    for t, ps in end.items():
        for p, hi in ps.items():
            lo = start.get(t, {}).get(p, 0)
            while lo < hi:
                nxt = min(hi, lo + max_rows)
                out.append(Range(t, int(p), lo, nxt))
                lo = nxt
    return out


def _range_consumer(opts: Options) -> Consumer:
    """The executor's consumer of offset ranges: manual assignment, no commits, big fetches."""
    from confluent_kafka import Consumer

    return Consumer(
        {
            **dict(opts.security),
            "bootstrap.servers": opts.bootstrap,
            "group.id": "sftraffic-spark",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "logger": _quiet(),
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.min.messages": 200_000,
            # librdkafka pauses a partition's fetches for this long once its queue holds
            # queued.min.messages; the default (1 s) idles a reader that drains the queue in
            # a fraction of that (the consume stalls seen with the client's defaults)
            "fetch.queue.backoff.ms": 10,
        }
    )


def _range_schema(opts: Options) -> tuple[pa.Schema, JsonValues | AvroValues | None]:
    """The Arrow schema of a range's record batches, and the value decoder (None: raw ``value``)."""
    schema_ = _arrow_schema(opts.include_headers)
    json_values = value_decoder(opts)
    if json_values is not None:
        schema_ = schema_.remove(schema_.get_field_index("value"))
        schema_ = schema_.append(pa.field("json", json_values.arrow_type))
    return schema_, json_values


def _start_offset(c: Consumer, opts: Options, r: Range) -> int:
    """Where reading ``r`` starts: its start, or the log start when retention deleted records
    before it (an error unless failOnDataLoss=false)."""
    from confluent_kafka import TopicPartition

    lo, _hi = c.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=10, cached=False)
    start = r.start
    if start < lo:
        if opts.fail_on_data_loss:
            raise SourceError(
                f"{r.topic}-{r.partition}: offsets {start}..{lo - 1} were deleted (retention) "
                "before they were read; "
                "set failOnDataLoss=false to skip them"
            )
        start = lo
    return start


def _records(msgs: list[Message], r: Range) -> list[Message]:
    """The records among one consume()'s messages; an error other than a partition's end raises."""
    from confluent_kafka import KafkaError

    recs = [m for m in msgs if m.error() is None]
    if len(recs) != len(msgs):
        for m in msgs:
            err = m.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                raise SourceError(f"{r.topic}-{r.partition}: {err.str()}")
    return recs


def _consume_range(c: Consumer, opts: Options, r: Range, start: int) -> Iterator[list[Message]]:
    """The records of ``r`` from ``start``, a consume() call's worth at a time (none past its
    end: the last list may be empty); SourceError when nothing comes for pollTimeoutMs."""
    from confluent_kafka import TopicPartition

    c.assign([TopicPartition(r.topic, r.partition, start)])
    nxt = start
    deadline = time.monotonic() + opts.poll_timeout_s
    while nxt < r.end:
        # Never ask for more records than the range still holds: consume() waits its whole
        # timeout for a batch it cannot fill, which idled the last call of every range.
        msgs = c.consume(min(CONSUME_MAX, r.end - nxt), timeout=1.0)
        if not msgs:
            if time.monotonic() > deadline:
                raise SourceError(
                    f"{r.topic}-{r.partition}: no data at offset {nxt} within {opts.poll_timeout_s:.0f}s"
                )
            continue
        recs = _records(msgs, r)
        if not recs:
            continue
        deadline = time.monotonic() + opts.poll_timeout_s
        # a consumed record (no error) always has an offset; records come in offset order
        past_end = cast(int, recs[-1].offset()) >= r.end
        if past_end:
            recs = [m for m in recs if cast(int, m.offset()) < r.end]
        if recs:
            nxt = cast(int, recs[-1].offset()) + 1
        if past_end:
            nxt = r.end
        yield recs


class _RangeColumns:
    """The columns of the records read from one range since the last record batch was cut."""

    def __init__(self, r: Range, include_headers: bool) -> None:
        self.r = r
        self.include_headers = include_headers
        self._clear()

    def _clear(self) -> None:
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.offsets: list[int] = []
        self.stamps: list[int] = []
        self.types: list[int] = []
        self.headers: list[Any] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, recs: list[Message]) -> None:
        # whole-batch comprehensions: a fraction of the per-record appends' cost
        self.keys += [m.key() for m in recs]
        self.values += [m.value() for m in recs]
        self.offsets += cast("list[int]", [m.offset() for m in recs])
        tts = [m.timestamp() for m in recs]
        self.stamps += [ts * 1000 for _, ts in tts]
        self.types += [tt - 1 if tt > 0 else -1 for tt, _ in tts]
        if self.include_headers:
            # a consumed record's headers are a list of pairs (the dict form is produce's)
            self.headers += [
                [{"key": k, "value": v} for k, v in cast("list[tuple[str, Any]]", m.headers() or [])]
                for m in recs
            ]

    def cut(self, schema_: pa.Schema, json_values: JsonValues | AvroValues | None) -> pa.RecordBatch:
        """The columns so far as one record batch of ``schema_``; they start empty again."""
        n = len(self.offsets)
        cols: dict[str, list[Any]] = {
            "key": self.keys,
            "value": self.values,
            "topic": [self.r.topic] * n,
            "partition": [self.r.partition] * n,
            "offset": self.offsets,
            "timestamp": self.stamps,
            "timestampType": self.types,
        }
        if self.include_headers:
            cols["headers"] = self.headers
        if json_values is None:
            batch = pa.RecordBatch.from_pydict(cols, schema=schema_)
        else:
            arrays = [pa.array(cols[f.name], type=f.type) for f in schema_ if f.name != "json"]
            arrays.append(json_values.column(self.values))
            batch = pa.RecordBatch.from_arrays(arrays, schema=schema_)
        self._clear()
        return batch


def read_range(opts: Options, r: Range) -> Iterator[pa.RecordBatch]:
    """Executor side: the records of one offset range as Arrow record batches."""
    c = _range_consumer(opts)
    schema_, json_values = _range_schema(opts)
    try:
        start = _start_offset(c, opts, r)
        if start >= r.end:
            return
        columns = _RangeColumns(r, opts.include_headers)
        for recs in _consume_range(c, opts, r, start):
            columns.add(recs)
            if len(columns) >= BATCH_ROWS:
                yield columns.cut(schema_, json_values)
        if len(columns):
            yield columns.cut(schema_, json_values)
    finally:
        c.close()


class _Reader(DataSourceReader):
    def __init__(self, opts: Options) -> None:
        self.opts = opts

    def partitions(self) -> list[Range]:
        off = _Offsets(self.opts)
        try:
            start = off.resolve(
                self.opts.starting if self.opts.starting != "latest" else "earliest",
                self.opts.starting_ts,
                False,
            )
            end = off.resolve(self.opts.ending, self.opts.ending_ts, True)
        finally:
            off.close()
        return _split(start, end, self.opts.max_per_partition) or [Range(self.opts.topics[0], 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Range)
        yield from read_range(self.opts, partition)


class _StreamReader(DataSourceStreamReader):
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self._off: _Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"opts": self.opts, "_off": None}

    def _offsets(self) -> _Offsets:
        if self._off is None:
            self._off = _Offsets(self.opts)
        return self._off

    def initialOffset(self) -> dict[str, dict[str, int]]:
        return self._offsets().resolve(self.opts.starting, self.opts.starting_ts, True)

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, dict[str, int]]:
        wm = self._offsets().watermarks()
        latest = {t: {p: hi for p, (_, hi) in ps.items()} for t, ps in wm.items()}
        cap = self.opts.max_per_trigger
        if cap is None or start is None:
            return latest
        # admission control: share maxOffsetsPerTrigger among partitions by their backlog
        backlog = {
            (t, p): max(0, hi - int(start.get(t, {}).get(p, 0)))
            for t, ps in latest.items()
            for p, hi in ps.items()
        }
        total = sum(backlog.values())
        if total <= cap:
            return latest
        out: dict[str, dict[str, int]] = {}
        for (t, p), n in backlog.items():
            base = int(start.get(t, {}).get(p, 0))
            out.setdefault(t, {})[p] = base + int(n * cap / total)
        return out

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[Range]:
        s = {t: {p: int(v) for p, v in ps.items()} for t, ps in start.items()}
        e = {t: {p: int(v) for p, v in ps.items()} for t, ps in end.items()}
        return _split(s, e, self.opts.max_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Range)
        yield from read_range(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        pass  # offsets live in Spark's checkpoint; the store keeps data per its TTL

    def stop(self) -> None:
        if self._off is not None:
            self._off.close()
            self._off = None


@dataclass
class _Written(WriterCommitMessage):
    count: int


def _write_rows(opts: dict[str, str], rows: Iterator[Any]) -> _Written:
    from confluent_kafka import Producer

    from framework.client.producer import producer_config

    o = {k.lower(): v for k, v in opts.items()}
    bootstrap = o.get("kafka.bootstrap.servers") or o.get("bootstrap")
    if not bootstrap:
        raise SourceError("option kafka.bootstrap.servers (or bootstrap) is required")
    default_topic = o.get("topic")
    errors: list[str] = []

    def fatal(err: Any) -> None:  # e.g. no permission to write: reported below, in one line
        if err.fatal():
            errors.append(err.str())

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err:
            errors.append(str(err))

    p = Producer(
        producer_config(
            bootstrap,
            client_id="sftraffic-spark-sink",
            extra={**security_options(o), "logger": _quiet(), "linger.ms": 20, "error_cb": fatal},
        )
    )
    n = 0
    for row in rows:
        d = row.asDict() if hasattr(row, "asDict") else dict(row)
        topic = d.get("topic") or default_topic
        if not topic:
            raise SourceError("rows need a topic column or the option topic")
        value = d.get("value")
        key = d.get("key")
        if isinstance(value, str):
            value = value.encode()
        if isinstance(key, str):
            key = key.encode()
        kwargs: dict[str, Any] = {}
        if d.get("partition") is not None:
            kwargs["partition"] = int(d["partition"])
        if d.get("headers"):
            kwargs["headers"] = [(h["key"], h["value"]) for h in d["headers"]]
        ts = d.get("timestamp")
        if ts is not None:
            kwargs["timestamp"] = int(ts.timestamp() * 1000)
        while True:
            try:
                p.produce(topic, value, key, on_delivery=delivered, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        n += 1
    try:
        left = p.flush(60)
    except Exception as exc:  # a fatal producer error (no permission to write) comes out of flush
        raise SourceError(f"writing to the store failed: {exc.__cause__ or exc}") from None
    if errors or left:
        raise SourceError(f"writing to the store failed: {errors[:3]} ({left} unacknowledged)")
    return _Written(n)


class _Writer(DataSourceWriter):
    def __init__(self, opts: dict[str, str]) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> _Written:
        return _write_rows(self.opts, iterator)


class _StreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: dict[str, str]) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> _Written:
        return _write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


class SfTrafficDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        opts = Options.parse(dict(self.options))
        st = schema(opts.include_headers)
        if opts.value_schema is not None:
            st = StructType([f for f in st.fields if f.name != "value"])
            st = st.add("json", JsonValues(opts.value_schema, opts.value_required).spark_type)
        return st

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(Options.parse(dict(self.options)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _StreamReader(Options.parse(dict(self.options)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _Writer(dict(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return _StreamWriter(dict(self.options))


def register(spark: Any) -> None:
    spark.dataSource.register(SfTrafficDataSource)
