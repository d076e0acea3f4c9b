"""The harness the tests, the benchmarks (``load/``) and the chaos runs (``chaos/``) start the
store with: brokers and clusters of this checkout as child processes (:mod:`testing.cluster`),
with the process supervision they share with ``sftraffic up`` (:mod:`deploy.local.process`:
free ports, waiting on an event, stopping a process group).

Nothing in the product imports it (an import-linter contract says so).
"""

from deploy.local.process import ManagedProcess, ProcessError, free_port, sftraffic, wait_for
from testing.cluster import BrokerProcess, ClusterProcesses

__all__ = [
    "BrokerProcess",
    "ClusterProcesses",
    "ManagedProcess",
    "ProcessError",
    "free_port",
    "sftraffic",
    "wait_for",
]
