"""One harness for every benchmark in ``load/``: statistics, CPU and RSS from /proc, py-spy,
the processes a run starts, the console, the JSON head and the docs page, Kafka-client helpers.
What each module holds: ``docs/design/development.md``, "The benchmark harness".
"""
