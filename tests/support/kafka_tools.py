"""What the tests of Apache Kafka's tools against the store share: the ``tool`` fixture's type
(``tests/integration/kafka/conftest.py`` makes it: ``tool("kafka-topics", "--list", ...)``)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

Tool = Callable[..., subprocess.CompletedProcess[str]]
