"""The Spark jobs (``sftraffic pipeline <job>``): sources → transforms → sinks, nothing more.

* ``aggregates``  traffic per segment and minute → ``traffic_aggregates`` topic + Parquet
* ``correlation`` traffic aggregates ⋈ weather (stream-stream join of two windowed
                  aggregations) → ``traffic_weather`` topic + Parquet, and (a driver thread, at
                  most every 30 s) the weather-effect estimates over all history so far →
                  ``weather_effects`` topic
* ``anomalies``   traffic aggregates vs the segment's baseline for the hour of week →
                  ``congestion_alerts`` topic + Parquet
* ``all``         the three in one Spark application (what ``sftraffic up`` runs); the alerts
                  are computed from the aggregates query's windows, so two queries read traffic

Each window result is written once: windows are emitted in append mode when the watermark
passes them, and each micro-batch's result records and its batch id are committed in one Kafka
transaction (:class:`pipelines.sink.TransactionalSink`), so a micro-batch that Spark replays
after a stop or crash (same batch id, same offsets) is either skipped (it was committed) or
written again in place of an attempt that was aborted (never visible at read_committed).

Every streaming query has its own checkpoint directory and a processing-time trigger. Records
that do not parse go to the stream's ``dead_letter`` topic with the reason; the job goes on.

Sources (``--source``): ``sftraffic`` (default), our Python data source
(:mod:`pipelines.source`), which also decodes the JSON values in the Python workers; ``kafka``,
Spark's own Kafka connector (the JVM ``spark-sql-kafka-0-10`` jars of :mod:`deploy.spark`, on
``spark.jars``), whose values are parsed by ``from_json`` in the JVM. Both read the same
options (offsets, timestamps, ``maxOffsetsPerTrigger``) and give the same results. Dead letters
are written through the chosen source's writer; the (small) window results and weather
effects are produced from the driver either way (:class:`ResultProducer`).
``--batch`` runs the same transforms once over what the topics hold (history, benchmarks).

A backfill (``--backfill FROM,UNTIL``, what ``sftraffic up`` runs after replaying a simulated
past): the batch jobs over the events whose *event time* is in ``[FROM, UNTIL)``, their
results written to the same topics and Parquet folders as the streaming jobs' (once: in one
transaction with a ledger record, as a micro-batch's, then a marker in the checkpoint
folder), then the streaming queries over event time ``UNTIL`` on (``--since``: they start at
the first offset stamped ``UNTIL`` or later and drop older events). With ``UNTIL`` on a
window boundary, every window is computed by exactly one side: the backfill's windows are
never re-emitted by the live queries and none is missing.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.cli.common import add_registry, require_modules
from framework.errors import StoreError
from sensors.layout import topic

require_modules("pyspark", "pyarrow", "msgspec")  # `sftraffic pipeline` needs the app extras

if TYPE_CHECKING:
    from framework.client.connection import Connection

log = logging.getLogger("sftraffic.pipeline")

# the event fields the jobs read (besides the required ones): parsing only these is cheaper
TRAFFIC_FIELDS: tuple[str, ...] = ()
WEATHER_FIELDS = ("precipitation_mm_h", "visibility_m")


def t(name: str) -> str:
    """A topic of the application's stream (``sensors.layout.topic``)."""
    return str(topic(name))


@dataclass
class JobConfig:
    bootstrap: str = "127.0.0.1:9092"
    checkpoint_dir: str = ".sftraffic/checkpoints"
    output_dir: str = ".sftraffic/parquet"
    trigger: str = "1 second"
    starting_offsets: str = "earliest"
    window: str = "1 minute"
    watermark: str = "2 minutes"
    max_offsets_per_trigger: int | None = 1_000_000
    master: str | None = None
    congestion_ratio: float = 0.5
    # only events with event time in [event_from_ms, event_until_ms) (None: unbounded); a
    # start also places the read: the first offset stamped event_from_ms or later
    event_from_ms: int | None = None
    event_until_ms: int | None = None
    # "sftraffic": our Python data source; "kafka": Spark's JVM Kafka connector (deploy/spark)
    source: str = "sftraffic"
    # the events' format: "json", or "avro" (Confluent's wire format; writers' schemas from
    # registry_url, the reader schema sensors.avro's; our data source only)
    value_format: str = "json"
    registry_url: str = "http://127.0.0.1:8081"


SOURCES = ("sftraffic", "kafka")
# records per Spark input partition (both sources split a partition's range into such pieces)
MAX_RECORDS_PER_PARTITION = 2_000_000
# the connector's consumers fetch as much per request as the Python source's (librdkafka there);
# the Java client's default of 1 MB per partition makes several round trips per 10 MB
KAFKA_CONNECTOR_CONSUMER = {
    "kafka.max.partition.fetch.bytes": "10485760",
    "kafka.fetch.max.bytes": "52428800",
    # the connector seeks, polls and asks for the partition's offset range (two ListOffsets) for
    # every poll: 500 records a poll (the default) made reads 2x slower; ours takes 10,000
    "kafka.max.poll.records": "10000",
}


def security_options(source: str) -> dict[str, str]:
    """This process's client security (``$SFTRAFFIC_CLIENT_CONFIG`` and ``-X``, librdkafka's names) as
    options of ``source``: ``kafka.<key>`` for our data source; for Spark's Kafka connector (the
    Java client) ``kafka.security.protocol``, ``kafka.sasl.mechanism``, a SCRAM/PLAIN
    ``kafka.sasl.jaas.config`` and the CA as a PEM trust store."""
    from framework.client.security import client_security

    sec = client_security()
    if source != "kafka":
        return {f"kafka.{k}": v for k, v in sec.items()}
    out: dict[str, str] = {}
    if "security.protocol" in sec:
        out["kafka.security.protocol"] = sec["security.protocol"].upper()
    mech = sec.get("sasl.mechanism", "SCRAM-SHA-256").upper()
    if "sasl.username" in sec:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if mech == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        user = sec["sasl.username"].replace("\\", "\\\\").replace('"', '\\"')
        password = sec.get("sasl.password", "").replace("\\", "\\\\").replace('"', '\\"')
        out["kafka.sasl.mechanism"] = mech
        out["kafka.sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    if "ssl.ca.location" in sec:
        out["kafka.ssl.truststore.type"] = "PEM"
        out["kafka.ssl.truststore.location"] = sec["ssl.ca.location"]
    return out


def _offsets_for(starting: str, topic: str) -> str:
    """Specific starting offsets (JSON ``{"topic": {"partition": offset}}``) narrowed to the
    topic one reader subscribes to: Spark's connector refuses offsets of partitions it was not
    given ("you must specify all TopicPartitions"), and a job's readers share one setting."""
    if not starting.lstrip().startswith("{"):
        return starting
    offsets = json.loads(starting)
    return json.dumps({topic: offsets[topic]}) if topic in offsets else "earliest"


def _read(
    spark: Any,
    cfg: JobConfig,
    topic: str,
    batch: bool = False,
    value_schema: Any = None,
    required: tuple[str, ...] = (),
) -> Any:
    """The topic through ``cfg.source``: the ``sftraffic`` data source, where ``value_schema`` (a
    StructType) has the executors decode the JSON values into a ``json`` column, or Spark's
    ``kafka`` connector (raw ``value``, which :func:`~pipelines.transforms.tag_json` parses)."""
    if cfg.source not in SOURCES:
        raise ValueError(f"source {cfg.source!r}: one of {', '.join(SOURCES)}")
    r = spark.read if batch else spark.readStream
    r = r.format(cfg.source).option("kafka.bootstrap.servers", cfg.bootstrap).option("subscribe", topic)
    starting = cfg.starting_offsets
    if batch and starting == "latest":  # a batch starts at the beginning (what ours does)
        starting = "earliest"
    starting = _offsets_for(starting, topic)
    r = r.option("startingOffsets", starting).option("maxRecordsPerPartition", MAX_RECORDS_PER_PARTITION)
    for k, v in security_options(cfg.source).items():
        r = r.option(k, v)
    if cfg.event_from_ms is not None:  # record timestamps are event times (CreateTime)
        r = r.option("startingTimestamp", cfg.event_from_ms)
    if not batch and cfg.max_offsets_per_trigger:
        r = r.option("maxOffsetsPerTrigger", cfg.max_offsets_per_trigger)
    if cfg.source == "kafka":
        # a partition with no record at or after startingTimestamp starts at its end, as ours
        # does (the connector's default fails the query)
        r = r.option("startingOffsetsByTimestampStrategy", "latest")
        for k, v in KAFKA_CONNECTOR_CONSUMER.items():
            r = r.option(k, v)
    elif value_schema is not None:
        r = r.option("valueFormat", cfg.value_format).option("valueSchema", value_schema.json())
        r = r.option("valueRequired", ",".join(required))
        if cfg.value_format == "avro":
            from sensors.avro import schema_for, split_url

            url, auth = split_url(cfg.registry_url)  # the password in an option Spark redacts
            r = r.option("schemaRegistryUrl", url)
            if auth is not None:
                r = r.option("schemaRegistryUser", auth[0]).option("schemaRegistryPassword", auth[1])
            r = r.option("valueAvroSchema", json.dumps(schema_for(topic)))
    return r.load()


def _events(spark: Any, cfg: JobConfig, kind: str, batch: bool = False) -> Any:
    """``traffic`` or ``weather_conditions`` events, tagged (see ``transforms.tag_json``)."""
    from pipelines import spark_schemas, transforms

    schema, required, fields = {
        "traffic": (spark_schemas.TRAFFIC, spark_schemas.TRAFFIC_REQUIRED, TRAFFIC_FIELDS),
        "weather_conditions": (spark_schemas.WEATHER, spark_schemas.WEATHER_REQUIRED, WEATHER_FIELDS),
    }[kind]
    vs = transforms.pruned(schema, required, fields)
    tagged = transforms.tag_json(_read(spark, cfg, t(kind), batch, vs, required), schema, required, fields)
    return transforms.in_event_range(tagged, cfg.event_from_ms, cfg.event_until_ms)


class ResultProducer:
    """One idempotent producer in the driver for the jobs' results.

    Results are small (a row per segment and window, a few per weather regime), so the sinks
    collect them and produce from here: a distributed write through the data source would
    start Python workers and a producer per task every micro-batch (1-4 s each time for a few
    hundred rows). Dead letters, which can be many, still go through the data source writer.
    """

    _by_bootstrap: dict[str, ResultProducer] = {}

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        from framework.client.producer import producer_config
        from framework.client.security import client_security
        from sensors.publish import _quiet

        self.errors: list[str] = []
        extra = {**client_security(), "logger": _quiet()}
        conf = producer_config(bootstrap, client_id="sftraffic-pipeline", extra=extra)
        self.p = Producer(conf)

    @classmethod
    def get(cls, bootstrap: str) -> ResultProducer:
        if bootstrap not in cls._by_bootstrap:
            cls._by_bootstrap[bootstrap] = cls(bootstrap)
        return cls._by_bootstrap[bootstrap]

    def _done(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def send(self, topic: str, records: list[tuple[str | None, str]]) -> None:
        """Produce ``(key, json)`` records and wait for the store's acks (raises if any failed)."""
        for key, value in records:
            while True:
                try:
                    k = None if key is None else key.encode()
                    self.p.produce(topic, value.encode(), k, on_delivery=self._done)
                    break
                except BufferError:
                    self.p.poll(0.05)
        left = self.p.flush(60)
        if self.errors or left:
            errs, self.errors = self.errors[:3], []
            raise RuntimeError(f"writing results to {topic} failed: {errs} ({left} unacknowledged)")


def _to_topic(
    df: Any, cfg: JobConfig, topic: str, key_col: str, order_by: str | None = None, out: Any = None
) -> None:
    """Produce the rows as JSON keyed by ``key_col``; ``order_by``: oldest first (sorted here:
    a Spark ``orderBy`` adds a sampling job and a shuffle for what the driver holds anyway).
    ``out``: a streaming query's open transaction (:class:`pipelines.sink.TransactionalSink`);
    None: the idempotent :class:`ResultProducer` (batch jobs, backfill)."""
    from pyspark.sql import functions as F

    cols = [
        F.col(key_col).cast("string").alias("key"),
        F.to_json(F.struct(*[F.col(c) for c in df.columns])).alias("value"),
    ]
    if order_by is not None:
        cols.append(F.col(order_by).alias("_order"))
    rows = df.select(*cols).collect()
    if order_by is not None:
        rows.sort(key=lambda r: r._order)
    (out or ResultProducer.get(cfg.bootstrap)).send(topic, [(r.key, r.value) for r in rows])


def _dead_letters(bad: Any, cfg: JobConfig) -> None:
    """The records that did not parse → ``<stream>.dead_letter`` (key ``topic:partition:offset``,
    the raw value, a ``reason`` header).

    Guarantee: **at-least-once**, not transactional. They are written by the executors through
    the source's writer (ours: an idempotent producer per task, each record acknowledged before
    the task commits; the connector's: the Java producer) in their own query
    (``aggregates-dlq``), without a ledger: a micro-batch replayed after a crash writes its dead
    letters again. The key names the source record, so a reader drops repeats by key.
    """
    from pyspark.sql import functions as F

    if bad.isEmpty():
        return
    out = bad.select(
        F.concat_ws(":", "topic", "partition", "offset").alias("key"),
        F.col("raw").alias("value"),
        F.array(F.struct(F.lit("reason").alias("key"), F.col("reason").cast("binary").alias("value"))).alias(
            "headers"
        ),
    )
    # through the source's own writer: ours (an idempotent confluent-kafka producer per task) or
    # the connector's (the Java producer); both take kafka.bootstrap.servers and topic
    w = out.write.format(cfg.source).option("kafka.bootstrap.servers", cfg.bootstrap)
    for k, v in security_options(cfg.source).items():
        w = w.option(k, v)
    w.option("topic", t("dead_letter")).mode("append").save()


def _parquet(df: Any, cfg: JobConfig, name: str, out: Any = None) -> None:
    """Append to the ``name`` history; ``out``: a streaming query's open transaction, which
    stages the files and moves them in once the batch is committed (written once)."""
    # one file per micro-batch (results are small; four shuffle partitions made four files)
    staged = None if out is None else out.stage(name)
    if staged is None:
        df.coalesce(1).write.mode("append").parquet(str(Path(cfg.output_dir) / name))
    else:
        df.coalesce(1).write.mode("overwrite").parquet(staged)


def _sink(cfg: JobConfig, query: str) -> Any:
    """The query's transactional sink (made on its first micro-batch, in the driver)."""
    from pipelines import sink

    return sink.for_query(cfg.bootstrap, query, str(Path(cfg.checkpoint_dir) / query), cfg.output_dir)


# -- aggregates -------------------------------------------------------------------------------
def start_aggregates(spark: Any, cfg: JobConfig, with_alerts: bool = False) -> Any:
    """Traffic aggregates; ``with_alerts``: also the congestion alerts, from the same windows
    (what ``all`` runs: one query parses the traffic stream instead of two)."""
    from pipelines import transforms

    good, bad = transforms.split_json(_events(spark, cfg, "traffic"))
    aggs = transforms.traffic_aggregates(good, cfg.window, cfg.watermark)

    def sink(df: Any, batch_id: int) -> None:
        out = _sink(cfg, "aggregates")
        if out.done(batch_id):
            return
        df = df.persist()

        def fill(tx: Any) -> None:
            _parquet(df, cfg, "aggregates", out=tx)
            _to_topic(df, cfg, t("traffic_aggregates"), "segment_id", out=tx)
            if with_alerts:
                _alerts(spark, cfg, df, out=tx)

        try:
            if not df.isEmpty():  # an empty batch writes nothing, its replay neither
                out.write(batch_id, fill)
        finally:
            df.unpersist()

    q1 = _start(
        aggs.writeStream.outputMode("append")
        .foreachBatch(sink)
        .trigger(processingTime=cfg.trigger)
        .option("checkpointLocation", str(Path(cfg.checkpoint_dir) / "aggregates"))
        .queryName("aggregates")
    )
    q2 = _start(
        bad.writeStream.foreachBatch(lambda df, _bid: _dead_letters(df, cfg))
        .trigger(processingTime="5 seconds")
        .option("checkpointLocation", str(Path(cfg.checkpoint_dir) / "aggregates-dlq"))
        .queryName("aggregates-dlq")
    )
    return [q1, q2]


# -- correlation ------------------------------------------------------------------------------
def publish_effects(spark: Any, cfg: JobConfig) -> Any:
    """Recompute the weather-effect estimates over all joined history; publish them."""
    import pandas as pd

    from pipelines import transforms

    path = Path(cfg.output_dir) / "traffic_weather"
    if not path.exists():
        return None
    cols = ["segment_id", "window_start", "volume", "mean_speed_kmh", "condition", "precipitation_mm_h"]
    if "://" in cfg.output_dir:  # a cluster file system (s3a://, hdfs://): read it with Spark
        pdf = spark.read.parquet(str(path)).select(*cols).toPandas()
    else:  # local: pyarrow in the driver, ~50 ms instead of a Spark job's ~5 s on 2 cores
        import pyarrow.dataset as ds

        pdf = ds.dataset(str(path), format="parquet").to_table(columns=cols).to_pandas()
    effects = transforms.estimate_weather_effects(pdf)
    if effects.empty:
        return effects
    effects["computed_ms"] = int(time.time() * 1000)
    # pandas accepts None as the replacement; pandas-stubs type ``other`` as a Scalar without None
    effects = effects.where(pd.notna(effects), None)  # type: ignore[call-overload]
    records = effects.to_dict("records")
    ResultProducer.get(cfg.bootstrap).send(
        t("weather_effects"), [(f"{r['segment_id']}|{r['condition']}", json.dumps(r)) for r in records]
    )
    return effects


class EffectsPublisher:
    """Recomputes and publishes the weather-effect estimates in a driver thread, at most every
    ``every`` seconds and only after new joined windows were written, so the streaming query's
    micro-batches never wait for it (it reads all the Parquet history)."""

    def __init__(self, spark: Any, cfg: JobConfig, every: float = 30.0) -> None:
        import threading

        self.spark, self.cfg, self.every = spark, cfg, every
        self.fresh = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="weather-effects", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            if not self.fresh.wait(0.5):
                continue
            self.fresh.clear()
            try:
                publish_effects(self.spark, self.cfg)
            except Exception as exc:  # the next window retries; the stream goes on
                if self.stopped.is_set():
                    return
                log.warning("weather effects not published: %s", str(exc).splitlines()[0])
            self.stopped.wait(self.every)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)


_PUBLISHERS: dict[str, EffectsPublisher] = {}


def start_correlation(spark: Any, cfg: JobConfig) -> Any:
    from pipelines import transforms

    traffic, _bad_t = transforms.split_json(_events(spark, cfg, "traffic"))
    weather, _bad_w = transforms.split_json(_events(spark, cfg, "weather_conditions"))
    joined = transforms.traffic_with_weather(
        traffic, weather, transforms.segment_stations(spark), cfg.window, cfg.watermark
    )
    effects = EffectsPublisher(spark, cfg)

    def sink(df: Any, batch_id: int) -> None:
        out = _sink(cfg, "correlation")
        if out.done(batch_id):
            return
        df = df.persist()

        def fill(tx: Any) -> None:
            _parquet(df, cfg, "traffic_weather", out=tx)
            _to_topic(df, cfg, t("traffic_weather"), "segment_id", out=tx)

        try:
            if df.isEmpty():
                return
            out.write(batch_id, fill)
        finally:
            df.unpersist()
        effects.fresh.set()

    q = _start(
        joined.writeStream.outputMode("append")
        .foreachBatch(sink)
        .trigger(processingTime=cfg.trigger)
        .option("checkpointLocation", str(Path(cfg.checkpoint_dir) / "correlation"))
        .queryName("correlation")
    )
    _PUBLISHERS[q.id] = effects
    return [q]


# -- anomalies --------------------------------------------------------------------------------
def baselines(spark: Any, cfg: JobConfig, pending: Any = None) -> Any:
    """Per segment and hour of week, from the joined history (free flow where it has none);
    ``pending``: joined windows not in the history yet (a backfill's, staged until its commit)."""
    from pipelines import transforms

    path = Path(cfg.output_dir) / "traffic_weather"
    ff = transforms.free_flow_baselines(spark)
    frames = [spark.read.parquet(str(path))] if path.exists() and any(path.glob("*.parquet")) else []
    if pending is not None:
        frames.append(pending)
    if frames:
        joined = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1], allowMissingColumns=True)
        hist = transforms.baselines_from_history(joined)
        return hist.unionByName(
            ff.join(hist.select("segment_id", "hour_of_week"), ["segment_id", "hour_of_week"], "left_anti")
        )
    return ff


def _alerts(spark: Any, cfg: JobConfig, aggs: Any, out: Any = None) -> None:
    from pipelines import transforms

    alerts = transforms.congestion_alerts(aggs, baselines(spark, cfg), cfg.congestion_ratio).persist()
    if not alerts.isEmpty():
        _parquet(alerts, cfg, "alerts", out=out)
        _to_topic(alerts, cfg, t("congestion_alerts"), "segment_id", out=out)
    alerts.unpersist()


def start_anomalies(spark: Any, cfg: JobConfig) -> Any:
    from pipelines import transforms

    traffic, _bad = transforms.split_json(_events(spark, cfg, "traffic"))
    aggs = transforms.traffic_aggregates(traffic, cfg.window, cfg.watermark)

    def sink(df: Any, batch_id: int) -> None:
        out = _sink(cfg, "anomalies")
        if out.done(batch_id) or df.isEmpty():
            return
        out.write(batch_id, lambda tx: _alerts(spark, cfg, df, out=tx))

    return [
        _start(
            aggs.writeStream.outputMode("append")
            .foreachBatch(sink)
            .trigger(processingTime=cfg.trigger)
            .option("checkpointLocation", str(Path(cfg.checkpoint_dir) / "anomalies"))
            .queryName("anomalies")
        )
    ]


# -- supervision ------------------------------------------------------------------------------
#: Spark's failure when the Python process that runs a Python data source's driver side does
#: not connect back within its fixed 10 s (PythonWorkerFactory.createSimpleWorker): a slow
#: start on a loaded machine, raised while the query starts, before it reads or writes anything.
TRANSIENT_START_FAILURES = ("Python worker failed to connect back",)
#: restarts allowed per query (counted from its first start by a ``start_*`` function)
MAX_RESTARTS = 3

# query id (kept in the checkpoint, so a restarted query has the same) -> (the DataStreamWriter
# that started it, restarts so far)
_WRITERS: dict[str, tuple[Any, int]] = {}


class QueryStopped(RuntimeError):
    """A streaming query stopped with an error that restarting does not mend."""


def _start(writer: Any, restarts: int = 0) -> Any:
    """Start the query ``writer`` describes; remember the writer, so ``supervise`` can start it
    again (from the same checkpoint)."""
    q = writer.start()
    _WRITERS[q.id] = (writer, restarts)
    return q


def supervise(queries: list[Any]) -> None:
    """Check the queries: restart, in place in ``queries``, one that a transient start failure
    (``TRANSIENT_START_FAILURES``) stopped, at most ``MAX_RESTARTS`` times; raise
    ``QueryStopped`` for any other stop. Restarting is safe: the query resumes from its
    checkpoint and its sink writes each batch once (``pipelines.sink``)."""
    for i, q in enumerate(queries):
        if q.isActive:
            continue
        exc = q.exception()
        why = str(exc).splitlines()[0] if exc is not None else "stopped"
        writer, n = _WRITERS.get(q.id, (None, MAX_RESTARTS))
        if not any(f in str(exc) for f in TRANSIENT_START_FAILURES) or n >= MAX_RESTARTS:
            raise QueryStopped(f"query {q.name} stopped: {why}")
        log.warning(
            "query %s stopped while starting (%s); restart %d of %d", q.name, why, n + 1, MAX_RESTARTS
        )
        queries[i] = _start(writer, n + 1)  # same id: its _PUBLISHERS entry carries on


def stop_gracefully(queries: list[Any], timeout: float = 60.0) -> None:
    """Stop queries between micro-batches, never in the middle of one.

    ``StreamingQuery.stop()`` interrupts a running batch; if that happens after the sink wrote
    and before Spark committed, the batch is replayed on restart. Waiting until no trigger is
    active, then stopping, keeps every result written exactly once.
    """
    deadline = time.monotonic() + timeout
    for q in queries:
        while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.05)
        q.stop()
        _WRITERS.pop(q.id, None)
        pub = _PUBLISHERS.pop(q.id, None)
        if pub is not None:
            pub.stop()


JOBS = {"aggregates": start_aggregates, "correlation": start_correlation, "anomalies": start_anomalies}
RESULT_TOPICS = (
    "traffic_aggregates",
    "traffic_weather",
    "weather_effects",
    "congestion_alerts",
    "dead_letter",
    "pipeline_batches",  # the streaming sinks' committed batch ids (pipelines.sink)
)


def result_topics() -> dict[str, dict[str, str]]:
    """The result topics to create, with their configs (the ledger is compacted)."""
    return {
        t(n): ({"cleanup.policy": "compact"} if n == "pipeline_batches" else {})
        for n in RESULT_TOPICS
        if n != "dead_letter"
    }


# -- batch ------------------------------------------------------------------------------------
def run_batch(
    spark: Any, cfg: JobConfig, job: str, publish: bool = False, out_tx: Any = None
) -> dict[str, Any]:
    """The same transforms once over what the topics hold now; returns a summary.

    The traffic topic is read and parsed once: its per-segment windows (persisted) feed every
    job, the correlation joining them with the weather windows
    (:func:`~pipelines.transforms.aggregates_with_weather`) rather than aggregating every
    vehicle again. Dead letters need a second look at the records: the parsed events are then
    persisted (only the fields the jobs use, the raw bytes only for dead letters).
    ``publish``: the windows and alerts also go to their result topics, oldest first, as the
    streaming jobs' do (a backfill). With an event-time range (``cfg.event_from_ms``) dead
    letters are left to the streaming jobs, which read every record from their start offset.
    ``out_tx``: an open transaction (:class:`pipelines.sink.TransactionalSink`, the backfill's)
    that takes the published windows and alerts and stages the Parquet files; the weather
    effects, computed from the Parquet history, are then left to the caller (after the commit).
    """
    from pyspark import StorageLevel

    from pipelines import transforms

    dead_letters = cfg.event_from_ms is None and cfg.event_until_ms is None
    run = _BatchRun(spark, cfg, publish, out_tx)
    tagged = _events(spark, cfg, "traffic", batch=True)
    if dead_letters:
        tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
    traffic, bad = transforms.split_json(tagged)
    joined: Any = None  # the joined windows, kept (staged, not in the history) with out_tx
    aggs = transforms.traffic_aggregates(traffic, cfg.window, None).persist()
    if job in ("aggregates", "all"):
        run.aggregates(aggs)
    if job in ("correlation", "all"):
        joined = run.correlation(aggs)
    if job in ("anomalies", "all"):
        run.anomalies(aggs, joined)
    if joined is not None:
        joined.unpersist()
    if dead_letters:
        run.out["dead_letters"] = bad.count()
        _dead_letters(bad, cfg)
        tagged.unpersist()
        run.lap("dead_letters")
    aggs.unpersist()
    run.out["seconds_by_step"] = run.took
    return run.out


class _BatchRun:
    """The steps of :func:`run_batch` over the persisted windows ``aggs``: each writes its
    Parquet history (staged in ``out_tx`` when given), counts its rows into ``out``, publishes
    when asked, and records its seconds (``took``, from the end of the step before)."""

    def __init__(self, spark: Any, cfg: JobConfig, publish: bool, out_tx: Any) -> None:
        self.spark, self.cfg, self.publish, self.out_tx = spark, cfg, publish, out_tx
        self.out: dict[str, Any] = {}
        self.took: dict[str, float] = {}
        self._clock = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.took[name] = round(now - self._clock, 1)
        self._clock = now

    def _to_topic(self, df: Any, name: str) -> None:
        _to_topic(df, self.cfg, t(name), "segment_id", "window_start", out=self.out_tx)

    def aggregates(self, aggs: Any) -> None:
        _parquet(aggs, self.cfg, "aggregates", out=self.out_tx)
        self.out["aggregates"] = aggs.count()
        self.lap("aggregates")
        if self.publish:
            self._to_topic(aggs, "traffic_aggregates")
            self.lap("aggregates_published")

    def correlation(self, aggs: Any) -> Any:
        """The windows joined with the weather; returned (still persisted) when ``out_tx``
        stages them, else None, the weather effects computed from the history."""
        from pipelines import transforms

        spark, cfg = self.spark, self.cfg
        weather, _ = transforms.split_json(_events(spark, cfg, "weather_conditions", batch=True))
        joined = transforms.aggregates_with_weather(
            aggs, weather, transforms.segment_stations(spark), cfg.window
        ).persist()
        _parquet(joined, cfg, "traffic_weather", out=self.out_tx)
        self.out["traffic_weather"] = joined.count()
        self.lap("traffic_weather")
        if self.publish:
            self._to_topic(joined, "traffic_weather")
            self.lap("traffic_weather_published")
        if self.out_tx is not None:
            return joined
        joined.unpersist()
        self.out["effects"] = publish_effects(spark, cfg)
        self.lap("effects")
        return None

    def anomalies(self, aggs: Any, joined: Any) -> None:
        from pipelines import transforms

        base = baselines(self.spark, self.cfg, pending=joined)  # the history, and the staged windows
        alerts = transforms.congestion_alerts(aggs, base, self.cfg.congestion_ratio).persist()
        _parquet(alerts, self.cfg, "alerts", out=self.out_tx)
        self.out["alerts"] = alerts.count()
        if self.publish:
            self._to_topic(alerts, "congestion_alerts")
        alerts.unpersist()
        self.lap("alerts")


# -- backfill ---------------------------------------------------------------------------------
STREAMING_CHECKPOINTS = ("aggregates", "aggregates-dlq", "correlation", "anomalies")
BACKFILL_QUERY = "backfill"  # its transactional sink's query name and checkpoint folder
# the backfill's transaction stays open while its batch jobs run (the store's
# transaction.max.timeout.ms, like Kafka's, is 15 minutes)
BACKFILL_TXN_TIMEOUT_S = 900.0


def backfill_marker(cfg: JobConfig) -> Path:
    return Path(cfg.checkpoint_dir) / "backfill.json"


def run_backfill(spark: Any, cfg: JobConfig, from_ms: int, until_ms: int) -> dict[str, Any]:
    """The batch jobs over event time ``[from_ms, until_ms)``, results published, once.

    The results (windows, joined windows, alerts) and a ledger record go out in **one Kafka
    transaction** through the streaming queries' sink (:class:`pipelines.sink.TransactionalSink`:
    query ``backfill``, checkpoint ``<checkpoint dir>/backfill`` whose id is the range, batch 0),
    and the Parquet files are staged and moved in after the commit. An attempt killed before
    its commit leaves nothing visible at read_committed (the next attempt's
    ``init_transactions`` aborts it) and no Parquet file; one killed after its commit is not
    written again (the ledger says the range was committed). The weather effects are estimated
    from the Parquet history after the commit (idempotent producer: estimates keyed by segment
    and regime, a repeat replaces). A marker in the checkpoint folder then records the summary;
    a second call with the marker in place does nothing.
    """
    from pipelines import sink

    marker = backfill_marker(cfg)
    if marker.exists():
        done: dict[str, Any] = json.loads(marker.read_text())
        if (done.get("from_ms"), done.get("until_ms")) == (from_ms, until_ms):
            return {**done, "skipped": True}
    ck = Path(cfg.checkpoint_dir) / BACKFILL_QUERY
    ck.mkdir(parents=True, exist_ok=True)
    (ck / "metadata").write_text(json.dumps({"id": f"{from_ms}-{until_ms}"}) + "\n")  # the ledger's key
    out = sink.TransactionalSink(
        cfg.bootstrap, BACKFILL_QUERY, str(ck), cfg.output_dir, transaction_timeout_s=BACKFILL_TXN_TIMEOUT_S
    )
    bcfg = JobConfig(**{**cfg.__dict__, "event_from_ms": from_ms, "event_until_ms": until_ms})
    t0 = time.monotonic()
    counts: dict[str, Any] = {}
    try:
        wrote = out.write(0, lambda tx: counts.update(run_batch(spark, bcfg, "all", publish=True, out_tx=tx)))
    finally:
        out.close()
    eff = publish_effects(spark, cfg)  # from the Parquet history, the backfill's files now in it
    summary = {
        "from_ms": from_ms,
        "until_ms": until_ms,
        "seconds": round(time.monotonic() - t0, 1),
        **(counts if wrote else {"committed_before": True, "skipped": True}),
        "effects": [] if eff is None or not len(eff) else eff[eff["segment_id"] == "*"].to_dict("records"),
    }
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, default=str))
    tmp.replace(marker)
    return summary


def _wait_for(path: str, stop: list[bool]) -> None:
    """Until ``path`` exists (the backfill's producers are done), or SIGTERM."""
    while not Path(path).exists():
        if stop[0]:
            raise SystemExit(0)
        time.sleep(0.2)


def warm_up(spark: Any, cfg: JobConfig) -> None:
    """A first tiny job through the data source (a few weather readings): Python workers and
    the JIT start now rather than in the backfill's first job (~4 s of it on 2 cores)."""
    from pipelines import transforms

    try:
        wcfg = JobConfig(**{**cfg.__dict__, "event_from_ms": None, "event_until_ms": None})
        good, _bad = transforms.split_json(_events(spark, wcfg, "weather_conditions", batch=True))
        good.groupBy("station").count().collect()
    except Exception as exc:  # only an optimisation
        log.info("warm-up skipped: %s", str(exc).splitlines()[0])


# -- CLI --------------------------------------------------------------------------------------
EPILOG = """\
example (the three jobs in one Spark application, streaming until Ctrl-C):
  sftraffic pipeline all -b 127.0.0.1:9092 --checkpoint-dir .sftraffic/checkpoints"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from framework.cli.connection import add_connection

    p = sub.add_parser(
        "pipeline",
        help="run the Spark jobs (aggregates, correlation, anomalies, all)",
        description="The Spark jobs over the store's topics: traffic aggregates, traffic x weather, "
        "congestion alerts; streaming (default) or one batch. The store's connection and security "
        "reach every Kafka client of the jobs, the Python workers' too.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job", choices=[*JOBS, "all"], help="which job: aggregates, correlation, anomalies or all")
    add_connection(p)
    p.add_argument("--batch", action="store_true", help="one batch over the topics' current contents")
    p.add_argument("--master", help="Spark master (default $SFTRAFFIC_SPARK_MASTER or local[*])")
    p.add_argument("--checkpoint-dir", default=".sftraffic/checkpoints")
    p.add_argument("--output-dir", default=".sftraffic/parquet", help="Parquet history")
    p.add_argument("--trigger", default="1 second", help="micro-batch interval")
    p.add_argument("--starting-offsets", default="earliest", help="earliest | latest | JSON (first run only)")
    p.add_argument("--window", default="1 minute")
    p.add_argument("--watermark", default="2 minutes", help="how late an event may arrive and still count")
    p.add_argument(
        "--max-offsets-per-trigger", type=int, default=1_000_000, help="per source and micro-batch (catch-up)"
    )
    p.add_argument("--timeout", type=float, help="stop after this many seconds (streaming)")
    p.add_argument(
        "--since",
        type=int,
        metavar="MS",
        help="streaming: only events with event time >= MS (epoch ms), read from the first offset "
        "stamped MS or later on a first start",
    )
    p.add_argument(
        "--backfill",
        metavar="FROM,UNTIL",
        help="first the batch jobs over event time [FROM, UNTIL) (epoch ms), results published like "
        "the streaming jobs' (once), then streaming with --since UNTIL",
    )
    p.add_argument("--wait-for", metavar="FILE", help="start the backfill once FILE exists")
    p.add_argument(
        "--source",
        choices=SOURCES,
        default="sftraffic",
        help="how Spark reads the topics: sftraffic, our Python data source (default), or kafka, Spark's "
        "own Kafka connector (JVM jars, resolved with Maven into .cache/maven on first use)",
    )
    p.add_argument(
        "--format",
        choices=["json", "avro"],
        default="json",
        help="the events' format: json, or avro (Confluent's wire format, schemas in --registry; "
        "--source sftraffic only); a topic mixing both reads as one",
    )
    add_registry(p)
    p.set_defaults(func=run)


def preflight(conn: Connection) -> None:
    """Fail with one line before starting Spark when the store does not answer, refuses the
    credentials, or the topics cannot be made."""
    from sensors.layout import ensure_layout

    conn.check()
    ensure_layout(conn.bootstrap, extra_topics=result_topics())


def _job_config(args: argparse.Namespace, conn: Connection) -> JobConfig:
    cfg = JobConfig(
        bootstrap=conn.bootstrap,
        checkpoint_dir=args.checkpoint_dir,
        output_dir=args.output_dir,
        trigger=args.trigger,
        starting_offsets=args.starting_offsets,
        window=args.window,
        watermark=args.watermark,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        master=args.master,
        source=args.source,
        value_format=args.format,
        registry_url=args.registry,
    )
    if cfg.value_format == "avro" and cfg.source != "sftraffic":
        raise StoreError("--format avro needs --source sftraffic (it decodes Avro)")
    return cfg


def _backfill_range(args: argparse.Namespace) -> tuple[int, int] | None:
    """--backfill FROM,UNTIL, which goes with the streaming 'all' job only."""
    if not args.backfill:
        return None
    a, _, b = args.backfill.partition(",")
    try:
        backfill = (int(a), int(b))
    except ValueError:
        raise StoreError(f"--backfill {args.backfill!r}: expected FROM,UNTIL in epoch ms") from None
    if args.batch or args.job != "all":
        raise StoreError("--backfill goes with the streaming 'all' job")
    return backfill


def run(args: argparse.Namespace) -> int:
    from framework.cli.connection import configure_process
    from pipelines.spark import session

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    conn = configure_process(args)  # Spark's Python workers inherit the settings file too
    cfg = _job_config(args, conn)
    backfill = _backfill_range(args)
    since = args.since if args.since is not None else (backfill[1] if backfill else None)
    cfg.event_from_ms = since
    preflight(conn)
    import signal

    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    print("starting Spark ...", file=sys.stderr, flush=True)
    spark = session("sftraffic-" + args.job, master=cfg.master, kafka_connector=cfg.source == "kafka")
    if backfill is not None:
        if args.wait_for:
            print(f"Spark ready, waiting for the backfill ({args.wait_for})", file=sys.stderr, flush=True)
            warm_up(spark, cfg)
            _wait_for(args.wait_for, stop)
        print("backfill batch running", file=sys.stderr, flush=True)
        summary = run_backfill(spark, cfg, *backfill)
        print(f"backfill batch done: {json.dumps(summary, default=str)}", file=sys.stderr, flush=True)
    if args.batch:
        summary = run_batch(spark, cfg, args.job)
        eff = summary.pop("effects", None)
        print(json.dumps(summary))
        if eff is not None and len(eff):
            print(eff[eff["segment_id"] == "*"].to_string(index=False))
    else:
        _stream(spark, cfg, args, stop)
    spark.stop()
    return 0


def _stream(spark: Any, cfg: JobConfig, args: argparse.Namespace, stop: list[bool]) -> None:
    """The streaming queries of ``args.job`` until SIGTERM (``stop``), Ctrl-C or --timeout;
    a query that stops ends the command in one line."""
    queries = []
    if args.job == "all":  # the alerts come from the aggregates query's windows
        queries.extend(start_aggregates(spark, cfg, with_alerts=True))
        queries.extend(start_correlation(spark, cfg))
    else:
        queries.extend(JOBS[args.job](spark, cfg))
    print(f"pipeline {args.job} running ({len(queries)} queries)", file=sys.stderr, flush=True)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    try:
        while not stop[0] and (deadline is None or time.monotonic() < deadline):
            try:
                supervise(queries)
            except QueryStopped as exc:
                raise StoreError(f"{exc}") from None
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    stop_gracefully(queries)
