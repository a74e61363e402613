"""Values a VM register, global or list can hold besides plain numbers: ``!vm.buffer`` and ``!vm.list``.

Every object stored in a ref register is a Python object with a ``vm_type_name`` (the type-table
spelling without the ``!``: ``vm.buffer``, ``vm.list``, ``hal.buffer``, ``hal.device``...). ``None`` is the
null ref. Native modules (``hal``, ``check``) define their own ref classes the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

# Copies an array's bytes for a checkpoint (time travel's store shares a copy while the bytes are unchanged).
KeepBytes = Callable[[np.ndarray], np.ndarray]


@runtime_checkable
class Checkpointable(Protocol):
    """A ref whose state a checkpoint of a run saves and restores in place (``engine.timetravel.snapshot``):
    every ref class of the VM and the HAL offers these. ``checkpoint(keep)`` returns the object's own
    mutable state (bytes copied with ``keep``), ``restore_checkpoint(state)`` puts it back in place, and
    ``checkpoint_refs()`` names the objects whose state goes with it (a buffer's allocation, a list's items).
    Immutable or native objects return ``None`` and keep nothing."""

    def checkpoint(self, keep: KeepBytes) -> Any: ...

    def restore_checkpoint(self, state: Any) -> None: ...

    def checkpoint_refs(self) -> Iterable[Any]: ...


class KeepsNothing:
    """``Checkpointable`` for a ref with no state a checkpoint need keep (it does not change while a program
    runs, or is never created by our devices)."""

    def checkpoint(self, keep: KeepBytes) -> None:
        return None

    def restore_checkpoint(self, state: None) -> None:
        pass

    def checkpoint_refs(self) -> tuple:
        return ()


def ref_type_name(ref: object) -> str:
    """The VM type name of a ref value (``None`` for the null ref)."""
    return getattr(ref, "vm_type_name", type(ref).__name__)


def type_matches(ref: object, type_name: str) -> bool:
    """Whether ``ref`` may be stored where the type table says ``type_name`` (e.g. ``!hal.buffer``).

    Null matches everything; ``!vm.opaque``/``!vm.ref<?>`` match any ref; ``!vm.list<...>`` matches any list.
    """
    if ref is None:
        return True
    wanted = type_name.lstrip("!")
    if wanted in ("vm.opaque", "vm.ref<?>", "?"):
        return True
    have = ref_type_name(ref)
    if wanted.startswith("vm.list"):
        return have == "vm.list"
    if wanted.startswith("vm.ref<") and wanted.endswith(">"):
        wanted = wanted[len("vm.ref<") : -1].lstrip("!")
    return have == wanted


@dataclass(eq=False)
class VmBuffer:
    """A ``!vm.buffer``: bytes the VM can load from and (when ``mutable``) store to.

    ``data`` is a 1-D ``uint8`` numpy array; for rodata it is a view of the module's (private, writable)
    mapping, so no bytes are copied. ``mutable`` is the VM's access rule (rodata is not mutable for
    ``vm.buffer.store``), independent of whether the memory itself can be written.
    """

    data: np.ndarray
    mutable: bool = True
    origin: str = ""  # e.g. "rodata 3", "alloc", "clone"
    name: str = ""  # what the module calls a rodata segment, where it does (an executable's name)
    vm_type_name = "vm.buffer"

    @classmethod
    def allocate(cls, length: int, origin: str = "alloc") -> VmBuffer:
        return cls(np.zeros(length, dtype=np.uint8), True, origin)

    @property
    def length(self) -> int:
        return int(self.data.shape[0])

    def tobytes(self) -> bytes:
        return self.data.tobytes()

    def as_text(self) -> str:
        """The buffer as UTF-8 text (how strings reach native modules: rodata without a NUL)."""
        return self.data.tobytes().decode("utf-8", errors="replace")

    # -- checkpoints (time travel, ``engine.timetravel.snapshot``): see ``Checkpointable``

    def checkpoint(self, keep: KeepBytes) -> np.ndarray | None:
        """The bytes, when the VM can store into them (rodata's are not state)."""
        return keep(self.data) if self.mutable and self.data.flags.writeable else None

    def restore_checkpoint(self, state: np.ndarray | None) -> None:
        if state is not None:
            self.data[...] = state

    def checkpoint_refs(self) -> tuple:
        return ()

    def __repr__(self) -> str:
        return f"VmBuffer({self.length} bytes, {'mutable' if self.mutable else 'read-only'}, {self.origin})"


@dataclass(eq=False)
class VmList:
    """A ``!vm.list<T>``: ``element_type`` is the type-table name of T (``i32``, ``!vm.buffer``, ``!vm.opaque``...)."""

    element_type: str
    items: list[Any] = field(default_factory=list)
    capacity: int = 0
    vm_type_name = "vm.list"

    def __len__(self) -> int:
        return len(self.items)

    def checkpoint(self, keep: KeepBytes) -> tuple:
        return tuple(self.items), self.capacity

    def restore_checkpoint(self, state: tuple) -> None:
        items, self.capacity = state
        self.items[:] = items

    def checkpoint_refs(self) -> list[Any]:
        return self.items

    def __repr__(self) -> str:
        return f"VmList<{self.element_type}>(size={len(self.items)})"
