"""Every read or write of pysyncobj's internals, in one class (pysyncobj is pinned in pyproject.toml).

The metadata quorum (``quorum.ClusterState``) is a pysyncobj ``SyncObj`` and uses its public API
directly: the constructor and ``SyncObjConf``, ``@replicated``, ``doTick``, ``isReady``,
``destroy``, ``raftCommitIndex``, ``raftLastApplied``, ``raftCurrentTerm``, ``otherNodes`` and
``Node.id``. What DescribeQuorum, the controller's broker sessions and the journal's pinned
method ids need besides is not public, and :class:`SyncObjInternals` is the only code that
touches it:

==============================  ===============================================================
``_SyncObj__getCurrentLogIndex``  the index of the last entry of this node's Raft log
``_SyncObj__raftMatchIndex``      the leader's match index per follower: {Node: int}
``_SyncObj__lastResponseTime``    when the leader last heard from each follower: {Node: float},
                                  on pysyncobj's clock ``pysyncobj.monotonic.monotonic``
                                  (``CLOCK_MONOTONIC_RAW`` on Linux, not ``time.monotonic``:
                                  the two drift apart by tens of ppm, so only ages computed
                                  on pysyncobj's clock leave here)
``_isLeader()``                   this node is in the Raft leader state
``_getLeader()``                  the last leader this node heard of: a Node, or None
``_methodToID``, ``_idToMethod``  the numbering of the ``@replicated`` methods ("name_v0" -> id,
                                  id -> bound method), read when proposing and when applying
==============================  ===============================================================

The two dicts of the leader are empty on a follower. Importing this module also undoes
pysyncobj's replacement of ``socket.inet_ntop`` (see below).

``tests/unit/metadata/test_pysyncobj_adapter.py`` builds real SyncObj nodes and fails when any
of these moves or changes type: upgrade pysyncobj only with that test passing.

Thread-safety: the quorum ticks pysyncobj on the event loop (``autoTick=False``); call these
from there.
"""

from __future__ import annotations

import _socket
import socket
from collections.abc import Callable, Mapping
from typing import Any

from pysyncobj import SyncObj  # type: ignore[import-untyped]
from pysyncobj.monotonic import monotonic as raft_clock  # type: ignore[import-untyped]

# pysyncobj's win_inet_pton module replaces socket.inet_ntop with a Windows-only function on
# every OS (its assignment is not under its `os.name == "nt"` test), so after importing it any
# code of the process calling socket.inet_ntop (psutil's connection listing, for one) raised
# TypeError. The C implementation is still in _socket: put it back.
socket.inet_ntop = _socket.inet_ntop

# pysyncobj's name-mangled privates of SyncObj, as the contract test checks them
LOG_INDEX = "_SyncObj__getCurrentLogIndex"
MATCH_INDEX = "_SyncObj__raftMatchIndex"
LAST_RESPONSE = "_SyncObj__lastResponseTime"
METHOD_TO_ID = "_methodToID"
ID_TO_METHOD = "_idToMethod"


class SyncObjInternals:
    """pysyncobj's private state of one ``SyncObj`` (``node``), read and written for the quorum."""

    __slots__ = ("node",)

    def __init__(self, node: SyncObj) -> None:
        self.node = node

    def log_end_index(self) -> int:
        """The index of the last entry in this node's Raft log (its log end)."""
        return int(getattr(self.node, LOG_INDEX)())

    def match_index(self) -> dict[Any, int]:
        """The leader's match index of each follower (Node -> index); empty unless leading."""
        found: dict[Any, int] = getattr(self.node, MATCH_INDEX, {}) if self.is_leader() else {}
        return found

    def silence(self) -> dict[Any, float]:
        """Seconds since the leader last heard from each follower (Node -> seconds); empty
        unless leading. Measured on pysyncobj's own clock, which stamped the responses."""
        if not self.is_leader():
            return {}
        heard: dict[Any, float] = getattr(self.node, LAST_RESPONSE, {})
        now = raft_clock()
        return {node: now - t for node, t in heard.items()}

    def is_leader(self) -> bool:
        return bool(self.node._isLeader())

    def leader_address(self) -> str | None:
        """HOST:PORT of the last leader this node heard of (None: none yet)."""
        leader = self.node._getLeader()
        return None if leader is None else str(getattr(leader, "id", leader))

    def method_ids(self) -> dict[str, int]:
        """pysyncobj's numbering of the ``@replicated`` methods ("name_v0" -> id)."""
        found: dict[str, int] = vars(self.node)[METHOD_TO_ID]
        return dict(found)

    def set_method_ids(self, ids: Mapping[str, int]) -> None:
        """Number the ``@replicated`` methods as ``ids`` says: what proposals are journalled as
        and what a journalled id applies (set before the first tick applies anything)."""
        methods: dict[int, Callable[..., Any]] = {i: getattr(self.node, name) for name, i in ids.items()}
        setattr(self.node, METHOD_TO_ID, dict(ids))
        setattr(self.node, ID_TO_METHOD, methods)
