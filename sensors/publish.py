"""Event sinks: straight into the store with a Kafka producer, or over MQTT like real devices.

* :class:`KafkaSink` — confluent-kafka, idempotent (exactly once per partition), Kafka's
  murmur2 partitioner on the sensor id, CreateTime = the event's simulated time, JSON values.
* :class:`MqttSink` — devices publish ``sf/<stream>/<topic>/<sensor-id>`` at QoS 1 (MQTT 5).
  Thousands of simulated devices share a few connections (a device concentrator); at most
  ``window`` publishes per connection wait for their PUBACK, which bounds memory.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import msgspec

from framework.client.producer import producer_config
from sensors.layout import STREAM

_enc = msgspec.json.Encoder()
log = logging.getLogger("sftraffic.sensors")


def _quiet() -> logging.Logger:
    lg = logging.getLogger("sftraffic.librdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


class KafkaSink:
    def __init__(
        self,
        bootstrap: str,
        client_id: str = "sftraffic-sensors",
        exactly_once: bool = True,
        extra: dict[str, Any] | None = None,
    ) -> None:
        from confluent_kafka import Producer

        conf = producer_config(
            bootstrap,
            exactly_once=exactly_once,
            client_id=client_id,
            linger_ms=20,
            extra={
                "batch.size": 1_000_000,
                "batch.num.messages": 50_000,
                "queue.buffering.max.messages": 500_000,
                "compression.type": "lz4",
                "logger": _quiet(),
                # a Python callback per delivered message costs ~1 µs: report failures only
                "delivery.report.only.error": True,
                # one callback for every message, set once: a per-call on_delivery costs ~1 µs
                "on_delivery": self._cb,
                **(extra or {}),
            },
        )
        self.producer = Producer(conf)
        self.errors = 0
        self.sent = 0
        self.last_error: str | None = None

    def _cb(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            self.last_error = str(err)

    def send(self, topic: str, key: str, value: dict[str, Any], ts_ms: int) -> None:
        data = _enc.encode(value)
        while True:
            try:
                self.producer.produce(topic, data, key, timestamp=ts_ms)  # str key: UTF-8 in C
                self.sent += 1
                return
            except BufferError:
                self.producer.poll(0.05)  # full local queue: wait for the store (bounded memory)

    def poll(self) -> None:
        self.producer.poll(0)

    def flush(self, timeout: float = 30.0) -> int:
        return int(self.producer.flush(timeout))


class MqttSink:
    def __init__(
        self,
        host: str,
        port: int,
        stream: str = STREAM,
        connections: int = 2,
        window: int = 1000,
        client_prefix: str = "sftraffic-devices",
    ) -> None:
        import paho.mqtt.client as mqtt

        self.stream = stream
        self.window = window
        self.clients = []
        self.inflight: list[threading.Semaphore] = []
        self.published = 0
        self.acked = 0
        self._lock = threading.Lock()
        for i in range(connections):
            c = mqtt.Client(
                mqtt.CallbackAPIVersion.VERSION2, client_id=f"{client_prefix}-{i}", protocol=mqtt.MQTTv5
            )
            c.max_inflight_messages_set(window)
            c.max_queued_messages_set(0)
            sem = threading.Semaphore(window)
            c.on_publish = self._on_publish(sem)
            c.connect(host, port, keepalive=30)
            c.loop_start()
            self.clients.append(c)
            self.inflight.append(sem)
        self._rr = 0

    def _on_publish(self, sem: threading.Semaphore) -> Any:
        def cb(client: Any, userdata: Any, mid: int, reason_code: Any = None, properties: Any = None) -> None:
            sem.release()
            with self._lock:
                self.acked += 1

        return cb

    def send(self, topic: str, key: str, value: dict[str, Any], ts_ms: int) -> None:
        name = topic.split(".", 1)[1] if "." in topic else topic
        mqtt_topic = f"sf/{self.stream}/{name}/{key}"
        i = self._rr = (self._rr + 1) % len(self.clients)
        self.inflight[i].acquire()
        self.clients[i].publish(mqtt_topic, _enc.encode(value), qos=1)
        self.published += 1

    def poll(self) -> None:
        pass

    def flush(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.acked >= self.published:
                    return 0
            time.sleep(0.01)
        return self.published - self.acked

    def close(self) -> None:
        for c in self.clients:
            c.disconnect()  # before loop_stop: the other order waits up to a second per client
            c.loop_stop()
