"""Types for untyped binding bytes: ``4x16xf32`` and the numpy dtype that holds it.

A binding is a byte range; a user wants a tensor. The sources of a type, most trusted first, are the trace
points' buffer views, the executable's interface in its source (``binding_interfaces``),
IREE's dispatch names (``..._4x16_f32``, ``name_candidates``) and a user override. Whatever the source,
``view_bytes`` never fails: bytes that do not fit the type stay raw ``u8``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from engine.runtime.element_types import (
    BOOLEAN,
    ML_DTYPE_NAMES,
    ElementType,
    make,
    ml_dtype,
    parse_element_type,
    unpack,
)

# Element type name (IREE's spelling) -> numpy dtype used for arithmetic on it.
_DTYPES: dict[str, np.dtype] = {
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "si8": np.dtype(np.int8),
    "ui8": np.dtype(np.uint8),
    "u8": np.dtype(np.uint8),
    "i16": np.dtype(np.int16),
    "si16": np.dtype(np.int16),
    "ui16": np.dtype(np.uint16),
    "i32": np.dtype(np.int32),
    "si32": np.dtype(np.int32),
    "ui32": np.dtype(np.uint32),
    "i64": np.dtype(np.int64),
    "si64": np.dtype(np.int64),
    "ui64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    **{name: ml_dtype(name) for name in ML_DTYPE_NAMES},  # bf16 and the f8 types
}
_NAMES = {
    np.dtype(np.bool_): "i1",
    np.dtype(np.int8): "i8",
    np.dtype(np.uint8): "ui8",
    np.dtype(np.int16): "i16",
    np.dtype(np.uint16): "ui16",
    np.dtype(np.int32): "i32",
    np.dtype(np.uint32): "ui32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint64): "ui64",
    np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    **{ml_dtype(name): name for name in ML_DTYPE_NAMES},  # bf16 and the f8 types (an f8 array was "u8", bytes)
}
# Storage dtypes .npy files can hold without ml_dtypes (bf16 and f8 are kept as their bits).
_STORAGE = {"bf16": np.dtype(np.uint16)} | {n: np.dtype(np.uint8) for n in _DTYPES if n.startswith("f8")}

RAW = "u8"  # the element type of bytes nobody could type


def element_dtype(name: str) -> np.dtype:
    """The numpy dtype of an element type name (``f32``, ``bf16``, ``i1``...); ``ValueError`` if unknown."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown element type {name!r}") from None


def element_name(dtype: np.dtype) -> str:
    """IREE's name for a numpy dtype; ``u8`` for anything else (raw bytes)."""
    return _NAMES.get(np.dtype(dtype), RAW)


@dataclass(frozen=True)
class TensorType:
    """A shape and element type, as IREE writes it: ``4x16xf32`` (``f32`` for a scalar)."""

    shape: tuple[int, ...]
    element: str
    source: str = "user"  # where the type came from: trace, interface, spirv, name, user, raw

    @classmethod
    def parse(cls, text: str, source: str = "user") -> TensorType:
        """``4x16xf32`` / ``?`` free shapes only; ``ValueError`` with the reason otherwise."""
        parts = text.strip().split("x")
        element = parts[-1]
        element_dtype(element)
        try:
            shape = tuple(int(p) for p in parts[:-1])
        except ValueError:
            raise ValueError(f"bad tensor type {text!r}: dimensions must be integers") from None
        if any(d < 0 for d in shape):
            raise ValueError(f"bad tensor type {text!r}: negative dimension")
        return cls(shape, element, source)

    @property
    def dtype(self) -> np.dtype:
        return element_dtype(self.element)

    @property
    def element_count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def byte_length(self) -> int:
        return self.element_count * self.dtype.itemsize

    def __str__(self) -> str:
        return "x".join([*(str(d) for d in self.shape), self.element])


def raw_type(nbytes: int) -> TensorType:
    return TensorType((nbytes,), RAW, "raw")


def view_bytes(data: np.ndarray, tensor_type: TensorType | None) -> tuple[np.ndarray, TensorType]:
    """``data`` (any array) seen as ``tensor_type``; raw ``u8`` bytes when the type is absent or does not fit.

    Only the first ``tensor_type.byte_length`` bytes are used when the range is longer (a binding padded to
    an alignment); a range too short for the type stays raw.
    """
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if tensor_type is None or tensor_type.element == RAW:
        return raw, raw_type(raw.size)
    try:
        dtype = tensor_type.dtype
    except ValueError:
        return raw, raw_type(raw.size)
    if tensor_type.byte_length > raw.size:
        return raw, raw_type(raw.size)
    return raw[: tensor_type.byte_length].view(dtype).reshape(tensor_type.shape), tensor_type


def to_storage(array: np.ndarray) -> np.ndarray:
    """The array as .npy can store it without ml_dtypes: bf16/f8 as their bits, everything else unchanged."""
    name = element_name(array.dtype)
    if name in _STORAGE:
        return array.view(_STORAGE[name])
    return array


def stored_as_bits(element: str) -> bool:
    """Whether ``to_storage`` keeps ``element`` (bf16, the f8 types) as its bits: a .npy of them reads as
    integers, so IREE's tools must be given their type and bytes instead."""
    return element in _STORAGE


def from_storage(array: np.ndarray, element: str | None) -> np.ndarray:
    """Undo ``to_storage``: stored bits seen as ``element`` (as named in a bundle's manifest)."""
    if element and element in _STORAGE and array.dtype == _STORAGE[element]:
        return array.view(element_dtype(element))
    return array


# ------------------------------------------------------------------------------------- IREE's names


def name_candidates(export_name: str) -> tuple[tuple[int, ...], str] | None:
    """The loop sizes and element type IREE's dispatch name ends with: ``…_matmul_4x16x8_f32`` ->
    ``((4, 16, 8), "f32")``; ``…_softmax_4x16xf32_...`` works too. ``None`` without such a suffix."""
    m = re.search(r"_((?:\d+x)*\d+)_?x?((?:b?f|u?i)\d+)(?:_|$)", export_name)
    if not m:
        return None
    element = m[2]
    if element not in _DTYPES:
        return None
    return tuple(int(d) for d in m[1].split("x")), element


@functools.lru_cache(maxsize=4096)  # a run asks for the same few (name, size) pairs at every dispatch
def type_from_name(export_name: str, nbytes: int) -> TensorType | None:
    """A type for a binding of ``nbytes`` from the dispatch name: the largest ordered subset of the name's
    loop sizes whose product fits the byte count (a matmul MxNxK has operands MxK, KxN, MxN)."""
    found = name_candidates(export_name)
    if found is None:
        return None
    dims, element = found
    itemsize = element_dtype(element).itemsize
    if nbytes % itemsize:
        return None
    count = nbytes // itemsize
    if "matmul" in export_name and len(dims) >= 3:
        # IREE names a contraction by its loops (batch..., M, N, K): operands are MxK, KxN, result MxN.
        *batch, m, n, k = dims
        for shape in ((*batch, m, k), (*batch, k, n), (*batch, m, n)):
            if int(np.prod(shape)) == count:
                return TensorType(tuple(shape), element, "name")
    best: tuple[int, ...] | None = None
    n = len(dims)
    for mask in range((1 << n) - 1, 0, -1):
        subset = tuple(d for i, d in enumerate(dims) if mask >> i & 1)
        if int(np.prod(subset)) == count and (best is None or len(subset) > len(best)):
            best = subset
    if best is None:
        best = (count,)
    return TensorType(best, element, "name")


# ------------------------------------------------------------------------------- executable sources


@dataclass(frozen=True)
class BindingInterface:
    """What an executable's source says about one binding: read-only or written, and the tensors in it."""

    index: int
    read_only: bool
    tensors: tuple[TensorType, ...]
    modes: tuple[str, ...] = ()  # readonly / writeonly / readwrite of each subspan
    offsets: tuple[tuple, ...] = ()  # where each subspan starts (see ``resolve_offset``)
    positions: tuple[int, ...] = ()  # each subspan's place among the function's (IREE's operand order)
    # Each subspan's dynamic dimensions: (axis, where its size comes from) for every ``?`` of its type, the
    # values after ``>>{...}`` (a push constant, usually through ``util.assume.int`` and the workload ordinal).
    dynamic_dims: tuple[tuple[tuple[int, tuple], ...], ...] = ()
    # Per subspan, the type the source declares where ``tensors`` holds another view of its bytes (``shown_instead``:
    # ``64x32xi4`` shown as its 1024 bytes, ``15xcomplex<f32>`` as 15x2xf32), else "".
    declared: tuple[str, ...] = ()
    # Subspans whose element type IREE Lens cannot show even so (a packed type of dynamic shape, a type it does
    # not know), as the source spells them: a dispatch binding one is shown as bytes, with this said, rather
    # than typed without it.
    unshown: tuple[str, ...] = ()
    # The export's pipeline layout: (bindings, push constants) it declares, the same for each of its bindings;
    # None where the source does not say. A dispatch of another layout is not this source's.
    layout: tuple[int, int] | None = None
    # Each ``unshown`` subspan's mode, place among the function's subspans (IREE's operand order) and offset.
    unshown_modes: tuple[str, ...] = ()
    unshown_positions: tuple[int, ...] = ()
    unshown_offsets: tuple[tuple, ...] = ()
    # The ``unshown`` tensors as the kernel lays them out, where a later phase of the same build says (IREE's
    # configured sources: an encoded ``4x8xf32`` materialized as ``memref<1x8x4x1xf32>``, data tiling's tiles).
    materialized: tuple[TensorType, ...] = ()

    @property
    def access(self) -> str:
        if self.read_only:
            return "read"
        return "write" if set(self.modes) == {"writeonly"} else "readwrite"


_EXPORT = re.compile(r"hal\.executable\.export\s+(?:public\s+|private\s+)?@([\w$.-]+)")
_FUNC = re.compile(r"func\.func\s+@([\w$.-]+)\s*\(")
_SUBSPAN = re.compile(
    r"hal\.interface\.binding\.subspan\b.*?binding\((\d+)\).*?:\s*"
    r"!(?:flow|iree_tensor_ext)\.dispatch\.tensor<(readonly|writeonly|readwrite):tensor<([^>]*)>>"
)
# flags(...) is absent from hand-written subspans (IREE's custom_dispatch samples): the layout's binding says.
_MEMREF_SUBSPAN = re.compile(
    r"hal\.interface\.binding\.subspan\b.*?binding\((\d+)\)(?:.*?flags\(\"?([\w|]+)\"?\))?.*?:\s*memref<([^,>]*)"
)


def binding_interfaces(source: str) -> dict[str, dict[int, BindingInterface]]:
    """Per export name, its bindings as declared in an executable's source (a ``hal.executable`` or the
    hal-phase snapshot): access from ``dispatch.tensor<readonly|writeonly|readwrite:...>``, the tensor
    types bound there, and where each starts in the binding (a constant, or a push constant IREE passes
    when it packs several tensors in one binding). Functions whose name is an export are attributed to it
    (IREE names them alike)."""
    exports = set(_EXPORT.findall(source))
    aliases = _layout_aliases(source)
    layouts = _export_layouts(source, aliases)
    result: dict[str, dict[int, BindingInterface]] = {}
    current: str | None = None
    found: dict[int, list[tuple[str, TensorType, Offset, int, tuple, str]]] = {}
    unshown: dict[int, list[tuple[str, str, int, Offset]]] = {}  # binding -> (mode, type, place, offset) not typed
    values: dict[str, Offset] = {}

    booleans = _Booleans()

    def close() -> None:
        for index in unshown:  # a binding of only such subspans is still the source's
            found.setdefault(index, [])
        if current is not None and found:
            for place in booleans.places():  # i1 tensors stored as bytes: IREE's trace calls them i1
                for entries in found.values():
                    for k, e in enumerate(entries):
                        if e[3] == place and e[1].element in ("i8", "ui8", "si8"):
                            entries[k] = (e[0], TensorType(e[1].shape, "i1", e[1].source), *e[2:])
            # Placed among all the function's subspans: those not typed are operands too.
            operand_order = _operand_order({b: [*found.get(b, ()), *((None, None, None, u[2]) for u in unshown.get(b, ()))]
                                            for b in {*found, *unshown}})  # fmt: skip
            result[current] = {
                i: BindingInterface(
                    i,
                    all(e[0] == "readonly" for e in entries) and all(u[0] == "readonly" for u in unshown.get(i, ())),
                    tuple(e[1] for e in entries),
                    tuple(e[0] for e in entries),
                    tuple(e[2] for e in entries),
                    tuple(operand_order[e[3]] for e in entries),
                    tuple(e[4] for e in entries),
                    tuple(e[5] for e in entries),
                    tuple(u[1] for u in unshown.get(i, ())),
                    layouts.get(current),
                    tuple(u[0] for u in unshown.get(i, ())),
                    tuple(operand_order[u[2]] for u in unshown.get(i, ())),
                    tuple(u[3] for u in unshown.get(i, ())),
                )
                for i, entries in sorted(found.items())
            }

    for line in _joined_lines(source):
        m = _FUNC.search(line)
        if m:
            close()
            current = m[1] if (m[1] in exports or not exports) else None
            found, values, unshown = {}, {}, {}
            booleans = _Booleans()
            continue
        if current is None:
            continue
        if "hal.interface.binding.subspan" not in line:
            _track_value(line, values)
            booleans.track(line)
            continue
        seen = sum(map(len, found.values())) + sum(map(len, unshown.values()))  # this subspan's place
        booleans.subspan(line, int(_SUBSPAN_BINDING.search(line)[1]) if _SUBSPAN_BINDING.search(line) else -1, seen)
        offset_token = re.search(r"offset\((%[\w#]+)\)", line)
        offset = values.get(offset_token[1], UNKNOWN_OFFSET) if offset_token else ("const", 0)
        s = _SUBSPAN.search(line)
        mm = None if s else _MEMREF_SUBSPAN.search(line)
        head = None if (s or mm) else _SUBSPAN_HEAD.search(line)
        if head:  # a type with brackets inside (an encoding written out, not aliased): kept as what it is
            declared = _short_type(_tensor_type_text(line, head.end()))
            unshown.setdefault(int(head[1]), []).append((head[2], declared, seen, offset))
            continue
        if s or mm:  # mm: after bufferization, memref<4x16xf32, ...> with the ReadOnly flag
            binding, text = (int(s[1]), s[3]) if s else (int(mm[1]), mm[3])
            flags = mm[2] if mm and mm[2] else "" if s else _layout_binding_flags(line, binding, aliases)
            mode = s[2] if s else ("readonly" if "ReadOnly" in flags else "readwrite")
            declared = ""
            try:
                t = TensorType.parse(text.replace("?", "0"), "interface")
            except ValueError:
                declared = _tensor_type_text(line, s.start(3) if s else mm.start(3), memref=not s)
                t = shown_instead(declared)
                if t is None:
                    unshown.setdefault(binding, []).append((mode, declared, seen, offset))
                    continue
            dims = _dynamic_dims(text, line[(s or mm).end():], values)
            found.setdefault(binding, []).append((mode, t, offset, seen, dims, declared))
    close()
    return result


_COMPLEX = re.compile(r"((?:\d+x)*)complex<(f16|bf16|f32|f64)>")
_PACKED = re.compile(r"((?:\d+x)*)(i|si|ui)([1-7])(,\s*#iree_encoding\.packed_storage)?")


def shown_instead(declared: str) -> TensorType | None:
    """How IREE Lens shows a tensor whose element type numpy cannot view in place, as a view of the same bytes:
    ``15xcomplex<f32>`` as ``15x2xf32``, its (real, imaginary) pairs (``torch.view_as_real``'s layout, IREE's
    memory); ``64x32xi4`` (packed, low bits first) or a packed-storage ``8xi1`` as its bytes. None for other
    types and for dynamic shapes (a packed type's byte count needs every dimension)."""
    m = _COMPLEX.fullmatch(declared)
    if m:
        return TensorType((*(int(d) for d in m[1].split("x")[:-1]), 2), m[2], "interface")
    packed = packed_type(declared)
    if packed is not None:
        shape, element = packed
        return raw_type(element.packed_byte_count(int(np.prod(shape, dtype=np.int64))))
    return None


def packed_type(declared: str) -> tuple[tuple[int, ...], ElementType] | None:
    """The static shape and element type of a type IREE packs several elements to a byte (``64x32xi4``, a
    packed-storage ``8xi1``); None for any other type, or a dynamic shape."""
    m = _PACKED.fullmatch(declared)
    if not m or (m[3] == "1" and not m[4]):  # an i1 without packed storage is stored a byte each: typed as i1
        return None
    element = make(BOOLEAN, 1) if m[3] == "1" else parse_element_type(m[2] + m[3])  # i1: one bit each
    return tuple(int(d) for d in m[1].split("x")[:-1]), element


def unpacked_values(data: np.ndarray, declared: str) -> np.ndarray | None:
    """The values of a packed tensor of type ``declared`` (``64x32xi4``) from its bytes ``data``, one a byte
    (``int8`` sign-extended, ``uint8`` for unsigned and i1), shaped: a copy, for showing; None when
    ``declared`` is not a packed type (``packed_type``), or ``data`` is too short."""
    packed = packed_type(declared)
    if packed is None:
        return None
    shape, element = packed
    try:
        return unpack(np.asarray(data).reshape(-1).view(np.uint8), element, shape)
    except ValueError:
        return None


_LAYOUT_ALIAS = re.compile(r"^(#[\w$.-]+)\s*=\s*(#hal\.pipeline\.layout<.*)$", re.M)
_EXPORT_LAYOUT = re.compile(r"hal\.executable\.export\s+(?:public\s+|private\s+)?@([\w$.-]+)[^\n]*?\blayout\((#[\w$.-]+)")


def _layout_aliases(source: str) -> dict[str, str]:
    """Each pipeline layout alias defined at the top (``#pipeline_layout = #hal.pipeline.layout<...>``, as IREE
    prints a module's; by hand, often over several lines) -> its ``#hal.pipeline.layout<...>`` text."""
    aliases = {}
    for m in _LAYOUT_ALIAS.finditer(source):
        start = m.start(2)
        aliases[m[1]] = source[start : _closing(source, start + len("#hal.pipeline.layout"))]
    return aliases


def _layout_text(source: str, start: int, aliases: dict[str, str]) -> str:
    """The ``#hal.pipeline.layout<...>`` a ``layout(`` names at ``start``: written out there, or an alias."""
    if source.startswith("#hal.pipeline.layout<", start):
        return source[start : _closing(source, start + len("#hal.pipeline.layout"))]
    name = re.match(r"#[\w$.-]+", source[start:])
    return aliases.get(name[0], "") if name else ""


def _export_layouts(source: str, aliases: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Each export's pipeline layout as (bindings, push constants): ``layout(#hal.pipeline.layout<constants = 2,
    bindings = [#hal.pipeline.binding<...>, ...]>)`` on its line, or an alias (``_layout_aliases``)."""
    layouts = {}
    for m in _EXPORT_LAYOUT.finditer(source):
        text = _layout_text(source, m.start(2), aliases)
        if not text:
            continue
        constants = re.search(r"\bconstants\s*=\s*(\d+)", text)
        layouts[m[1]] = (text.count("#hal.pipeline.binding<"), int(constants[1]) if constants else 0)
    return layouts


def _layout_binding_flags(line: str, binding: int, aliases: dict[str, str]) -> str:
    """The flags (``ReadOnly``...) the subspan's layout gives ``binding``; "" when it gives none or is unknown."""
    m = re.search(r"\blayout\(", line)
    text = _layout_text(line, m.end(), aliases) if m else ""
    declared = re.findall(r"#hal\.pipeline\.binding<([^>]*)>", text)
    return declared[binding] if binding < len(declared) else ""


def _closing(text: str, start: int) -> int:
    """The index just past the bracket that closes the one at ``text[start]`` (the text's end if none does)."""
    depth = 0
    for k in range(start, len(text)):
        if text[k] in "<([{":
            depth += 1
        elif text[k] in ">)]}":
            depth -= 1
            if depth == 0:
                return k + 1
    return len(text)


def declared_array(data: np.ndarray, declared: str) -> np.ndarray | None:
    """A tensor the source types as ``declared`` from the view ``shown_instead`` gave of its bytes, as a file
    keeps it: a packed type's values (``unpacked_values``), complex<f32>/complex<f64> as numpy's complex
    (the pairs' bytes, viewed); None where numpy has no such array (complex<f16>) or ``declared`` is neither."""
    values = unpacked_values(data, declared)
    if values is not None:
        return values
    m = _COMPLEX.fullmatch(declared)
    pairs = np.asarray(data)
    if not m or m[2] not in ("f32", "f64") or pairs.shape[-1:] != (2,):
        return None
    return np.ascontiguousarray(pairs).view(np.complex64 if m[2] == "f32" else np.complex128)[..., 0]


def _tensor_type_text(line: str, start: int, memref: bool = False) -> str:
    """The shape and element type that starts at ``start`` of ``line``, to its bracket's end (``15xcomplex<f32>``,
    ``8xi1, #iree_encoding.packed_storage``: the regexes stop at the first ``>``); a memref's to its layout."""
    depth = 0
    for k in range(start, len(line)):
        if line[k] in "<([{":
            depth += 1
        elif depth == 0 and (line[k] in ">)]}" or (memref and line[k] == ",")):
            return line[start:k].strip()
        elif line[k] in ">)]}":
            depth -= 1
    return line[start:].strip()


_SUBSPAN_BINDING = re.compile(r"binding\((\d+)\)")
# A tensor subspan's mode and where its type starts, whatever brackets the type holds (``_SUBSPAN`` stops at the
# first ``>``).
_SUBSPAN_HEAD = re.compile(
    r"hal\.interface\.binding\.subspan\b.*?binding\((\d+)\).*?:\s*"
    r"!(?:flow|iree_tensor_ext)\.dispatch\.tensor<(readonly|writeonly|readwrite):tensor<"
)


def _short_type(text: str) -> str:
    """A type as said to a user: an attribute's parameters left out (``4x8xf32, #iree_encoding.layout<...>``:
    IREE writes out the whole encoding resolver, hundreds of characters)."""
    return re.sub(r"(#[\w.]+)<.*$", r"\1<...>", text, flags=re.S)
_RESULT = re.compile(r"\s*(%[\w]+)(?::\d+)? = ")


class _Booleans:
    """Which subspans hold i1 tensors as bytes: IREE stores a boolean tensor as ``i8`` (``arith.extui
    ...xi1> to ...xi8>`` then a store) and reads one back (a load, then ``arith.trunci ...xi8> to ...xi1>``);
    its dispatch trace points keep the program's ``i1``."""

    def __init__(self) -> None:
        self.subspans: dict[str, int] = {}  # SSA name -> the subspan's place in the source
        self.loaded: dict[str, str] = {}  # a load's result -> its subspan's name
        self.widened: set[str] = set()  # results of extui from i1
        self.marked: set[str] = set()  # subspans holding booleans

    def subspan(self, line: str, binding: int, place: int) -> None:
        m = _RESULT.match(line)
        if m and binding >= 0:
            self.subspans[m[1]] = place

    def track(self, line: str) -> None:
        m = _RESULT.match(line)
        name = m[1] if m else None
        if name and "arith.extui" in line and re.search(r"xi1>\s+to\s+tensor<[^>]*xi8>", line):
            self.widened.add(name)
        elif name and "dispatch.tensor.load" in line:
            src = re.search(r"dispatch\.tensor\.load\s+(%[\w]+)", line)
            if src:
                self.loaded[name] = src[1]
        elif name and "arith.trunci" in line and re.search(r"xi8>\s+to\s+tensor<[^>]*xi1>", line):
            src = re.search(r"arith\.trunci\s+(%[\w]+)", line)
            if src and src[1] in self.loaded:
                self.marked.add(self.loaded[src[1]])
        elif "dispatch.tensor.store" in line:
            operands = re.search(r"dispatch\.tensor\.store\s+(%[\w#]+),\s*(%[\w]+)", line)
            if operands and operands[1] in self.widened:
                self.marked.add(operands[2])

    def places(self) -> set[int]:
        return {self.subspans[name] for name in self.marked if name in self.subspans}


def _operand_order(found: dict[int, list[tuple]]) -> dict[int, int]:
    """Each subspan's place among the dispatch's operands (IREE's trace order), by its place in the source.

    IREE numbers bindings by the first operand that uses each (fused bindings: several operands of one
    buffer share a binding, at offsets), so in operand order each binding first appears after the one
    before it. The source keeps that order except where a subspan with no dynamic dimension stayed ahead
    of the ``workload.ordinal`` ops the others need (a weight binding before the input of a dynamic-batch
    matmul): when every binding's subspans are contiguous in the source, operand order is binding order
    (stable); when a binding's subspans are interleaved with another's, the source order is kept."""
    by_source = sorted((e[3], b) for b, entries in found.items() for e in entries)
    bindings = [b for _, b in by_source]
    runs = [b for k, b in enumerate(bindings) if k == 0 or bindings[k - 1] != b]
    if len(runs) != len(set(runs)):  # interleaved: keep the source order
        return {place: place for place, _ in by_source}
    ordered = sorted(by_source, key=lambda pb: pb[1])  # stable: within a binding, the source order
    return {place: rank for rank, (place, _) in enumerate(ordered)}


def _dynamic_dims(type_text: str, rest: str, values: dict[str, Offset]) -> tuple[tuple[int, Offset], ...]:
    """(axis, source of its size) for each ``?`` of ``type_text``, from the ``{%a, %b}`` the subspan's type is
    followed by (one SSA value per dynamic dimension, in order); unknown sources stay ``UNKNOWN_OFFSET``."""
    axes = [k for k, d in enumerate(type_text.split("x")[:-1]) if d == "?"]
    if not axes:
        return ()
    m = re.match(r"[^{]*?\{([^}]*)\}", rest)
    tokens = [t.strip() for t in m[1].split(",")] if m else []
    return tuple((axis, values.get(tokens[k], UNKNOWN_OFFSET) if k < len(tokens) else UNKNOWN_OFFSET)
                 for k, axis in enumerate(axes))


def _joined_lines(source: str):
    """Source lines with an op's continuation lines joined (``util.assume.int`` spreads over several)."""
    pending = ""
    for line in source.splitlines():
        if pending:
            pending += " " + line.strip()
            if re.search(r"^\s*:|\s:\s", line):
                yield pending
                pending = ""
            continue
        if line.rstrip().endswith("util.assume.int"):
            pending = line.rstrip()
            continue
        yield line
    if pending:
        yield pending


# Where a subspan starts (or how long a dynamic dimension is): ("const", bytes), ("push", constant ordinal),
# ("push64", low ordinal, high ordinal) for an index IREE passes as two i32 push constants (a 64-bit index
# whose range it cannot bound: a ``tensor.dim`` of a dynamic input), or unknown. ("push_high", ordinal) is
# the high half on its way (``arith.shli`` by 32) to the ``arith.ori`` that joins them.
Offset = tuple
UNKNOWN_OFFSET: Offset = ("unknown",)
_PASS_THROUGH = ("arith.index_castui", "arith.index_cast", "arith.extui", "arith.extsi",
                 "iree_tensor_ext.dispatch.workload.ordinal", "flow.dispatch.workload.ordinal")


def _track_value(line: str, values: dict[str, Offset]) -> None:
    """Follow the few ops between a push constant and a subspan offset (casts, ``util.assume.int``)."""
    m = re.match(r"\s*(%[\w]+)(?::(\d+))? = (\S+)(.*)$", line)
    if not m:
        return
    name, count, op, rest = m[1], m[2], m[3], m[4]
    if op == "arith.constant":
        c = re.match(r"\s*(-?\d+) : (?:index|i32|i64)", rest)
        if c:
            values[name] = ("const", int(c[1]))
    elif op == "hal.interface.constant.load":
        o = re.search(r"ordinal\((\d+)\)", rest)
        if o:
            values[name] = ("push", int(o[1]))
    elif op in _PASS_THROUGH:
        src = re.match(r"\s*(%[\w#]+)", rest)
        if src and src[1] in values:
            values[name] = values[src[1]]
    elif op == "arith.shli":  # the high half of a 64-bit index: extui(push) << 32
        a = re.match(r"\s*(%[\w#]+)\s*,\s*(%[\w#]+)", rest)
        if a and values.get(a[1], UNKNOWN_OFFSET)[0] == "push" and values.get(a[2]) == ("const", 32):
            values[name] = ("push_high", values[a[1]][1])
    elif op == "arith.ori":  # low | high << 32: the 64-bit index two push constants carry
        a = re.match(r"\s*(%[\w#]+)\s*,\s*(%[\w#]+)", rest)
        halves = sorted((values.get(a[1], UNKNOWN_OFFSET), values.get(a[2], UNKNOWN_OFFSET))) if a else []
        if [h[0] for h in halves] == ["push", "push_high"]:
            values[name] = ("push64", halves[0][1], halves[1][1])
    elif op == "util.assume.int":
        operands = re.findall(r"(%[\w#]+)<", rest) or re.findall(r"(%[\w#]+)\[", rest)
        for k, operand in enumerate(operands):
            if operand in values:
                values[f"{name}#{k}" if count else name] = values[operand]


def resolve_offset(offset: Offset, constants: tuple[int, ...] | list[int]) -> int | None:
    """The byte offset an ``Offset`` stands for in a dispatch with these push constants (None: unknown)."""
    if offset[0] == "const":
        return int(offset[1])
    if offset[0] == "push" and offset[1] < len(constants):
        return int(constants[offset[1]]) & 0xFFFFFFFF
    if offset[0] == "push64" and max(offset[1], offset[2]) < len(constants):
        return (int(constants[offset[1]]) & 0xFFFFFFFF) | (int(constants[offset[2]]) & 0xFFFFFFFF) << 32
    return None


def interfaces_from_files(paths: list[str]) -> dict[str, dict[int, BindingInterface]]:
    """``binding_interfaces`` of every file given (executable sources, or a directory of them)."""
    from pathlib import Path

    merged: dict[str, dict[int, BindingInterface]] = {}
    for p in paths:
        path = Path(p)
        if not path.exists():
            from engine.errors import LensError

            raise LensError(f"executable sources {path} do not exist")
        files = sorted(path.glob("*.mlir")) if path.is_dir() else [path]
        for f in files:
            try:
                merged.update(binding_interfaces(f.read_text(errors="replace")))
            except OSError:
                continue
    return merged
