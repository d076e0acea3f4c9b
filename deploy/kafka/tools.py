"""Kafka's command-line tools by the names of their ``bin/*.sh`` scripts, run by main class.

``run_tool("kafka-topics", "--bootstrap-server", b, "--list")`` is what ``bin/kafka-topics.sh
--bootstrap-server b --list`` runs: ``java -cp '<cache>/lib/*' org.apache.kafka.tools.TopicCommand
...`` with a small heap, C1 only, and logging at WARN on stderr, so stdout is the tool's answer.
:func:`javac` compiles a small Java program against the same jars (the Streams test).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from deploy.kafka.resolve import MavenError, java_cmd, resolve

# the main class behind each bin/*.sh script (Kafka 4.3)
TOOLS: dict[str, str] = {
    "kafka-server-start": "kafka.Kafka",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-verifiable-share-consumer": "org.apache.kafka.tools.VerifiableShareConsumer",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
}


def main_class(tool: str) -> str:
    """The main class of ``tool`` (a script name, or a class name passed through)."""
    name = tool.removesuffix(".sh")
    if name in TOOLS:
        return TOOLS[name]
    if "." in name and not name.startswith("kafka-"):
        return name
    raise KeyError(f"unknown Kafka tool {tool!r}; known: {', '.join(sorted(TOOLS))}")


def tool_cmd(
    tool: str,
    *args: str,
    heap: str = "256m",
    extra_classpath: Sequence[Path | str] = (),
    jvm_opts: Sequence[str] = (),
) -> list[str]:
    return java_cmd(main_class(tool), *args, heap=heap, extra_classpath=extra_classpath, jvm_opts=jvm_opts)


# bin/kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (G1 comes with java_cmd's server options)
# and bin/kafka-producer-perf-test.sh's -Xmx512M; the logging stays a tool's (WARN on stderr)
PERF_JVM_OPTS = (
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Dsftraffic.kafka.log.level=warn",
    "-Dsftraffic.kafka.log.target=SYSTEM_ERR",
)


def perf_tool_cmd(tool: str, *args: str, heap: str = "512m", lib: Path | None = None) -> list[str]:
    """``tool`` as ``bin/<tool>.sh`` runs it: G1 and the full JIT (C2), ``-Xmx512M``, not the
    C1-only, serial-GC JVM of the short admin tools; for the perf tools, whose figures are the
    client's rate. Its stdout is still only its answer (the later ``-D`` options win)."""
    return java_cmd(main_class(tool), *args, heap=heap, daemon=True, jvm_opts=PERF_JVM_OPTS, lib=lib)


def run_tool(
    tool: str,
    *args: str,
    input: str | None = None,
    timeout: float = 120.0,
    check: bool = True,
    extra_classpath: Sequence[Path | str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``tool`` to its end; its stdout and stderr as text. ``check``: raise on a non-zero exit
    with both in the message."""
    cmd = tool_cmd(tool, *args, extra_classpath=extra_classpath)
    out = subprocess.run(
        cmd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    if check and out.returncode != 0:
        raise subprocess.CalledProcessError(out.returncode, [tool, *args], out.stdout, out.stderr)
    return out


def javac(sources: Sequence[Path], out_dir: Path, timeout: float = 300.0) -> Path:
    """Compile ``sources`` against Kafka's jars into ``out_dir`` (a classpath entry)."""
    exe = shutil.which("javac")
    if exe is None:
        raise MavenError("javac is not installed: apt-get install default-jdk-headless")
    lib = resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        exe,
        "-nowarn",
        "-encoding",
        "UTF-8",
        "-cp",
        str(lib / "*"),
        "-d",
        str(out_dir),
        *map(str, sources),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if res.returncode != 0:
        raise MavenError(f"javac failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return out_dir
