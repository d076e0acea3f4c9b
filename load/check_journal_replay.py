"""A metadata journal written by one checkout's code, replayed by another's (journal compatibility
of the pinned replicated-method ids, framework/metadata/quorum.py REPLICATED_METHODS).

    python load/check_journal_replay.py OLD_CHECKOUT NEW_CHECKOUT

Each checkout a directory holding ``framework/`` (e.g. ``git archive <commit> framework deploy``).
A one-voter cluster on the old code creates a topic and is SIGKILLed (the journal, no snapshot),
then the new code starts on the same data dir and must list the topic. Run it when the list of
replicated methods changes: with ids that moved, the new broker dies replaying the old journal
(e.g. ``init_cluster() takes 2 positional arguments but 6 were given``).
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from framework.client.admin import live_broker_ids
from testing import free_port, wait_for

d = Path(tempfile.mkdtemp(prefix="nvreplay"))
kport, rport = free_port("127.0.0.1"), free_port("127.0.0.1")
PY = "/work/main/.venv/bin/python"


def start(pythonpath: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.Popen(
        [
            PY,
            "-c",
            "import sys; from framework.cli.main import main; sys.exit(main())",
            "broker",
            "--node-id",
            "1",
            "--listen",
            f"127.0.0.1:{kport}",
            "--data-dir",
            str(d),
            "--voters",
            f"1@127.0.0.1:{rport}",
        ],
        env=env,
        cwd=pythonpath,
        stdout=open(d.parent / (d.name + ".log"), "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


boot = f"127.0.0.1:{kport}"
p = start(sys.argv[1])
wait_for(lambda: live_broker_ids(boot) == [1], 60, 0.3, "base broker up")
a = AdminClient({"bootstrap.servers": boot})
a.create_topics([NewTopic("before", 3, 1)])["before"].result(30)
time.sleep(1)
os.killpg(p.pid, signal.SIGKILL)
p.wait()
print(
    "journal bytes",
    (d / "__cluster" / "raft.journal").stat().st_size,
    "snapshot",
    (d / "__cluster" / "raft.snapshot").exists(),
)
p = start(sys.argv[2])
try:
    wait_for(lambda: live_broker_ids(boot) == [1], 60, 0.3, "new broker up")
    md = AdminClient({"bootstrap.servers": boot}).list_topics(timeout=10)
    print(
        "topics after replay:",
        sorted(t for t in md.topics if not t.startswith("__")),
        {t: len(md.topics[t].partitions) for t in md.topics if t == "before"},
    )
finally:
    os.killpg(p.pid, signal.SIGKILL)
