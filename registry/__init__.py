"""A schema registry speaking Confluent Schema Registry's REST API, over the store.

A client of the store over the Kafka protocol like any application: schemas live in the
compacted ``_schemas`` topic (Confluent's record format), one instance elected through a
consumer group writes, the others forward writes to it. ``schemas`` parses, ``compatibility``
checks with Apache Avro's rules, ``state`` is the model rebuilt from the topic, ``store`` reads
and writes the topic, ``election`` picks the writer, ``app`` serves the REST API (aiohttp).
Run it with ``sftraffic registry`` (needs the ``registry`` extras).
"""
