"""A released version of sftraffic, extracted from its git tag, run beside the working tree.

``extract("v0.1.0", dest)`` writes the tag's packages (``git archive``) into ``dest`` and returns
a :class:`Release`: the environment that makes this interpreter import that tree's modules
instead of the working tree's, and the command lines of its ``sftraffic``.

Which tree a child imports: ``python -m framework.cli.main`` puts its working directory first on
``sys.path`` (the working tree's, when pytest runs from the checkout), then ``PYTHONPATH``; the
venv's editable install finds the working tree last (a finder after the path entries).
``PYTHONSAFEPATH=1`` drops the working directory and ``PYTHONPATH`` names the release, so the
release's ``framework`` is found first whatever the child's working directory is. An extracted
tree has no compiled record walk (``git archive`` holds no ``.so``): it runs as pure Python,
with the same checks. :func:`extract` starts the release's interpreter once and refuses to
return unless every module it asks for comes from the extracted tree.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testing import BrokerProcess, ClusterProcesses

ROOT = Path(__file__).resolve().parents[2]
# what the package is built from (pyproject.toml's packages), and pyproject.toml for its version
CONTENTS = ("pyproject.toml", "framework", "sensors", "pipelines", "dashboard", "load", "deploy")
# modules a broker and the CLI import: all must come from the release
PROBE = (
    "framework",
    "framework.cli.main",
    "framework.server.broker",
    "framework.storage.log",
    "framework.metadata.store",
    "framework.protocol.record_walk",
)


class ReleaseError(RuntimeError):
    """The tag cannot be extracted, or its tree would not be the one imported."""


@dataclass(frozen=True)
class Release:
    tag: str
    root: Path
    version: str

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Variables making ``sys.executable`` import this release (over ``base``)."""
        return {**(base or {}), "PYTHONPATH": str(self.root), "PYTHONSAFEPATH": "1"}

    def sftraffic(self, *args: str) -> list[str]:
        """This release's ``sftraffic`` command line (run it with :meth:`env`)."""
        return [sys.executable, "-m", "framework.cli.main", *args]

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run one of its commands to the end (output captured)."""
        return subprocess.run(
            self.sftraffic(*args),
            env={**os.environ, **self.env()},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def python(self, code: str, *args: str, timeout: float = 60) -> str:
        """The output of ``python -c code args`` run with the release's modules."""
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            env={**os.environ, **self.env()},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise ReleaseError(f"{self.tag}: python -c failed: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def broker(self, data_dir: Path | str, **kw: Any) -> BrokerProcess:
        """Its ``sftraffic broker`` (BrokerProcess's arguments; not started)."""
        return BrokerProcess(data_dir, env=self.env(kw.pop("env", None)), **kw)

    def cluster(self, base_dir: Path | str, size: int = 3, **kw: Any) -> ClusterProcesses:
        """A cluster of its brokers (ClusterProcesses's arguments; not started). The same
        command line runs this version once a broker's ``env`` drops :meth:`env`'s variables."""
        return ClusterProcesses(base_dir, size, env=self.env(kw.pop("env", None)), **kw)


# the commit each release was tagged on, for a clone that has the history but not the tags
RELEASE_COMMITS = {"v0.1.0": "9f82f387d95998a06fc35e4e3622dfdf5db1419f"}


def _treeish(tag: str) -> str:
    found = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "-q", f"{tag}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    return tag if found.returncode == 0 else RELEASE_COMMITS.get(tag, tag)


def extract(tag: str, dest: Path) -> Release:
    """The tag's tree in ``dest`` (``git archive`` of the repository's tag, no work tree needed)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", _treeish(tag), "--", *CONTENTS],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        why = archive.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ReleaseError(
            f"git archive {tag} failed in {ROOT}: {why[0]} (a clone without tags: git fetch --tags)"
        )
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    project = tomllib.loads((dest / "pyproject.toml").read_text())["project"]
    _write_metadata(dest, project)
    release = Release(tag, dest.resolve(), str(project["version"]))
    _check_imports(release)
    return release


def _write_metadata(dest: Path, project: Mapping[str, Any]) -> None:
    """The release's own installed-package metadata, first on its path: its ``sftraffic
    --version`` and its application commands (the ``sftraffic.commands`` entry points) are its
    own, not those of the working tree's install (importlib.metadata takes the first
    distribution of a name on ``sys.path``), whose commands may clash with the release's own."""
    info = dest / f"sftraffic-{project['version']}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sftraffic\nVersion: {project['version']}\n")
    groups = project.get("entry-points", {})
    lines = [f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for g, eps in groups.items()]
    (info / "entry_points.txt").write_text("\n".join(lines))


def _check_imports(release: Release) -> None:
    """Every module of :data:`PROBE` imported by the release's interpreter is the release's, as
    a child started with its environment from this process's working directory sees it, and its
    CLI builds its parser (no command of the working tree's install clashes with its own)."""
    code = (
        "import importlib, sys\nfor m in sys.argv[1:]:\n    print(importlib.import_module(m).__file__)\n"
        "importlib.import_module('framework.cli.main').build_parser()"
    )
    files = [Path(f) for f in release.python(code, *PROBE).split()]
    strays = [f"{m} from {f}" for m, f in zip(PROBE, files, strict=True) if release.root not in f.parents]
    if strays:
        raise ReleaseError(f"{release.tag}'s interpreter imports other modules: {'; '.join(strays)}")
