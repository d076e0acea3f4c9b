"""Apache Kafka 4.x itself, resolved from Maven Central and run on this machine.

* :mod:`deploy.kafka.resolve`: ``pom.xml`` → ``mvn dependency:copy-dependencies`` into an
  ignored cache (``.cache/maven/kafka-<version>/lib``), and the ``java -cp`` command lines;
* :mod:`deploy.kafka.cluster`: :class:`KafkaCluster`, a KRaft single node or N-node cluster on
  loopback ports, each node a :class:`~deploy.local.process.ManagedProcess`;
* :mod:`deploy.kafka.tools`: Kafka's command-line tools by their ``bin/*.sh`` names, and
  ``javac`` for small Java programs compiled against the cache;
* ``python -m deploy.kafka`` (``./run kafka``): start a cluster until Ctrl-C, resolve, or run a tool.

Used by ``./run kafka``, ``./run test-on-kafka``, the compatibility tests (``tests/integration/kafka/``),
``sftraffic up --store kafka`` and the ``kafka`` benchmark peer (``load/peers.py``).
"""

from deploy.kafka.cluster import KafkaCluster, KafkaNode
from deploy.kafka.resolve import KAFKA_VERSION, MavenError, resolve

__all__ = ["KAFKA_VERSION", "KafkaCluster", "KafkaNode", "MavenError", "resolve"]
