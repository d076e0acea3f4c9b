"""Producer id allocation: unique across the cluster and across restarts.

A broker reserves ids in blocks of ``producer.id.block.size`` and hands them out one by one.
The next free block start is persisted (``__metadata/producer-id-block``, written to a
temporary file, fsynced and renamed) *before* any id of the new block is used, so a restart
never hands out an id twice; at most the unused rest of a block is skipped. In a cluster each
broker keeps its own counter and hands out ``counter << 10 | node.id`` (node ids below 1024), so
ids are unique across brokers without a round trip to the controller.
"""

from __future__ import annotations

import threading
from pathlib import Path

from framework.errors import StoreError
from framework.storage.files import write_durably


class ProducerIdManager:
    def __init__(
        self, metadata_dir: Path, block_size: int = 1000, node_id: int = 0, node_bits: int = 0
    ) -> None:
        self.path = metadata_dir / "producer-id-block"
        self.block_size = block_size
        self.node_id = node_id
        # cluster: ids are (local counter << node_bits) | node id, unique without coordination
        self.node_bits = node_bits
        if node_bits and not 0 <= node_id < (1 << node_bits):
            raise StoreError(f"node.id {node_id} must be below {1 << node_bits} in a cluster")
        self._next = 0
        self._end = 0  # exclusive end of the current block
        self._lock = threading.Lock()

    def _reserve_block(self) -> None:
        try:
            start = int(self.path.read_text().strip())
        except FileNotFoundError:
            start = 0
        except ValueError:
            start = -1
        if start < 0:  # -1 means "no producer id" to clients: never hand out negatives
            raise StoreError(f"{self.path} is damaged; producer ids cannot be allocated safely")
        end = start + self.block_size
        # the rename is made durable too: otherwise a power loss could bring back the old block
        write_durably(self.path, str(end).encode())
        self._next, self._end = start, end

    def next_id(self) -> int:
        with self._lock:
            if self._next >= self._end:
                self._reserve_block()
            pid = self._next
            self._next += 1
            return (pid << self.node_bits) | self.node_id if self.node_bits else pid
