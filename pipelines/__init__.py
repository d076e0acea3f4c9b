"""Stream processing on the store: PySpark jobs and a faust-streaming example."""
