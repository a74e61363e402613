"""The types of the bytes a replay's host read back: from the dispatch that last wrote them.

A replay holds HAL calls, not tensors: the host maps ranges of buffers and reads bytes. What those bytes
are is known where a dispatch wrote them as a typed output (``engine.dispatch.typed_tensors``: its
executable's source, given with ``--sources`` or found beside the replay): ``WrittenTensors`` subscribes to
the device's snapshot observer and remembers, for each byte range of an allocation, the type of the last
typed output written there (and follows the device's copies: IREE reads results back through a staging
buffer the tensor is copied to); ``typed(buffer, offset, length, data)`` gives the read bytes that type when the
read is exactly such a tensor, else the bytes as they are (a replay claims no type it does not know)."""

from __future__ import annotations

import numpy as np

from engine.dispatch.snapshot import DispatchSnapshot, SnapshotSubscriber
from engine.dispatch.tensor_types import TensorType, view_bytes
from engine.dispatch.typed_tensors import Provenance, Role
from engine.runtime.hal.buffers import allocation_span
from engine.runtime.hal.device import DispatchRecord


class WrittenTensors(SnapshotSubscriber):
    def __init__(self):
        # (id of the allocation, start, end) -> the type of the typed output last written exactly there
        self.types: dict[tuple[int, int, int], TensorType] = {}
        self._allocations: dict[int, object] = {}  # keeps the allocations keyed by id alive

    def attach(self, device) -> None:
        """Follow the device's transfers (``Device.transfer_listeners``): a copy carries a type along."""
        device.transfer_listeners.append(self._transfer)

    def _key(self, buffer: object, offset: int, length: int) -> tuple[int, int, int]:
        allocation, start, end = allocation_span(buffer, offset, length)
        self._allocations[id(allocation)] = allocation
        return id(allocation), start, end

    def _forget(self, key: tuple[int, int, int]) -> None:
        for old in [k for k in self.types if k[0] == key[0] and k[1] < key[2] and key[1] < k[2]]:
            del self.types[old]

    def _transfer(self, transfer) -> None:
        target = transfer.target
        if target.buffer is None:
            return
        key = self._key(target.buffer, target.offset, target.length)
        carried = None
        source = transfer.source
        if transfer.kind == "copy" and source is not None and source.buffer is not None:
            s_alloc, s_start, _ = self._key(source.buffer, source.offset, source.length)
            # The typed tensors inside the copied range move with it, at the same distance from its start.
            carried = [
                ((key[0], key[1] + k[1] - s_start, key[1] + k[2] - s_start), t)
                for k, t in self.types.items()
                if k[0] == s_alloc and s_start <= k[1] and k[2] <= s_start + source.length
            ]
        self._forget(key)
        for k, t in carried or ():
            self.types[k] = t

    def wants_before(self, record: DispatchRecord) -> bool:
        return True  # what a dispatch wrote (and so which tensors are outputs) needs its bytes before

    def after(self, snapshot: DispatchSnapshot) -> None:
        for t in snapshot.tensors():
            if t.role != Role.OUTPUT:
                continue
            binding = snapshot.record.bindings[t.binding]
            key = self._key(binding.buffer, binding.offset + t.offset, t.length)
            self._forget(key)  # bytes rewritten untyped lose the type they had: never a stale type
            if t.provenance == Provenance.SOURCES:
                self.types[key] = t.type

    def typed(self, buffer: object, offset: int, length: int, data: np.ndarray) -> tuple[np.ndarray, str]:
        """``data`` (the ``length`` bytes read at ``offset`` of ``buffer``) as the tensor written there, and
        its type's text; the bytes themselves (``u8``) when no typed output was written exactly there."""
        allocation, start, end = allocation_span(buffer, offset, length)
        found = self.types.get((id(allocation), start, end))
        if found is None:
            return data, f"{length} bytes (untyped: no typed dispatch output wrote exactly these bytes)"
        array, _ = view_bytes(np.asarray(data).reshape(-1).view(np.uint8), found)
        return array, "x".join([*(str(d) for d in found.shape), found.element])


__all__ = ["WrittenTensors"]
