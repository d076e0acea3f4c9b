"""The fixed simulated morning the pipeline tests replay, and how to keep it in a store.

The tests write records stamped with a fixed past date (their data, and so the weather the
seeded model draws for it, must not change from one day to the next). Time-based retention
deletes a segment once its newest record is older than ``retention.ms`` (Kafka's default is 7
days; test brokers check every 500 ms), so every topic holding these records keeps them forever:
``KEEP`` for a topic's configs, ``KEEP_TTL_MS`` for the demo layout's stream TTL.
"""

from __future__ import annotations

import datetime as dt

# Wednesday 2026-11-18, 08:00 in San Francisco (16:00 UTC)
T0 = int(dt.datetime(2026, 11, 18, 16, 0, tzinfo=dt.UTC).timestamp() * 1000)
KEEP_TTL_MS = -1
KEEP: dict[str, str] = {"retention.ms": str(KEEP_TTL_MS)}
