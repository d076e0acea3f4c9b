"""Fault injection, as Apache Kafka keeps it in ``trogdor/``: ``sftraffic chaos``.

A Jepsen-style check of a cluster of ours (or any Kafka cluster): faults while clients write
and read, then a verdict on what the clients saw. It drives the store from outside, through
Kafka clients and the test harness (:mod:`testing`); nothing of the product imports it (an
import-linter contract says so).

* :mod:`~chaos.cli`: the command (options, verdict table, exit code);
* :mod:`~chaos.runner`: one run: set up, act, heal, judge;
* :mod:`~chaos.nemesis`: the faults (kill, term, pause, link cuts) and what they act on;
* :mod:`~chaos.workload` / :mod:`~chaos.txn_workload`: the clients (producers, live readers,
  the final read), plain and transactional;
* :mod:`~chaos.checker` / :mod:`~chaos.txn_checker`: the verdicts, pure functions over a
  history;
* :mod:`~chaos.netns`: real network partitions between local brokers (network namespaces);
* :mod:`~chaos.probe`: clients run inside a broker's namespace, on the far side of a cut.
"""
