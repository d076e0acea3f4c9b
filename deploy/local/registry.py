"""``sftraffic registry`` as a managed child process (tests, benchmarks, ``sftraffic up``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from deploy.local.process import ManagedProcess, free_port, sftraffic


class RegistryProcess(ManagedProcess):
    """The schema registry on a free (or given) 127.0.0.1 port; ready once it has read ``_schemas``."""

    def __init__(
        self,
        bootstrap: str,
        port: int | None = None,
        topic: str = "_schemas",
        group: str = "schema-registry",
        host: str = "127.0.0.1",
        extra_args: Sequence[str] = (),
        log: Path | str | None = None,
        name: str = "registry",
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.scheme = "https" if "--tls-cert" in extra_args else "http"
        cmd = sftraffic(
            "registry", "--bootstrap-server", bootstrap, "--listen", f"{host}:{self.port}",
            "--topic", topic, "--group", group, *extra_args,
        )  # fmt: skip
        super().__init__(name, cmd, ready="registry listening on ", log=log, grace=15.0)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"
