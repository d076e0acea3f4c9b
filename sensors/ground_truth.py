"""What the simulation was configured with, for anyone checking the analytics against it.

A small compacted topic, ``traffic_monitoring.ground_truth``, one JSON record per key (the
latest wins):

* ``weather_effect``: the fleet's :class:`sensors.model.WeatherEffect` (``rain_speed_factor``,
  ``heavy_rain_speed_factor``, ``fog_speed_factor``, volume factors, incident multipliers),
  plus ``seed`` and ``rain_share``; ``speed_factor`` maps each regime (``fog``, ``rain``,
  ``heavy_rain``) to its configured factor, the figure the weather-effect estimates recover.
  Written by ``sftraffic sensors`` when it starts.
* ``backfill``: the simulated past ``sftraffic up`` replayed before going live: ``from_ms``,
  ``until_ms`` (exclusive; live event time starts there), ``sample`` (1/N of the pavement
  sensors replayed, so volumes in that period are 1/N of live ones; speeds are not
  affected), ``showcase`` (the showery spell's period), ``events``, ``seconds``,
  ``events_per_s``, ``state`` (``replaying``, ``stored``).

``read(bootstrap)`` returns ``{key: record}``; nothing here is needed for the demo to run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from framework.client.security import secured
from sensors.layout import topic

TOPIC = topic("ground_truth")
REGIMES = {"fog": 2, "rain": 3, "heavy_rain": 4}  # condition codes of sensors.model.CONDITIONS


def _quiet() -> Any:
    from sensors.publish import _quiet

    return _quiet()


def ensure_topic(bootstrap: str, replication_factor: int = 1) -> None:
    """Create the compacted topic when it is missing."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(secured({"bootstrap.servers": bootstrap, "logger": _quiet()}))
    if TOPIC in admin.list_topics(timeout=15).topics:
        return
    new = NewTopic(
        TOPIC, num_partitions=1, replication_factor=replication_factor, config={"cleanup.policy": "compact"}
    )
    try:
        admin.create_topics([new], operation_timeout=30)[TOPIC].result(30)
    except Exception as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


def publish(bootstrap: str, key: str, value: dict[str, Any]) -> None:
    """Write one record (and wait for the store's acknowledgement)."""
    from confluent_kafka import Producer

    ensure_topic(bootstrap)
    errors: list[str] = []
    p = Producer(secured({"bootstrap.servers": bootstrap, "logger": _quiet(), "enable.idempotence": True}))
    p.produce(
        TOPIC,
        json.dumps({**value, "published_ms": int(time.time() * 1000)}).encode(),
        key.encode(),
        on_delivery=lambda err, _m: errors.append(str(err)) if err is not None else None,
    )
    left = p.flush(15)
    if errors or left:
        raise RuntimeError(f"ground truth {key!r} not written: {errors or 'no acknowledgement'}")


def model_record(cfg: Any) -> dict[str, Any]:
    """The ``weather_effect`` record of a :class:`sensors.model.ModelConfig`."""
    eff = cfg.effect
    return {
        **dataclasses.asdict(eff),
        "speed_factor": {name: eff.speed_factor(code) for name, code in REGIMES.items()},
        "seed": cfg.seed,
        "rain_share": cfg.rain_share,
    }


def publish_model(bootstrap: str, cfg: Any) -> None:
    publish(bootstrap, "weather_effect", model_record(cfg))


def read(bootstrap: str, timeout: float = 5.0) -> dict[str, dict[str, Any]]:
    """The latest record of every key ({} when the topic is missing or empty)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        secured(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "sftraffic-ground-truth",
                "enable.auto.commit": False,
                "logger": _quiet(),
                "enable.partition.eof": True,
            }
        )
    )
    out: dict[str, dict[str, Any]] = {}
    try:
        md = c.list_topics(TOPIC, timeout=timeout).topics.get(TOPIC)
        if md is None or md.error is not None:
            return out
        lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=timeout)
        if hi <= lo:
            return out
        c.assign([TopicPartition(TOPIC, 0, lo)])
        deadline = time.monotonic() + timeout
        pos = lo
        while pos < hi and time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.2):
                if m.error() is not None:
                    continue
                pos = (m.offset() or 0) + 1
                key, value = m.key(), m.value()
                if key is not None and value is not None:
                    out[key.decode()] = json.loads(value)
    finally:
        c.close()
    return out
