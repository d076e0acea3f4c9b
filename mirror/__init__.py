"""Cross-cluster replication, MirrorMaker 2's model (KIP-382): ``sftraffic mirror``.

A client of two Kafka-API clusters and nothing else (confluent-kafka only; an import-linter
contract keeps broker internals out), so it mirrors between two sftraffic clusters, and between
sftraffic and Apache Kafka either way.

* :mod:`~mirror.policy`: which topics and groups are mirrored, remote topic names
  (``<source-alias>.<topic>``, DefaultReplicationPolicy), internal topic names, the topic
  configs copied.
* :mod:`~mirror.formats`: MM2's record layouts for offset syncs, checkpoints and
  heartbeats (Kafka's protocol types: STRING = int16 length + UTF-8, big-endian integers), and
  the Connect-style JSON of the mirror's own progress. Pure functions over bytes.
* :mod:`~mirror.offset_sync`: the offset-sync store and the translation of a consumer
  group's offset from the source to the target (never past an unread record).
* :mod:`~mirror.mirror`: the process: copy, commit progress, syncs, checkpoints,
  heartbeats, topic and partition refresh, lag.
"""
