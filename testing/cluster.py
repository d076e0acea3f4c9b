"""The store's brokers as child processes, for tests, benchmarks and chaos runs.

:class:`BrokerProcess` is one ``sftraffic broker`` of this checkout on a free 127.0.0.1 port
(a :class:`~deploy.local.process.ManagedProcess`: its own process group, ready when it
listens, nothing left behind); :class:`ClusterProcesses` is N of them forming one cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from deploy.local.process import ManagedProcess, ProcessError, free_port, sftraffic, wait_for


class BrokerProcess(ManagedProcess):
    """``sftraffic broker`` on a free (or given) 127.0.0.1 port; ready when it is listening."""

    def __init__(
        self,
        data_dir: Path | str,
        port: int | None = None,
        node_id: int = 1,
        overrides: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        extra_args: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        log: Path | str | None = None,
        ready: str = " listening on ",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.node_id = node_id
        self.overrides = dict(overrides or {})
        cmd = sftraffic(
            "broker", "--node-id", str(node_id), "--listen", self.bootstrap, "--data-dir", str(self.data_dir)
        )
        for k, v in self.overrides.items():
            cmd += ["-o", f"{k}={v}"]
        super().__init__(
            f"broker-{node_id}", [*cmd, *(extra_args or [])], ready=ready, log=log, env=env, grace=30.0
        )

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self


class ClusterProcesses:
    """N brokers forming one cluster on free 127.0.0.1 ports (tests, benchmarks).

    Brokers 1 to ``voters`` (all of them by default) get a controller (Raft) endpoint and form
    the metadata quorum; the others are observers (non-voting brokers following the metadata
    log). ``start`` returns once every broker is listening and all of them are registered with
    the controller; ``add_broker`` starts one more observer (growing the cluster).
    ``broker_overrides[i]`` adds settings of broker i + 1 alone (e.g. its ``metrics.listen``).
    """

    def __init__(
        self,
        base_dir: Path | str,
        size: int = 3,
        overrides: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        ports: list[int] | None = None,
        env: Mapping[str, str] | None = None,
        broker_overrides: Sequence[Mapping[str, object]] | None = None,
        voters: int | None = None,
    ) -> None:
        self.base_dir = Path(base_dir)
        self.size = size
        self.host = host
        self.env = env
        self.overrides = dict(overrides or {})
        kafka_ports = ports or [free_port(host) for _ in range(size)]
        n_voters = size if voters is None else voters
        raft_ports = [free_port(host) for _ in range(n_voters)]
        self.voters = ",".join(f"{i + 1}@{host}:{raft_ports[i]}" for i in range(n_voters))
        self.brokers = [
            self._broker(i + 1, kafka_ports[i], broker_overrides[i] if broker_overrides else None)
            for i in range(size)
        ]

    def _broker(self, node_id: int, port: int, overrides: Mapping[str, object] | None) -> BrokerProcess:
        return BrokerProcess(
            self.base_dir / f"broker-{node_id}",
            port=port,
            node_id=node_id,
            overrides={**self.overrides, **(overrides or {}), "controller.quorum.voters": self.voters},
            host=self.host,
            env=self.env,
        )

    def add_broker(
        self, overrides: Mapping[str, object] | None = None, timeout: float = 60.0
    ) -> BrokerProcess:
        """Start broker ``size + 1``, a non-voting observer, and wait until it serves clients
        (it has caught up with the metadata log and registered)."""
        b = self._broker(len(self.brokers) + 1, free_port(self.host), overrides)
        self.brokers.append(b)
        self.size = len(self.brokers)
        b.launch()
        b.wait_ready(timeout)
        return b

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self, timeout: float = 60.0) -> ClusterProcesses:
        for b in self.brokers:
            b.launch()
        try:
            for b in self.brokers:
                b.wait_ready(timeout)
            self.wait_registered(self.size, timeout)
        except ProcessError:
            self.stop()
            raise
        except TimeoutError as exc:
            tails = "\n".join(f"--- broker {b.node_id}\n{b.tail(25)}" for b in self.brokers)
            self.stop()
            raise TimeoutError(f"{exc}; the brokers' last lines:\n{tails}") from None
        return self

    def live_brokers(self) -> list[int]:
        """Broker ids the cluster's Metadata lists (asking any broker that answers)."""
        from framework.client.admin import live_broker_ids

        for b in self.brokers:
            if b.alive():
                ids = live_broker_ids(b.bootstrap)
                if ids is not None:
                    return ids
        return []

    def wait_registered(self, count: int, timeout: float = 60.0) -> None:
        """Until every running broker's Metadata lists ``count`` brokers (each broker's view
        catches up on its own: one listing all while another, taking a CreateTopics, still
        knows two refused it with INVALID_REPLICATION_FACTOR)."""
        from framework.client.admin import live_broker_ids

        def everyone_sees() -> bool:
            views = [live_broker_ids(b.bootstrap) for b in self.brokers if b.alive()]
            return bool(views) and all(v is not None and len(v) >= count for v in views)

        wait_for(everyone_sees, timeout, 0.2, f"{count} registered brokers, as every broker sees them")

    def stop(self) -> None:
        for b in self.brokers:
            b.stop()

    def logs(self) -> str:
        return "\n\n".join(f"--- broker {b.node_id}\n{b.logs()}" for b in self.brokers)

    def __enter__(self) -> ClusterProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
