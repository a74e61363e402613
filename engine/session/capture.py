"""Tensor capture: every dispatch's bindings kept after it runs, in bounded memory.

``TensorCapture`` is a HAL ``DispatchObserver``: after each dispatch it stores a copy of each binding's
bytes in a ``TensorStore`` under ``(sequence, binding index)`` and appends the dispatch's metadata to
columnar arrays (export, workgroup count, binding count), so a run with a million dispatches keeps a
bounded number of tensors in memory and a few bytes per dispatch of metadata.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from engine.runtime.hal.device import DispatchObserver, DispatchRecord
from engine.session.tensor_store import TensorStore


@dataclass(frozen=True)
class CapturedDispatch:
    sequence: int
    export_name: str
    workgroup_count: tuple[int, int, int]
    binding_count: int


class TensorCapture(DispatchObserver):
    def __init__(self, store: TensorStore | None = None, *, max_binding_bytes: int | None = None):
        self.store = store if store is not None else TensorStore()  # an empty store is falsy
        self.max_binding_bytes = max_binding_bytes
        self._export_names: list[str] = []
        self._export_ids: dict[str, int] = {}
        self._sequence = array("q")
        self._export = array("i")
        self._workgroups = array("I")  # x, y, z per dispatch
        self._binding_count = array("H")

    def __len__(self) -> int:
        return len(self._sequence)

    def dispatch(self, i: int) -> CapturedDispatch:
        """The ``i``-th captured dispatch."""
        x, y, z = self._workgroups[3 * i : 3 * i + 3]
        return CapturedDispatch(
            self._sequence[i], self._export_names[self._export[i]], (x, y, z), self._binding_count[i]
        )

    def before_dispatch(self, record: DispatchRecord) -> None:
        pass

    def after_dispatch(self, record: DispatchRecord) -> None:
        export_id = self._export_ids.setdefault(record.export_name, len(self._export_names))
        if export_id == len(self._export_names):
            self._export_names.append(record.export_name)
        self._sequence.append(record.sequence)
        self._export.append(export_id)
        self._workgroups.extend(record.workgroup_count)
        self._binding_count.append(len(record.bindings))
        for binding in record.bindings:
            if self.max_binding_bytes is not None and binding.length > self.max_binding_bytes:
                continue
            self.store.put(self.key(record.sequence, binding.index), binding.data)

    def dispatch_failed(self, record: DispatchRecord, error: Exception) -> None:
        pass

    @staticmethod
    def key(sequence: int, index: int) -> int:
        """The store key of one binding: one increasing integer, which the store indexes compactly."""
        return (sequence << 16) | index

    def binding(self, sequence: int, index: int):
        """The bytes binding ``index`` held after dispatch ``sequence`` (uint8; reinterpret as needed)."""
        return self.store.get(self.key(sequence, index))
