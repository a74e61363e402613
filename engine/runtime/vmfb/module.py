"""A parsed ``.vmfb`` VM bytecode module: memory-mapped, read lazily, zero-copy.

    module = open_vmfb("program.vmfb")
    for f in module.functions:
        print(f.ordinal, f.name, f.signature.calling_convention, len(f.code))
    for x in module.executables:
        print(x.format, x.name, len(x.data))

Everything is read on first use from the memory map and checked against the file's bounds; any
problem raises :class:`~engine.errors.VmfbFormatError` naming what and where.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from engine.errors import VmfbFormatError
from engine.runtime.vmfb.cconv import CallingConvention, parse_cconv
from engine.runtime.vmfb.container import ContainerLayout, locate
from engine.runtime.vmfb.decoder import iter_instructions
from engine.runtime.vmfb.flatbuffer import FlatBuffer, Table
from engine.runtime.vmfb.locations import LOCATION_KINDS, LocationTable, bad_location
from engine.runtime.vmfb.register_values import CALL_SYMBOLS, call_arguments, ref_key, walk_with_constants

FEATURE_BITS: dict[int, str] = {1: "EXT_F32", 2: "EXT_F64", 4: "YIELD", 8: "UNWIND"}
DEPENDENCY_REQUIRED = 1
DEPENDENCY_OPTIONAL = 2
IMPORT_REQUIRED = 1
IMPORT_OPTIONAL = 2

# FunctionDescriptor struct (20 bytes).
FUNCTION_DESCRIPTOR_DTYPE = np.dtype(
    [
        ("bytecode_offset", "<i4"),
        ("bytecode_length", "<i4"),
        ("requirements", "<u4"),
        ("reserved", "<i2"),
        ("block_count", "<i2"),
        ("i32_register_count", "<i2"),
        ("ref_register_count", "<i2"),
    ]
)
# BytecodeLocationDef struct (8 bytes).
BYTECODE_LOCATION_DTYPE = np.dtype([("bytecode_offset", "<i4"), ("location", "<i4")])


def feature_names(bits: int) -> list[str]:
    """FeatureBits as names (``["YIELD", "UNWIND"]``); unknown bits as hex."""
    names = [name for bit, name in FEATURE_BITS.items() if bits & bit]
    rest = bits & ~sum(FEATURE_BITS)
    if rest:
        names.append(f"{rest:#x}")
    return names


@dataclass(frozen=True)
class Signature:
    calling_convention: str
    attrs: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def cconv(self) -> CallingConvention:
        return parse_cconv(self.calling_convention)

    @property
    def coarse_fences(self) -> bool:
        """IREE's async-external ABI (``iree.abi.model = coarse-fences``, ``--iree-execution-model=
        async-external``): the last two arguments are a wait fence and a signal fence, which the caller
        supplies (iree-run-module adds them itself, ``iree_tooling_append_async_fences``)."""
        return self.attrs.get(ABI_MODEL) == COARSE_FENCES


ABI_MODEL = "iree.abi.model"
COARSE_FENCES = "coarse-fences"
ASYNC_SUFFIX = "$async"  # a torch or ONNX import's asynchronous half of a function (``takes_fences``)


def takes_fences(module, function: str) -> bool:
    """Whether exported ``function`` of ``module`` takes IREE's coarse-fences ABI's wait and signal fences
    last: its reflection says so (an async-external build), or it is the ``$async`` half of a torch or ONNX
    import. IREE's torch input conversion (FuncConversion.cpp) makes each function ``F$async``, with the
    fences and ``iree.abi.model = coarse-fences`` (which the module's reflection does not keep), and ``F``, a
    synchronous wrapper that makes the fences and calls it: ``F`` exists and takes ``F$async``'s arguments
    less two refs."""
    exports = {e.name: e for e in module.exports}
    export = exports.get(function)
    if export is None:
        return False
    if export.signature.coarse_fences:
        return True
    twin = exports.get(function.removesuffix(ASYNC_SUFFIX)) if function.endswith(ASYNC_SUFFIX) else None
    cconv = export.signature.calling_convention
    stripped = without_fences(cconv)
    return twin is not None and stripped != cconv and stripped == twin.signature.calling_convention


def caller_calling_convention(module, function: str) -> str:
    """Exported ``function``'s calling convention as a caller passes values (``takes_fences``: the fences
    left out); "" for no such export."""
    export = next((e for e in module.exports if e.name == function), None)
    if export is None:
        return ""
    cconv = export.signature.calling_convention
    return without_fences(cconv) if takes_fences(module, function) else cconv


def without_fences(calling_convention: str) -> str:
    """``calling_convention`` less its last two arguments (a coarse-fences function's wait and signal
    fences): ``0rrr_r`` -> ``0r_r``, ``0rr_v`` -> ``0v_v``."""
    head, sep, results = calling_convention.partition("_")
    version, arguments = head[:1], head[1:]
    if not arguments.endswith("rr"):
        return calling_convention  # not the shape IREE gives a coarse-fences function: left as it is
    return f"{version}{arguments[:-2] or 'v'}{sep}{results}"


@dataclass(frozen=True)
class Dependency:
    name: str
    minimum_version: int
    flags: int

    @property
    def optional(self) -> bool:
        return bool(self.flags & DEPENDENCY_OPTIONAL)


@dataclass(frozen=True)
class Import:
    ordinal: int
    full_name: str
    signature: Signature
    flags: int

    @property
    def optional(self) -> bool:
        return bool(self.flags & IMPORT_OPTIONAL)


@dataclass(frozen=True)
class Export:
    ordinal: int
    name: str
    internal_ordinal: int
    signature: Signature


@dataclass(frozen=True, eq=False)
class Function:
    """An internal function: its descriptor, signature, names and bytecode (function-relative pcs)."""

    ordinal: int
    name: str  # best name: an export name, else the debug database's (when trustworthy), else __func_N
    aliases: tuple[str, ...]  # every export name of this function
    debug_name: str | None  # what debug_database.functions[ordinal] says (3.13 bug: often wrong)
    bytecode_offset: int
    bytecode_length: int
    requirements: int
    block_count: int
    i32_register_count: int
    ref_register_count: int
    signature: Signature
    code: memoryview = field(repr=False)

    def instructions(self):
        """Decode every instruction (see :func:`engine.runtime.vmfb.decoder.iter_instructions`)."""
        return iter_instructions(self.code)


@dataclass(frozen=True, eq=False)
class RodataSegment:
    ordinal: int
    embedded: bool
    file_offset: int  # absolute offset of the data in the file
    length: int
    data: memoryview = field(repr=False)
    external_offset: int | None = None  # external_data_offset (relative to rodata_base)
    zip_name: str | None = None  # ZIP entry name of an external segment

    @property
    def array(self) -> np.ndarray:
        """The bytes as a read-only (or copy-on-write) numpy uint8 view."""
        return np.frombuffer(self.data, dtype=np.uint8)

    @property
    def alignment(self) -> int:
        """The largest power of two (up to 64) dividing the data's file offset."""
        off = self.file_offset
        return 64 if off % 64 == 0 else off & -off

    @property
    def detected_format(self) -> str | None:
        """A format sniffed from the content: elf, vmvx-module (nested .vmfb), vke1, cda1, text, or None."""
        head = bytes(self.data[:8])
        if head.startswith(b"\x7fELF"):
            return "elf"
        if head.startswith(b"PK\x03\x04"):
            return "zip"
        if head.startswith(b"VKE1"):
            return "vke1"
        if head.startswith(b"CDA1"):
            return "cda1"
        if head[4:8] == b"IREE":
            return "vm-flatbuffer"
        if self.length and self.length <= 4096 and _is_text(self.data):
            return "text"
        return None

    def text(self) -> str | None:
        """The segment as text when it is printable UTF-8 (strings such as format names), else None."""
        if self.length > 4096 or not _is_text(self.data):
            return None
        return str(self.data, "utf-8")


def _is_text(data: memoryview) -> bool:
    try:
        s = str(data, "utf-8")
    except UnicodeDecodeError:
        return False
    return s.isprintable()


@dataclass(frozen=True)
class ModuleState:
    global_bytes_capacity: int
    global_ref_count: int


@dataclass(frozen=True, eq=False)
class Executable:
    """An executable embedded as a rodata segment (created by ``hal.executable.create``)."""

    ordinal: int
    format: str  # embedded-elf-x86_64, vmvx-bytecode-fb, vulkan-spirv-fb, ...
    name: str
    rodata_ordinal: int
    data: memoryview = field(repr=False)
    found_by: str = "hal.executable.create"  # or "sniffed" (magic bytes only)


@dataclass(frozen=True)
class FunctionSourceMap:
    local_name: str
    locations: np.ndarray  # BYTECODE_LOCATION_DTYPE: (bytecode_offset, location table index)


class DebugDatabase:
    """The module's debug database: a location table and per-function source maps."""

    LOCATION_KINDS = LOCATION_KINDS

    def __init__(self, table: Table):
        self._table = table

    @cached_property
    def locations(self) -> list[tuple[str, Table | None]]:
        return [
            (self.LOCATION_KINDS.get(tag, f"unknown({tag})"), t)
            for tag, t in self._table.union_vector(0, "location_table")
        ]

    @cached_property
    def functions(self) -> list[FunctionSourceMap]:
        return [
            FunctionSourceMap(
                t.string(0, "local_name") or "", t.structs(1, BYTECODE_LOCATION_DTYPE, "locations")
            )
            for t in self._table.tables(2, "functions")
        ]

    @cached_property
    def location_texts(self) -> list[str]:
        """Every location-table entry as MLIR-like text, in table order (see ``locations.py``: linear
        time, cycles and damaged entries read ``<bad location N>``, each text bounded)."""
        return LocationTable(self._table).render_all()

    def location_text(self, index: int) -> str:
        """A location-table entry as MLIR-like text (``"file.mlir":3:5``)."""
        texts = self.location_texts
        return texts[index] if 0 <= index < len(texts) else bad_location(index)

    def source_map(self, function: Function, function_count: int) -> FunctionSourceMap | None:
        """The source map of ``function``, or None.

        3.13 writes every function's source map into slot 0 (docs/iree-3.13-runtime-facts.md §1.2), so a slot is trusted by
        position only when there is one per function; otherwise a map whose name is one of the
        function's export names is its own (the one map 3.13 writes names the last function encoded).
        """
        maps = self.functions
        if len(maps) == function_count and function.ordinal < len(maps):
            return maps[function.ordinal]
        for m in maps:
            if m.local_name and m.local_name in function.aliases:
                return m
        return None


class VmfbModule:
    """A VM bytecode module read from a ``.vmfb`` (or a bare module flatbuffer)."""

    def __init__(self, data, *, source: str | None = None, _mapping: mmap.mmap | None = None):
        self._buf = data if isinstance(data, memoryview) else memoryview(data)
        self._mapping = _mapping
        self.source = source
        self.layout: ContainerLayout = locate(self._buf, source)
        self._fb = FlatBuffer(
            self._buf,
            self.layout.flatbuffer_start,
            self.layout.flatbuffer_end,
            error=VmfbFormatError,
            source=source,
            declared_end=self.layout.flatbuffer_start + self.layout.size_prefix,
        )
        self._root = self._fb.root("BytecodeModuleDef", b"IREE")
        self.name: str = self._root.string(0, "name") or ""
        self.version: int = self._root.scalar(1, "u32", 0, "version")
        self.requirements: int = self._root.scalar(2, "u32", 0, "requirements")
        self.bytecode_version: int = self._root.scalar(13, "u32", 0, "bytecode_version")

    # -- construction -------------------------------------------------------------------------------------


    @property
    def data(self) -> memoryview:
        """The module's bytes (the whole ``.vmfb``, memory-mapped when opened from a file)."""
        return self._buf
    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, name: str | None = None) -> VmfbModule:
        """A module from bytes in memory (e.g. a nested VMVX executable); ``name`` is used in errors."""
        return cls(data, source=name)

    def close(self) -> None:
        """Release the memory map (views handed out earlier keep it alive until they are dropped)."""
        mapping, buf = self._mapping, self._buf
        self.__dict__.clear()
        self._mapping = None
        if mapping is not None:
            try:
                buf.release()
                mapping.close()
            except BufferError:
                pass  # a view of the data is still in use; the map is released when it is collected

    def __enter__(self) -> VmfbModule:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<VmfbModule @{self.name} {self.source or ''}>"

    # -- raw access ---------------------------------------------------------------------------------------

    @property
    def buffer(self) -> memoryview:
        """The whole file."""
        return self._buf

    @property
    def root(self) -> Table:
        """The ``BytecodeModuleDef`` root table (for fields this class does not expose)."""
        return self._root

    @property
    def requirement_names(self) -> list[str]:
        return feature_names(self.requirements)

    @property
    def bytecode_version_text(self) -> str:
        return f"{self.bytecode_version >> 16}.{self.bytecode_version & 0xFFFF}"

    # -- metadata -----------------------------------------------------------------------------------------

    @staticmethod
    def _attrs(tables) -> dict[str, str]:
        return {t.string(0, "key") or "": t.string(1, "value") or "" for t in tables}

    def _signature(self, t: Table | None) -> Signature:
        if t is None:
            return Signature("")
        return Signature(t.string(0, "calling_convention") or "", self._attrs(t.tables(1, "attrs")))

    @cached_property
    def attrs(self) -> dict[str, str]:
        return self._attrs(self._root.tables(3, "attrs"))

    @cached_property
    def types(self) -> list[str]:
        return [t.string(0, "full_name") or "" for t in self._root.tables(4, "types")]

    @cached_property
    def dependencies(self) -> list[Dependency]:
        return [
            Dependency(
                t.string(0, "name") or "", t.scalar(1, "u32", 0), t.scalar(2, "u32", DEPENDENCY_REQUIRED)
            )
            for t in self._root.tables(5, "dependencies")
        ]

    @cached_property
    def imports(self) -> list[Import]:
        return [
            Import(
                i,
                t.string(0, "full_name") or "",
                self._signature(t.table(1, "signature")),
                t.scalar(2, "u32", 1),
            )
            for i, t in enumerate(self._root.tables(6, "imported_functions"))
        ]

    @cached_property
    def signatures(self) -> list[Signature]:
        return [self._signature(t) for t in self._root.tables(8, "function_signatures")]

    @cached_property
    def descriptors(self) -> np.ndarray:
        """The function descriptors as a structured numpy view (FUNCTION_DESCRIPTOR_DTYPE)."""
        return self._root.structs(12, FUNCTION_DESCRIPTOR_DTYPE, "function_descriptors")

    @cached_property
    def exports(self) -> list[Export]:
        out = []
        n = len(self.descriptors)
        sigs = self.signatures
        for i, t in enumerate(self._root.tables(7, "exported_functions")):
            internal = t.scalar(1, "i32", 0, "internal_ordinal")
            if not 0 <= internal < n:
                raise VmfbFormatError(
                    f"export internal_ordinal {internal} is outside the {n} functions",
                    path=self.source,
                    where=f"exported_functions[{i}]",
                )
            sig = sigs[internal] if internal < len(sigs) else Signature("")
            out.append(Export(i, t.string(0, "local_name") or "", internal, sig))
        return out

    @cached_property
    def bytecode(self) -> memoryview:
        """All functions' bytecode (``bytecode_data``)."""
        data = self._root.byte_vector(14, "bytecode_data")
        return data if data is not None else memoryview(b"")

    @cached_property
    def debug_database(self) -> DebugDatabase | None:
        t = self._root.table(15, "debug_database")
        return DebugDatabase(t) if t is not None else None

    @cached_property
    def module_state(self) -> ModuleState:
        t = self._root.table(11, "module_state")
        if t is None:
            return ModuleState(0, 0)
        return ModuleState(t.scalar(0, "i32", 0), t.scalar(1, "i32", 0))

    @cached_property
    def functions(self) -> list[Function]:
        desc = self.descriptors
        sigs = self.signatures
        code = self.bytecode
        aliases: dict[int, list[str]] = {}
        for e in self.exports:
            aliases.setdefault(e.internal_ordinal, []).append(e.name)
        debug_names: list[str] = []
        if self.debug_database is not None:
            debug_names = [f.local_name for f in self.debug_database.functions]
        # 3.13 writes every source map into slot 0 (see docs/iree-3.13-runtime-facts.md §1.2): only trust a complete table.
        debug_trusted = len(debug_names) == len(desc)
        # The compiler writes each function's bytecode once, back to back. Descriptors that share bytecode
        # (a damaged file) would make every reader decode the shared part once per descriptor.
        total = int(desc["bytecode_length"].astype(np.int64).clip(0).sum()) if len(desc) else 0
        if total > len(code):
            raise VmfbFormatError(
                f"functions claim {total} bytes of bytecode but bytecode_data holds {len(code)}: they overlap",
                path=self.source,
                where="function_descriptors",
            )
        out = []
        for i in range(len(desc)):
            d = desc[i]
            off, length = int(d["bytecode_offset"]), int(d["bytecode_length"])
            where = f"function_descriptors[{i}]"
            if off < 0 or length < 0 or off + length > len(code):
                raise VmfbFormatError(
                    f"function bytecode [{off}, {off + length}) is outside the {len(code)}-byte bytecode_data",
                    path=self.source,
                    where=where,
                )
            for key in ("block_count", "i32_register_count", "ref_register_count"):
                if int(d[key]) < 0:
                    raise VmfbFormatError(f"negative {key} {int(d[key])}", path=self.source, where=where)
            names = tuple(aliases.get(i, ()))
            dbg = debug_names[i] if i < len(debug_names) else None
            best = names[0] if names else (dbg if debug_trusted and dbg else f"__func_{i}")
            out.append(
                Function(
                    ordinal=i,
                    name=best,
                    aliases=names,
                    debug_name=dbg,
                    bytecode_offset=off,
                    bytecode_length=length,
                    requirements=int(d["requirements"]),
                    block_count=int(d["block_count"]),
                    i32_register_count=int(d["i32_register_count"]),
                    ref_register_count=int(d["ref_register_count"]),
                    signature=sigs[i] if i < len(sigs) else Signature(""),
                    code=code[off : off + length],
                )
            )
        return out

    def function(self, name_or_ordinal: str | int) -> Function:
        """A function by internal ordinal, export name or best name (KeyError if none)."""
        if isinstance(name_or_ordinal, int):
            return self.functions[name_or_ordinal]
        for f in self.functions:
            if name_or_ordinal == f.name or name_or_ordinal in f.aliases:
                return f
        raise KeyError(f"no function named {name_or_ordinal!r} in module @{self.name}")

    @cached_property
    def rodata_segments(self) -> list[RodataSegment]:
        out = []
        names = {off: name for name, off, _ in self.layout.zip_entries}
        n = len(self._buf)
        base = self.layout.rodata_base
        for i, t in enumerate(self._root.tables(9, "rodata_segments")):
            span = t.vector_span(2, 1, "embedded_data")
            if span is not None:
                start, length = span
                out.append(RodataSegment(i, True, start, length, self._buf[start : start + length]))
                continue
            ext_off = t.scalar(3, "u64", 0, "external_data_offset")
            ext_len = t.scalar(4, "u64", 0, "external_data_length")
            start = base + ext_off
            if start + ext_len > n:
                raise VmfbFormatError(
                    f"external rodata [{start}, {start + ext_len}) runs past the end of the {n}-byte file",
                    path=self.source,
                    where=f"rodata_segments[{i}]",
                )
            out.append(
                RodataSegment(
                    i, False, start, ext_len, self._buf[start : start + ext_len], ext_off, names.get(start)
                )
            )
        return out

    # -- executables --------------------------------------------------------------------------------------

    @cached_property
    def executables(self) -> list[Executable]:
        """Embedded executables: those passed to ``hal.executable.create``, then any ELF/VMVX/VKE1 sniffed."""
        segs = self.rodata_segments
        found: dict[int, str] = {}  # data rodata ordinal -> format
        create = {imp.ordinal for imp in self.imports if imp.full_name == "hal.executable.create"}
        if create:
            for f in self.functions:
                try:
                    found.update(_executable_create_calls(f, create, len(segs), segs))
                except VmfbFormatError:
                    continue  # a function that does not decode cannot name executables; sniffing remains
        for s in segs:
            if s.ordinal in found:
                continue
            fmt = _sniff_executable_format(s)
            if fmt:
                found[s.ordinal] = fmt + "?"
        out = []
        for k, (ordinal, fmt) in enumerate(sorted(found.items())):
            sniffed = fmt.endswith("?")
            fmt = fmt.rstrip("?")
            seg = segs[ordinal]
            out.append(
                Executable(
                    k,
                    fmt,
                    _executable_name(seg, fmt, k),
                    ordinal,
                    seg.data,
                    "sniffed" if sniffed else "hal.executable.create",
                )
            )
        return out


def _executable_create_calls(f: Function, create: set[int], nseg: int, segs) -> dict[int, str]:
    """Rodata ordinals passed as (format, data) to hal.executable.create in function ``f``."""
    found: dict[int, str] = {}
    for ins, held in walk_with_constants(iter_instructions(f.code)):
        if ins.opcode.symbol not in CALL_SYMBOLS:
            continue
        callee, args, _ = call_arguments(ins)
        # (device, affinity:i64, format, data, constants): an i64 takes one list entry.
        if callee in create and len(args) >= 4:
            fmt_r, data_r = held.get(ref_key(args[2])), held.get(ref_key(args[3]))
            if fmt_r and data_r and fmt_r[0] == data_r[0] == "rodata" and max(fmt_r[1], data_r[1]) < nseg:
                fmt = segs[fmt_r[1]].text()
                if fmt:
                    found[data_r[1]] = fmt
    return found


_ELF_MACHINES = {62: "x86_64", 183: "arm_64", 243: "riscv_64", 3: "x86_32", 40: "arm_32"}


def _sniff_executable_format(seg: RodataSegment) -> str | None:
    head = bytes(seg.data[:20])
    if head.startswith(b"\x7fELF") and len(head) >= 20:
        machine = int.from_bytes(head[18:20], "little")
        return f"embedded-elf-{_ELF_MACHINES.get(machine, str(machine))}"
    if head.startswith(b"PK\x03\x04") and bytes(seg.data[30:39]) == b"module.fb":
        return "vmvx-bytecode-fb"
    if head.startswith(b"VKE1"):
        return "vulkan-spirv-fb"
    if head.startswith(b"CDA1"):
        return "cuda-nvptx-fb"
    return None


def _executable_name(seg: RodataSegment, fmt: str, k: int) -> str:
    if seg.zip_name:
        stem = seg.zip_name.rsplit(".", 1)[0]
        suffix = "_" + fmt.replace("-", "_")
        return stem[: -len(suffix)] if stem.endswith(suffix) and len(stem) > len(suffix) else stem
    return f"executable_{k}"


def open_vmfb(path: str | os.PathLike, *, writable: bool = False) -> VmfbModule:
    """Open a ``.vmfb`` memory-mapped and parsed lazily.

    ``writable=True`` maps it copy-on-write (private): runs need writable constants, and writes never
    reach the file.
    """
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return VmfbModule(b"", source=str(p))
            mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY if writable else mmap.ACCESS_READ)
    except OSError as e:
        raise VmfbFormatError.cannot_open(p, e) from e
    return VmfbModule(memoryview(mapping), source=str(p), _mapping=mapping)
