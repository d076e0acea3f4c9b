"""``sftraffic cluster info|roll``: a whole cluster, over the Kafka protocol (any Kafka cluster).

``info``: the brokers (id, host:port, rack), the controller and the cluster id (DescribeCluster,
confluent-kafka's AdminClient), the metadata quorum (DescribeQuorum: leader, epoch, high
watermark, voters and observers with their log end offset and lag; where the cluster answers
it, as our brokers and Kafka 4 do), and the bootstrap broker's software (ApiVersions: every API
key with its version range, the supported and finalized features it reports).
``-o json``: ``{"cluster_id", "controller_id", "brokers": [{"id", "host", "port", "rack"}],
"metadata_quorum": {"leader_id", "leader_epoch", "high_watermark", "voters": [{"replica_id",
"log_end_offset", "lag", "last_fetch_timestamp", "last_caught_up_timestamp"}], "observers":
[...]} (null when not answered: "metadata_quorum_error" says why), "api_versions": {"broker",
"api_keys": [{"api_key", "name", "min_version", "max_version"}], "supported_features": [{"name",
"min_version", "max_version"}], "finalized_features_epoch", "finalized_features": [{"name",
"min_version_level", "max_version_level"}]}}``.

``roll``: a rolling restart, one broker at a time. Each broker is restarted by
``--restart-command`` (``{id}`` is its node id), after every partition is fully in sync and
before the next one, with preferred leaders elected again after each; see
``framework/client/roll.py`` for the steps. The command must return once the broker has
stopped and been started again (``systemctl restart sftraffic-broker@{id}``; ``kubectl delete
pod sftraffic-broker-{id}``, which waits for the pod to go, and the StatefulSet starts it again).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import subprocess
from collections.abc import Callable
from typing import Any

from framework.cli.common import quiet_logger
from framework.cli.output import (
    admin,
    command,
    command_group,
    connect,
    console,
    json_wanted,
    kafka_errors,
    print_json,
    table,
    warn,
)
from framework.client.admin import api_versions, describe_quorum
from framework.client.roll import RollError, roll
from framework.errors import StoreError

ROLL_DESCRIPTION = """\
Restart the brokers one at a time: each after every partition is fully in sync, preferred
leaders elected again after each, the controller last. --restart-command must return once the
broker has stopped and been started again (systemctl restart sftraffic-broker@{id}; kubectl
delete pod sftraffic-broker-{id}, which waits for the pod to go while the StatefulSet starts it
again)."""
EXAMPLES = """\
  sftraffic cluster info
  sftraffic cluster info -o json | jq '.brokers[].id'
  sftraffic cluster roll --restart-command 'systemctl restart sftraffic-broker@{id}'"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    csub = command_group(
        sub,
        "cluster",
        "a whole cluster: brokers, controller, quorum, APIs; rolling restart",
        "A whole cluster, over the Kafka protocol (any Kafka cluster).",
        EXAMPLES,
    )
    i = command(
        csub,
        "info",
        "brokers, controller, cluster id, metadata quorum and the APIs the broker serves",
        "sftraffic cluster info -o json | jq .metadata_quorum",
        output=True,
    )
    i.add_argument("--apis", action="store_true", help="the table lists every API key and its versions too")
    i.set_defaults(func=info)

    r = command(
        csub,
        "roll",
        "restart the brokers one at a time, each once every partition is in sync",
        "sftraffic cluster roll --restart-command 'systemctl restart sftraffic-broker@{id}'",
        description=ROLL_DESCRIPTION,
    )
    r.add_argument(
        "--restart-command",
        required=True,
        metavar="CMD",
        help="command restarting one broker; {id} is its node id "
        "(e.g. 'systemctl restart sftraffic-broker@{id}')",
    )
    r.add_argument(
        "--brokers", metavar="ID,...", help="only these brokers (default: all, the controller last)"
    )
    r.add_argument(
        "--timeout", type=float, default=300.0, help="seconds each step may take to be in sync (default 300)"
    )
    r.add_argument(
        "--no-elect", action="store_true", help="do not elect preferred leaders after each restart"
    )
    r.set_defaults(func=run_roll)


def cluster_info(args: argparse.Namespace) -> dict[str, Any]:
    """What ``info -o json`` prints (see the module doc)."""
    conn = connect(args)
    a = admin(conn)
    with kafka_errors():
        d = a.describe_cluster(request_timeout=15).result()
    doc: dict[str, Any] = {
        "cluster_id": d.cluster_id,
        "controller_id": d.controller.id if d.controller is not None else None,
        "brokers": [
            {"id": n.id, "host": n.host, "port": n.port, "rack": n.rack or None}
            for n in sorted(d.nodes, key=lambda n: n.id)
        ],
    }
    with conn.wire() as w:
        try:
            doc["metadata_quorum"] = describe_quorum(w)
        except StoreError as exc:  # not served (an older Kafka) or not allowed: the rest still holds
            doc["metadata_quorum"] = None
            doc["metadata_quorum_error"] = exc.message
        doc["api_versions"] = {"broker": conn.bootstrap.split(",")[0].strip(), **api_versions(w)}
    return doc


def info(args: argparse.Namespace) -> int:
    doc = cluster_info(args)
    if json_wanted(args):
        print_json(doc)
        return 0
    console.print(f"cluster id {doc['cluster_id']}, controller {doc['controller_id']}", highlight=False)
    t = table("broker", "address", "rack", title="brokers")
    for b in doc["brokers"]:
        mark = " (controller)" if b["id"] == doc["controller_id"] else ""
        t.add_row(f"{b['id']}{mark}", f"{b['host']}:{b['port']}", b["rack"] or "-")
    console.print(t)
    q = doc["metadata_quorum"]
    if q is None:
        warn(args, f"metadata quorum not shown: {doc['metadata_quorum_error']}")
    else:
        qt = table(
            "replica",
            "role",
            "log end",
            "lag",
            "last fetch",
            "last caught up",
            title=f"metadata quorum (leader {q['leader_id']}, epoch {q['leader_epoch']}, "
            f"high watermark {q['high_watermark']})",
        )
        for role, replicas in (("voter", q["voters"]), ("observer", q["observers"])):
            for v in replicas:
                leader = " (leader)" if v["replica_id"] == q["leader_id"] else ""
                qt.add_row(
                    str(v["replica_id"]),
                    role + leader,
                    str(v["log_end_offset"]),
                    "-" if v["lag"] is None else str(v["lag"]),
                    _ms(v["last_fetch_timestamp"]),
                    _ms(v["last_caught_up_timestamp"]),
                )
        console.print(qt)
    av = doc["api_versions"]
    features = (
        ", ".join(f"{f['name']}={f['max_version_level']}" for f in av["finalized_features"])
        or "none reported"
    )
    console.print(
        f"broker {av['broker']}: {len(av['api_keys'])} APIs; finalized features: {features}"
        + ("" if args.apis else " (--apis lists the APIs)"),
        highlight=False,
    )
    if args.apis:
        at = table("api key", "name", "versions", title=f"APIs of {av['broker']}")
        for k in av["api_keys"]:
            at.add_row(str(k["api_key"]), k["name"] or "?", f"{k['min_version']}-{k['max_version']}")
        console.print(at)
    return 0


def _ms(ts: int) -> str:
    if ts < 0:
        return "-"
    return dt.datetime.fromtimestamp(ts / 1000).isoformat(sep=" ", timespec="seconds")


def _restart_with(template: str) -> Callable[[int], None]:
    if "{id}" not in template:
        raise StoreError("--restart-command must contain {id} (the node id of the broker to restart)")

    def restart(node_id: int) -> None:
        argv = shlex.split(template.replace("{id}", str(node_id)))
        try:
            done = subprocess.run(argv, check=False, capture_output=True, text=True)
        except OSError as exc:
            raise RollError(f"broker {node_id}: cannot run {argv[0]!r}: {exc.strerror}") from None
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RollError(f"broker {node_id}: {shlex.join(argv)} exited {done.returncode}: {why[0]}")

    return restart


def run_roll(args: argparse.Namespace) -> int:
    only = None
    if args.brokers:
        try:
            only = [int(b) for b in args.brokers.split(",") if b.strip()]
        except ValueError:
            raise StoreError(f"--brokers {args.brokers!r}: expected node ids, e.g. 1,2,3") from None
    restart = _restart_with(args.restart_command)
    conn = connect(args)
    done = roll(
        conn.client_config(logger=quiet_logger()),
        restart,
        timeout=args.timeout,
        elect=not args.no_elect,
        only=only,
        say=lambda line: console.print(line, highlight=False),
    )
    console.print(f"rolled {len(done)} brokers: {', '.join(map(str, done))}", highlight=False)
    return 0
