"""Spark's own Kafka connector for the pipelines' ``--source kafka`` (see :mod:`deploy.spark.connector`)."""
