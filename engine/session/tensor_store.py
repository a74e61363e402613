"""Captured tensors with bounded memory: the newest stay in memory, older ones spill to disk.

A run with a million dispatches and tensor capture on must not grow without bound. Each tensor is stored
under a key (e.g. ``(dispatch_sequence, binding_index)``). When the tensors held in memory pass
``memory_limit_bytes`` or ``max_in_memory`` tensors, the least recently used ones are appended to one
spill file and dropped from memory; only a small index entry (offset, dtype, shape) stays. Reading a
spilled tensor maps its bytes from that file, so reads do not pull everything back in either.

Integer keys spilled in increasing order (what ``TensorCapture`` produces) are indexed in flat arrays, a
few dozen bytes per tensor; other keys use a dict.
"""

from __future__ import annotations

import bisect
import tempfile
from array import array
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
    def __init__(
        self,
        memory_limit_bytes: int = 256 << 20,
        spill_dir: str | Path | None = None,
        *,
        max_in_memory: int = 4096,
    ):
        self.memory_limit_bytes = memory_limit_bytes
        self.max_in_memory = max_in_memory
        self._tmp = None if spill_dir else tempfile.TemporaryDirectory(prefix="iree-lens-tensors-")
        self.spill_dir = Path(spill_dir or self._tmp.name)
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        self.spill_path = self.spill_dir / "tensors.bin"
        self._spill_file = open(self.spill_path, "w+b")  # noqa: SIM115 (lives as long as the store)
        self._memory: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        # key -> (offset, nbytes, dtype string, shape) in the spill file.
        self._spilled: dict[Hashable, tuple[int, int, str, tuple[int, ...]]] = {}
        # The same for increasing integer keys, as parallel flat arrays (dtype/shape interned).
        self._int_keys = array("q")
        self._int_offsets = array("q")
        self._int_nbytes = array("q")
        self._int_meta = array("i")
        self._int_dropped: set[int] = set()
        self._metas: list[tuple[str, tuple[int, ...]]] = []
        self._meta_ids: dict[tuple[str, tuple[int, ...]], int] = {}
        self._memory_bytes = 0
        self._spilled_bytes = 0

    def __len__(self) -> int:
        return len(self._memory) + len(self._spilled) + len(self._int_keys) - len(self._int_dropped)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._memory or key in self._spilled or self._int_row(key) is not None

    def _int_row(self, key: Hashable) -> int | None:
        if type(key) is not int or key in self._int_dropped:
            return None
        row = bisect.bisect_left(self._int_keys, key)
        return row if row < len(self._int_keys) and self._int_keys[row] == key else None

    def put(self, key: Hashable, array: np.ndarray) -> None:
        """Keep a private copy of ``array`` under ``key`` (the caller's buffer may be reused afterwards)."""
        self.discard(key)
        if type(key) is int:
            self._int_dropped.discard(key)
        copy = np.array(array, copy=True)
        self._memory[key] = copy
        self._memory_bytes += copy.nbytes
        if self._memory_bytes > self.memory_limit_bytes or len(self._memory) > self.max_in_memory:
            self._spill()

    def get(self, key: Hashable) -> np.ndarray:
        if key in self._memory:
            self._memory.move_to_end(key)
            return self._memory[key]
        row = self._int_row(key)
        if row is not None:
            dtype, shape = self._metas[self._int_meta[row]]
            offset, nbytes = self._int_offsets[row], self._int_nbytes[row]
        elif key in self._spilled:
            offset, nbytes, dtype, shape = self._spilled[key]
        else:
            raise KeyError(key)
        if nbytes == 0:
            return np.zeros(shape, dtype=np.dtype(dtype))
        return np.memmap(self.spill_path, dtype=np.dtype(dtype), mode="r", offset=offset, shape=shape)

    def discard(self, key: Hashable) -> None:
        """Forget a tensor (the bytes of a spilled one stay in the file until the store closes)."""
        if key in self._memory:
            self._memory_bytes -= self._memory.pop(key).nbytes
        elif key in self._spilled:
            self._spilled.pop(key)
        elif self._int_row(key) is not None:
            self._int_dropped.add(key)

    def keys(self) -> list[Hashable]:
        ints = [k for k in self._int_keys if k not in self._int_dropped]
        return [*ints, *self._spilled.keys(), *self._memory.keys()]

    def stats(self) -> StoreStats:
        spilled = len(self) - len(self._memory)
        return StoreStats(len(self), len(self._memory), spilled, self._memory_bytes, self._spilled_bytes)

    def _spill(self) -> None:
        """Move the older half of what is in memory to the spill file, in one sequential write."""
        keep_bytes = self.memory_limit_bytes // 2
        keep_count = self.max_in_memory // 2
        f = self._spill_file
        f.seek(0, 2)
        while self._memory and (self._memory_bytes > keep_bytes or len(self._memory) > keep_count):
            key, array = self._memory.popitem(last=False)
            offset = f.tell()
            f.write(array.tobytes())
            if type(key) is int and (not self._int_keys or key > self._int_keys[-1]):
                meta = (array.dtype.str, array.shape)
                meta_id = self._meta_ids.setdefault(meta, len(self._metas))
                if meta_id == len(self._metas):
                    self._metas.append(meta)
                self._int_keys.append(key)
                self._int_offsets.append(offset)
                self._int_nbytes.append(array.nbytes)
                self._int_meta.append(meta_id)
            else:
                self._spilled[key] = (offset, array.nbytes, array.dtype.str, array.shape)
            self._memory_bytes -= array.nbytes
            self._spilled_bytes += array.nbytes
        f.flush()  # spilled tensors are read back through a separate memory map

    def close(self) -> None:
        self._memory.clear()
        self._spilled.clear()
        del self._int_keys[:], self._int_offsets[:], self._int_nbytes[:], self._int_meta[:]
        self._spill_file.close()
        if self._tmp is not None:
            self._tmp.cleanup()
