"""pysyncobj 0.3.17 read-only node spike: 3 voters + 1 readonly node in one process, manual ticks."""

import sys
import tempfile
import time
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated  # type: ignore[import-untyped]

PW = sys.argv[1] if len(sys.argv) > 1 else None
d = tempfile.mkdtemp()


class S(SyncObj):  # type: ignore[misc]
    def __init__(self, me: str | None, others: list[str], name: str) -> None:
        conf = SyncObjConf(
            autoTick=False,
            journalFile=f"{d}/{name}.j",
            fullDumpFile=f"{d}/{name}.snap",
            logCompactionMinEntries=20,
            logCompactionMinTime=1,
            useFork=False,
            dynamicMembershipChange=False,
            commandsWaitLeader=True,
            password=PW,
            connectionRetryTime=0.5,
            raftMinTimeout=0.4,
            raftMaxTimeout=0.8,
        )
        super().__init__(me, others, conf)
        self.items: list[
            int | str
        ] = []  # after __init__: pysyncobj's default serializer skips earlier attributes

    @replicated  # type: ignore[untyped-decorator]
    def add(self, x: int | str) -> int:
        self.items.append(x)
        return len(self.items)


addrs = [f"127.0.0.1:{p}" for p in (29301, 29302, 29303)]
voters = [S(a, [b for b in addrs if b != a], f"v{i}") for i, a in enumerate(addrs)]


def tick(objs: list[S], secs: float) -> None:
    end = time.time() + secs
    while time.time() < end:
        for o in objs:
            o.doTick(0.0)
        time.sleep(0.005)


tick(voters, 3)
leader = next(v for v in voters if v._isLeader())
res: dict[str, Any] = {}
for i in range(50):  # > logCompactionMinEntries: the leader compacts its log
    leader.add(i, callback=lambda r, e: None)
tick(voters, 3)
print("voter items", [len(v.items) for v in voters])
ro = S(None, addrs, "ro")  # started after compaction: must get a snapshot
objs = [*voters, ro]
tick(objs, 4)
print(
    "readonly items after join",
    len(ro.items),
    "lastApplied",
    ro.raftLastApplied,
    "leader log idx",
    leader.raftCommitIndex,
    "ro log start",
    ro._SyncObj__raftLog[0][1],
    "leader seen by readonly:",
    ro._getLeader(),
)
print("leader's readonlyNodes", [n.id for n in leader.readonlyNodes])
ro.add("from-ro", callback=lambda r, e: res.setdefault("ro", (r, e)))
tick(objs, 2)
print(
    "readonly proposal result",
    res.get("ro"),
    "SUCCESS=",
    FAIL_REASON.SUCCESS,
    "on voters:",
    ["from-ro" in v.items for v in voters],
    "on ro:",
    "from-ro" in ro.items,
)
# leader failover: readonly must follow the new leader, and its proposals go there
old = leader
objs2 = [v for v in voters if v is not old] + [ro]
tick(objs2, 4)
nl = next(v for v in voters if v is not old and v._isLeader())
ro.add("after-failover", callback=lambda r, e: res.setdefault("ro2", (r, e)))
tick(objs2, 3)
print(
    "after failover: ro leader",
    ro._getLeader(),
    "new leader",
    nl.selfNode,
    "result",
    res.get("ro2"),
    "ro has it",
    "after-failover" in ro.items,
)
print("matchIndex of ro on leader", {n.id: i for n, i in nl._SyncObj__raftMatchIndex.items()})
print("lastResponseTime keys on leader", [n.id for n in nl._SyncObj__lastResponseTime])
for o in [*voters, ro]:
    o.destroy()
