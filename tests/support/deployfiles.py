"""Reading ``deploy/``'s files as a tool would: every ``sftraffic`` command line they run, with
the environment and the configuration files that command would see.

Compose: a service running the sftraffic image with its default entrypoint runs
``sftraffic <command>``; its ``environment`` and bind-mounted files are what it sees, after
the interpolation ``docker compose`` does (``${VAR:-default}`` becomes the default here).
Kubernetes: a container of the sftraffic image runs ``sftraffic <args>``; ``$(VAR)`` in args
and env values is expanded from the env entries before it, as the kubelet does, with
``metadata.name`` / ``metadata.namespace`` set to each pod's (a StatefulSet's pods are named
from its ordinals); files come from the ConfigMaps it mounts. systemd: ``ExecStart`` with
``%i`` = 1, the environment from the EnvironmentFile examples and the config file example.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
COMPOSE = DEPLOY / "compose" / "compose.yaml"
K8S = DEPLOY / "k8s"
KUSTOMIZATION = K8S / "kustomization.yaml"
SYSTEMD = DEPLOY / "systemd"
UNIT = SYSTEMD / "sftraffic-broker@.service"
# the sftraffic image's entrypoint (deploy/docker/Dockerfile)
ENTRYPOINT = ["tini", "--", "sftraffic"]
NAMESPACE = "default"


@dataclass
class Invocation:
    """One ``sftraffic`` command line as a deployment runs it."""

    where: str  # e.g. "compose service broker-1", "k8s StatefulSet/sftraffic-broker pod -1"
    argv: list[str]  # after "sftraffic"
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path in the container -> content
    hostname: str = "localhost"

    def __str__(self) -> str:
        return f"{self.where}: sftraffic {shlex.join(self.argv)}"


# -- compose -----------------------------------------------------------------------------------
_INTERPOLATION = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: str) -> str:
    """Compose's interpolation with an empty environment: defaults, else empty; ``$$`` is ``$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return m.group(2) or ""

    return _INTERPOLATION.sub(sub, value)


def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return doc


def is_sftraffic_image(image: str) -> bool:
    return interpolate(image).split("/")[-1].split(":")[0] == "sftraffic"


def _listify(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


def _compose_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v)) for k, v in env.items()}


def compose_invocations() -> Iterator[Invocation]:
    for name, service in compose()["services"].items():
        if not is_sftraffic_image(service.get("image", "")):
            continue
        entrypoint = _listify(service.get("entrypoint")) or ENTRYPOINT
        if entrypoint != ENTRYPOINT:
            continue  # spark-class: checked by compose_spark_commands
        files = {}
        for volume in service.get("volumes", []):
            source, _, rest = volume.partition(":")
            if source.startswith("."):
                target = rest.split(":")[0]
                files[target] = (COMPOSE.parent / source).read_text()
        yield Invocation(
            f"compose service {name}",
            [interpolate(a) for a in _listify(service.get("command"))],
            _compose_env(service),
            files,
            service.get("hostname", name),
        )


def compose_spark_commands() -> dict[str, list[str]]:
    """Services running ``spark-class``: name -> the class and its arguments."""
    out = {}
    for name, service in compose()["services"].items():
        entrypoint = _listify(service.get("entrypoint"))
        if entrypoint and entrypoint[-1] == "spark-class":
            out[name] = [interpolate(a) for a in _listify(service.get("command"))]
    return out


# -- Kubernetes --------------------------------------------------------------------------------
def k8s_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p != KUSTOMIZATION)


def k8s_documents() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, d) for p in k8s_files() for d in yaml.safe_load_all(p.read_text()) if d]


def _by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in k8s_documents() if d["kind"] == kind}


def k8s_services() -> dict[str, dict[str, Any]]:
    return _by_kind("Service")


def k8s_statefulsets() -> dict[str, dict[str, Any]]:
    return _by_kind("StatefulSet")


def pod_names(workload: dict[str, Any]) -> list[str]:
    name = workload["metadata"]["name"]
    spec = workload["spec"]
    if workload["kind"] == "StatefulSet":
        start = spec.get("ordinals", {}).get("start", 0)
        return [f"{name}-{i}" for i in range(start, start + spec.get("replicas", 1))]
    return [f"{name}-7c9f8d6b5-x2k4q"]


_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expand(value: str, env: dict[str, str]) -> str:
    return _K8S_VAR.sub(lambda m: env.get(m.group(1), m.group(0)), value)


def _container_env(container: dict[str, Any], pod: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = _expand(str(item["value"]), env)
        else:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            env[item["name"]] = {"metadata.name": pod, "metadata.namespace": NAMESPACE}[path]
    return env


def k8s_invocations() -> Iterator[Invocation]:
    configmaps = _by_kind("ConfigMap")
    for _, doc in k8s_documents():
        if doc["kind"] not in ("StatefulSet", "Deployment", "Job"):
            continue
        pod_spec = doc["spec"]["template"]["spec"]
        mounted: dict[str, dict[str, str]] = {}
        for volume in pod_spec.get("volumes", []):
            if "configMap" in volume:
                mounted[volume["name"]] = configmaps[volume["configMap"]["name"]]["data"]
        pods = pod_names(doc)
        for container in pod_spec.get("initContainers", []) + pod_spec["containers"]:
            if not is_sftraffic_image(container["image"]):
                continue
            assert "command" not in container, "the image's entrypoint runs sftraffic: use args"
            for pod in pods:
                env = _container_env(container, pod)
                files = {}
                for mount in container.get("volumeMounts", []):
                    for key, text in mounted.get(mount["name"], {}).items():
                        files[f"{mount['mountPath']}/{key}"] = text
                yield Invocation(
                    f"k8s {doc['kind']}/{doc['metadata']['name']} container {container['name']} pod {pod}",
                    [_expand(a, env) for a in container["args"]],
                    env,
                    files,
                    pod,
                )


# -- systemd -----------------------------------------------------------------------------------
def unit_settings(path: Path = UNIT) -> dict[str, list[str]]:
    """``Key=value`` lines of a unit (every value of a repeated key, in order)."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def env_file(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


def systemd_invocations(instance: str = "1") -> Iterator[Invocation]:
    settings = unit_settings()
    argv = shlex.split(settings["ExecStart"][0].replace("%i", instance))
    assert argv[0].endswith("/sftraffic"), argv[0]
    yield Invocation(
        f"systemd {UNIT.name} instance {instance}",
        argv[1:],
        env_file(SYSTEMD / "broker.env.example"),
        {"/etc/sftraffic/broker.toml": (SYSTEMD / "broker.toml.example").read_text()},
        f"kafka-{instance}",
    )


def all_invocations() -> list[Invocation]:
    return [*compose_invocations(), *k8s_invocations(), *systemd_invocations()]
