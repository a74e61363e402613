"""Captured tensors with bounded memory: the newest stay in memory, older ones spill to ``.npy`` files.

A run with a million dispatches and tensor capture on must not grow without bound. Each tensor is stored
under a key (e.g. ``(dispatch_index, "output", binding)``); when the bytes held in memory pass
``memory_limit_bytes``, the least recently used tensors are written to ``spill_dir`` and dropped from memory.
Reading a spilled tensor memory-maps its file, so even reads do not pull everything back in.
"""

from __future__ import annotations

import tempfile
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class StoreStats:
    tensors: int
    in_memory: int
    spilled: int
    memory_bytes: int
    spilled_bytes: int


class TensorStore:
    def __init__(self, memory_limit_bytes: int = 256 << 20, spill_dir: str | Path | None = None):
        self.memory_limit_bytes = memory_limit_bytes
        self._tmp = None if spill_dir else tempfile.TemporaryDirectory(prefix="iree-lens-tensors-")
        self.spill_dir = Path(spill_dir or self._tmp.name)
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        self._memory: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._spilled: dict[Hashable, Path] = {}
        self._memory_bytes = 0
        self._spilled_bytes = 0

    def __len__(self) -> int:
        return len(self._memory) + len(self._spilled)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._memory or key in self._spilled

    def put(self, key: Hashable, array: np.ndarray) -> None:
        """Keep a private copy of ``array`` under ``key`` (the caller's buffer may be reused afterwards)."""
        self.discard(key)
        copy = np.array(array, copy=True)
        self._memory[key] = copy
        self._memory_bytes += copy.nbytes
        self._spill_until_within_limit()

    def get(self, key: Hashable) -> np.ndarray:
        if key in self._memory:
            self._memory.move_to_end(key)
            return self._memory[key]
        if key in self._spilled:
            return np.load(self._spilled[key], mmap_mode="r")
        raise KeyError(key)

    def discard(self, key: Hashable) -> None:
        if key in self._memory:
            self._memory_bytes -= self._memory.pop(key).nbytes
        elif key in self._spilled:
            path = self._spilled.pop(key)
            self._spilled_bytes -= path.stat().st_size
            path.unlink(missing_ok=True)

    def keys(self) -> list[Hashable]:
        return [*self._spilled.keys(), *self._memory.keys()]

    def stats(self) -> StoreStats:
        return StoreStats(
            len(self), len(self._memory), len(self._spilled), self._memory_bytes, self._spilled_bytes
        )

    def _spill_until_within_limit(self) -> None:
        while self._memory_bytes > self.memory_limit_bytes and len(self._memory) > 1:
            key, array = self._memory.popitem(last=False)
            path = self.spill_dir / f"t{len(self._spilled)}_{abs(hash(key)) & 0xFFFFFFFF:08x}.npy"
            np.save(path, array, allow_pickle=False)
            self._spilled[key] = path
            self._memory_bytes -= array.nbytes
            self._spilled_bytes += path.stat().st_size

    def close(self) -> None:
        self._memory.clear()
        self._spilled.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
