"""The main module's globals as a debug session answers them: by the names its compilation gave them
(``engine.runtime.vmfb.global_names``), each with its value now, and a buffer global's bytes, typed when the
program declares the tensor it holds. State lives across calls (a KV cache, a step counter), so this is what
a stateful program's user looks at between calls as much as at a stop.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.dispatch.tensor_types import RAW, TensorType
from engine.runtime.hal.buffers import HalBuffer, HalBufferView
from engine.runtime.vm.context import ModuleInstance
from engine.runtime.vm.trace import describe_ref
from engine.runtime.vmfb.global_names import GlobalNames, NamedGlobal, read_global_names
from engine.session.protocol import (
    GlobalBuffer,
    Globals,
    GlobalVariable,
    ReadGlobalBuffer,
    ReadGlobals,
    TensorRef,
)

_FORMATS = {"i32": "<i", "i64": "<q", "f32": "<f", "f64": "<d"}


def primitive_text(kind: str, data: object) -> str | None:
    """A primitive global's bytes (``data``: bytes, at least the kind's size) as the number ``kind`` (i32,
    i64, f32, f64) is; None when there are no bytes (a watch's absent side)."""
    if not isinstance(data, bytes | bytearray | memoryview | np.ndarray):
        return None
    (value,) = struct.unpack_from(_FORMATS[kind], bytes(data))
    return f"{value:.9g}" if kind == "f32" else repr(value) if kind == "f64" else str(value)


class GlobalsError(Exception):
    """A global that cannot be read as asked (no such ordinal, not a buffer)."""


def _buffer_of(ref: object, storage_owner: Callable[[object], HalBuffer | None]) -> HalBuffer | None:
    if isinstance(ref, HalBufferView):
        return ref.buffer
    return ref if isinstance(ref, HalBuffer) else storage_owner(ref)


class SessionGlobals:
    """The globals of ``instance`` (the module opened from ``module_path``). Names are read at the first
    question, from the module's folder, or from the folder of a rebuild of its program (``rebuilt()``: the
    session's rebuild of the executables' sources, once it found them identical), read again when one comes."""

    def __init__(
        self,
        module_path: str,
        instance: ModuleInstance,
        rebuilt: Callable[[], str | None] = lambda: None,
        storage_owner: Callable[[object], HalBuffer | None] = lambda ref: None,
    ):
        self._module_path = Path(module_path)
        self._instance = instance
        self._rebuilt = rebuilt
        self._storage_owner = storage_owner  # an inline build's !vm.buffer globals are storage of HAL buffers
        self._names: GlobalNames | None = None
        self._read_from: tuple[Path, ...] = ()

    @property
    def names(self) -> GlobalNames:
        rebuilt = self._rebuilt()
        folders = (self._module_path.parent, *((Path(rebuilt),) if rebuilt else ()))
        if self._names is None or (not self._names.globals and folders != self._read_from):
            self._names = read_global_names(list(folders), self._module_path.stem, self._instance.module)
            self._read_from = folders
        return self._names

    def answer(self, query: ReadGlobals) -> Globals:
        instance = self._instance
        refs = tuple(describe_ref(r) for r in instance.global_refs)
        names = self.names
        variables = tuple(self._variable(g, refs) for g in names.in_display_order)
        return Globals(query, bytes(instance.rwdata), refs, variables, names.note)

    def _variable(self, named: NamedGlobal, refs: tuple[str, ...]) -> GlobalVariable:
        if named.kind != "ref":
            text = primitive_text(named.kind, self._instance.rwdata[named.index : named.index + 8])
            return GlobalVariable(named.name, named.kind, named.index, text or "")
        buffer = _buffer_of(self._instance.global_refs[named.index], self._storage_owner)
        if buffer is None:
            return GlobalVariable(named.name, "ref", named.index, refs[named.index])
        length = int(buffer.byte_length)
        tensor_type, _ = self._fitting(named.name, length)
        return GlobalVariable(named.name, "ref", named.index, refs[named.index], length,
                              str(tensor_type) if tensor_type is not None else "")  # fmt: skip

    def holders(self) -> list[tuple[object, int, int, str]]:
        """(allocation, start, end, name) of each buffer a ref global holds now: what a dispatch binding lying
        in it is (``@state``; ``.refs[3]`` unnamed)."""
        named = {g.index: g.name for g in self.names.globals if g.kind == "ref"}
        out = []
        for k, ref in enumerate(self._instance.global_refs):
            buffer = _buffer_of(ref, self._storage_owner)
            if buffer is not None:
                start = int(buffer.byte_offset)
                name = f"@{named[k]}" if k in named else f".refs[{k}]"
                out.append((buffer.allocation, start, start + int(buffer.byte_length), name))
        return out

    def held(self, ordinal: int) -> tuple[str, HalBuffer, TensorType | None]:
        """(name, buffer, tensor type when the program declares one its bytes fit) of the buffer ref global
        ``ordinal`` holds now."""
        refs = self._instance.global_refs
        if not 0 <= ordinal < len(refs):
            raise GlobalsError(f"no ref global {ordinal}: the module has {len(refs)}")
        named = {g.index: g.name for g in self.names.globals if g.kind == "ref"}
        name = named.get(ordinal, f".refs[{ordinal}]")
        buffer = _buffer_of(refs[ordinal], self._storage_owner)
        if buffer is None:
            raise GlobalsError(f"{name} holds {describe_ref(refs[ordinal])}, not a buffer")
        return name, buffer, self._fitting(name, int(buffer.byte_length))[0]

    def buffer(self, query: ReadGlobalBuffer, copy: bool = True) -> GlobalBuffer:
        """The bytes of ref global ``query.ordinal`` now, typed by the flow phase's tensor when they fit it."""
        name, buffer, _ = self.held(query.ordinal)
        data = buffer.read_view(0, buffer.byte_length)
        data = np.array(data, copy=True) if copy else data
        array, element, note = self._typed(data, name)
        return GlobalBuffer(query, name, TensorRef(array.shape, array.dtype.str, element, array=array), note)

    def _fitting(self, name: str, nbytes: int) -> tuple[TensorType | None, str]:
        """The tensor type the flow phase declares for buffer global ``name`` when a buffer of ``nbytes`` is
        exactly that tensor; else None and why its bytes are not typed."""
        declared = self.names.tensor_type(name)
        if not declared:
            if not self.names.globals:
                return None, self.names.note
            return None, "the program declares no static tensor of this name"
        try:
            tensor_type = TensorType.parse(declared, source="flow")
        except ValueError:
            return None, f"the program declares @{name} as {declared}, not read here"
        if tensor_type.byte_length != nbytes:
            # Larger: IREE packs the program's constants into one buffer named after one of them.
            held = "more (IREE packs constants together)" if nbytes > tensor_type.byte_length else "another layout"
            return None, (f"the program declares @{name} as {declared} ({tensor_type.byte_length} bytes); this "
                          f"buffer holds {held}")  # fmt: skip
        return tensor_type, f"{declared}, as the program declares @{name} (its flow phase)"

    def _typed(self, data: np.ndarray, name: str) -> tuple[np.ndarray, str, str]:
        """(array, element type, what it is): the bytes as the declared tensor when they are exactly that
        tensor's, else the bytes, with the reason."""
        tensor_type, why = self._fitting(name, data.size)
        if tensor_type is None:
            return data, RAW, f"{data.size} bytes, untyped: {why}"
        return data.view(tensor_type.dtype).reshape(tensor_type.shape), tensor_type.element, why


def describe_bytes_change(before: bytes | None, after: bytes | None, tensor_type: TensorType | None) -> tuple[str | None, str | None, str]:
    """(element before, element after, which) for a buffer's bytes that changed: the first element whose
    bytes differ (NaN-safe: bytes, not values), as ``tensor_type`` reads them or as bytes when the type is
    not known; None for a side where the buffer did not exist."""
    if before is None or after is None or len(before) != len(after):
        which = "a write of the same bytes is not a change" if before is None else "the buffer is gone"
        return None, None, which
    dtype = tensor_type.dtype if tensor_type is not None else np.dtype(np.uint8)
    size = dtype.itemsize
    count = len(after) // size
    old = np.frombuffer(before, np.uint8, count * size).reshape(count, size)
    new = np.frombuffer(after, np.uint8, count * size).reshape(count, size)
    differ = np.flatnonzero((old != new).any(axis=1))
    if differ.size == 0:
        return None, None, "no whole element differs"
    k = int(differ[0])
    a, b = old[k].view(dtype)[0], new[k].view(dtype)[0]
    if tensor_type is not None and count == 1:  # one element watched: its values say it all
        return _element_text(a), _element_text(b), ""
    if tensor_type is None:
        return str(a), str(b), f"byte {k} (untyped); {differ.size} of {count} bytes differ"
    index = ", ".join(str(int(i)) for i in np.unravel_index(k, tensor_type.shape)) if tensor_type.shape else ""
    return (_element_text(a), _element_text(b),
            f"element [{index}] of {tensor_type}; {differ.size} of {count} elements differ")  # fmt: skip


def _element_text(value: np.generic) -> str:
    return f"{float(value):.9g}" if np.issubdtype(value.dtype, np.floating) else str(value.item())
