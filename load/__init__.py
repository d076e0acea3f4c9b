"""Load generators and benchmarks (``python -m load.bench_broker``)."""
