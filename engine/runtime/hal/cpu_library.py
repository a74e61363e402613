"""IREE's CPU executables (embedded ELF, executable library ABI v0.6) loaded and dispatched through ctypes.

An llvm-cpu executable in a ``.vmfb`` is a small ELF shared object exporting one symbol,
``iree_hal_executable_library_query``. It returns ``iree_hal_executable_library_v0_t``: exported
dispatch functions with their attributes, an import table, constants and debug sources. The layouts
mirror ``runtime/src/iree/hal/local/executable_library.h``. ``dispatch`` runs the workgroups the way
IREE's local-sync device does (``inline_command_buffer.c``): workgroup size (1,1,1),
``max_concurrency`` 1, workgroups in z, y, x order, denormals flushed to zero, and a stop at the first
workgroup that returns non-zero.
"""

from __future__ import annotations

import _ctypes
import ctypes
import os
import struct
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from engine.errors import DispatchError, ExecutableLoadError, HalError
from engine.runtime.hal.cpu_abi import (
    BINDING_ALIGNMENT,
    LIBRARY_VERSION,
    PARAMETER_TYPES,
    QUERY_SYMBOL,
    DispatchAttributes,
    DispatchParameter,
    DispatchStateStruct,
    EnvironmentStruct,
    ExecutableExport,
    LibraryImport,
    LibraryV0Struct,
    SourceFile,
    SourceLocation,
    WorkgroupStateStruct,
    c_string,
    check_elf,
    processor_data,
)
from engine.runtime.hal.machine_code import (
    DISPATCH_FN,
    MXCSR_FLUSH_DENORMALS,
    FlushDenormals,
    machine_code,
)

_c = ctypes

ImportFunction = (
    int | ctypes._CFuncPtr
)  # an address, or a ctypes function ``int f(void* params, void* ctx, void* r)``


# The runtime symbols of the sanitizers ``--iree-llvmcpu-sanitize`` builds kernels for (system-linked only).
_SANITIZER_SYMBOLS = {"__asan_": "address", "__tsan_": "thread"}


def _sanitizer_note(error: str) -> str:
    """What a load failure on a sanitizer's missing runtime means (IREE's runtime refuses such a library with
    "compiled with ASAN support but the host runtime is not")."""
    for prefix, kind in _SANITIZER_SYMBOLS.items():
        if f"undefined symbol: {prefix}" in error:
            return (f" (the kernels were built with --iree-llvmcpu-sanitize={kind}, whose runtime this process does "
                    "not have: rebuild without it to debug them here)")
    return ""


class CpuExecutableLibrary:
    """One loaded embedded-ELF executable library: its exports and a way to dispatch them.

    Load with ``CpuExecutableLibrary.load(elf_bytes)``. Dispatches of one library are serialised by a
    lock (they share the cached argument structs); different libraries may run at the same time on
    different threads (the native workgroup loop releases the GIL).
    """

    def __init__(self) -> None:  # use load()
        raise TypeError("use CpuExecutableLibrary.load(elf_bytes)")

    # -- loading --


    @property
    def library_v0(self):
        """IREE's ``iree_hal_executable_library_v0_t`` of the loaded ELF (its header, exports, imports)."""
        return self._lib

    @classmethod
    def load(
        cls,
        elf_bytes: bytes | bytearray | memoryview,
        name: str = "executable",
        *,
        constants: Sequence[int] = (),
        imports: Mapping[str, ImportFunction] | None = None,
        query_symbol: str = QUERY_SYMBOL,
        bind: bool = True,
    ) -> CpuExecutableLibrary:
        """Load an embedded-ELF executable library.

        ``constants`` are the executable-level constants (``hal.executable.create``'s), as many as
        the library declares. ``imports`` resolves imported functions by name (without the ``?``);
        a required import that is missing fails the load, an optional one is passed as NULL.
        Raises ``ExecutableLoadError`` for a file that is not a loadable x86-64 library, lacks the
        query symbol, or does not answer for ABI version 6. ``query_symbol`` names the query function (a static
        library's is its own); ``bind`` False only reads the library (``declared_imports``): never dispatch it.
        """
        data = memoryview(elf_bytes).cast("B")
        check_elf(data, name)
        code = machine_code()
        self = object.__new__(cls)
        self.name = name
        self._closed = False
        self._lock = threading.Lock()
        fd, path = tempfile.mkstemp(prefix="iree-lens-", suffix=".so")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            try:
                # Our own handle from dlopen (for dlclose) rather than CDLL's private ``_handle``.
                self._dl_handle = _ctypes.dlopen(path, os.RTLD_NOW | os.RTLD_LOCAL)
                self._dll = _c.CDLL(path, handle=self._dl_handle)
            except OSError as e:
                raise ExecutableLoadError(f"executable {name!r} cannot be loaded: {e}{_sanitizer_note(str(e))}") from None
        finally:
            os.unlink(path)  # the loader keeps its mapping; nothing is left on disk
        try:
            # A static library's query is named after its executable (``mm_dispatch_0_library_query``).
            query = getattr(self._dll, query_symbol)
        except AttributeError:
            self._unload()
            raise ExecutableLoadError(f"executable {name!r} has no {query_symbol} symbol") from None
        query.restype = _c.c_void_p
        query.argtypes = (_c.c_uint32, _c.c_void_p)
        self.query_address = _c.cast(query, _c.c_void_p).value

        self._environment = EnvironmentStruct()
        self._environment.processor_data[:] = processor_data()
        result = query(LIBRARY_VERSION, _c.addressof(self._environment))
        if not result:
            self._unload()
            raise ExecutableLoadError(
                f"executable {name!r} does not answer for executable library version {LIBRARY_VERSION}"
            )
        # The query returns header**; the header pointer is the library struct's first field.
        lib = LibraryV0Struct.from_address(result)
        header = lib.header.contents
        if header.version != LIBRARY_VERSION:
            self._unload()
            raise ExecutableLoadError(
                f"executable {name!r} reports library version {header.version}, expected 6"
            )
        self._lib = lib
        self.library_name = c_string(_c.cast(lib.header, _c.POINTER(_c.c_void_p))[1])
        self.features = header.features
        self.sanitizer = header.sanitizer
        try:
            self.imports = self._read_imports(lib)
            self.exports = self._read_exports(lib)
        except HalError:
            self._unload()
            raise
        self.constant_count = lib.constants_count
        self.sources = tuple(
            SourceFile(
                c_string(f.path, f.path_length),
                _c.string_at(f.content, f.content_length) if f.content else b"",
            )
            for f in (lib.sources_files[i] for i in range(lib.sources_count if lib.sources_files else 0))
        )
        self._export_index = {e.name: e.ordinal for e in self.exports}
        self._functions = [DISPATCH_FN(lib.exports_ptrs[i]) for i in range(len(self.exports))]
        self._export_addresses = [lib.exports_ptrs[i] for i in range(len(self.exports))]

        if not bind:  # only read (``declared_imports``): neither its constants nor its imports are given
            return self
        if len(constants) != self.constant_count:
            self._unload()
            raise ExecutableLoadError(
                f"executable {name!r} declares {self.constant_count} constants, {len(constants)} were given"
            )
        self._constants = (_c.c_uint32 * max(1, len(constants)))(*(int(v) & 0xFFFFFFFF for v in constants))
        self._environment.constants = _c.addressof(self._constants) if constants else None
        self._bind_imports(imports or {}, code.import_thunk_address)
        return self

    @classmethod
    def declared_imports(cls, elf_bytes: bytes | bytearray | memoryview, name: str = "executable") -> tuple[LibraryImport, ...]:
        """The functions a library imports (from executable plugins, at load), read without resolving them:
        what ``inspect`` shows; the library is unloaded again."""
        library = cls.load(elf_bytes, name, bind=False)
        imports = library.imports
        library.close()
        return imports

    def _read_imports(self, lib: LibraryV0Struct) -> tuple[LibraryImport, ...]:
        out = []
        for i in range(lib.imports_count if lib.imports_symbols else 0):
            symbol = (lib.imports_symbols[i] or b"").decode("utf-8", "replace")
            out.append(LibraryImport(i, symbol.lstrip("?"), symbol.startswith("?")))
        return tuple(out)

    def _read_exports(self, lib: LibraryV0Struct) -> tuple[ExecutableExport, ...]:
        count = lib.exports_count
        if count and (not lib.exports_ptrs or not lib.exports_attrs or not lib.exports_names):
            raise ExecutableLoadError(
                f"executable {self.name!r} has {count} exports but no function/attribute/name table"
            )
        parameter_names = lib.exports_parameter_names
        exports = []
        for i in range(count):
            a = lib.exports_attrs[i]
            attrs = DispatchAttributes(
                flags=a.flags,
                local_memory_pages=a.local_memory_pages,
                constant_count=a.constant_count,
                binding_count=a.binding_count,
                workgroup_size=(a.workgroup_size_x, a.workgroup_size_y, a.workgroup_size_z),
                parameter_count=a.parameter_count,
            )
            params: list[DispatchParameter] = []
            if lib.exports_params and lib.exports_params[i]:
                for p in (lib.exports_params[i][k] for k in range(a.parameter_count)):
                    pname = None
                    if parameter_names and p.name != 0xFFFF:
                        pname = (parameter_names[p.name] or b"").decode("utf-8", "replace")
                    params.append(
                        DispatchParameter(
                            PARAMETER_TYPES.get(p.type, f"type {p.type}"), p.size, p.flags, pname, p.offset
                        )
                    )
            location = None
            if lib.exports_source_locations:
                loc = lib.exports_source_locations[i]
                if loc.path:
                    location = SourceLocation(c_string(loc.path, loc.path_length), loc.line)
            stages: list[tuple[str, SourceLocation]] = []
            if lib.exports_stage_locations:
                table = lib.exports_stage_locations[i]
                for k in range(table.count if table.names and table.locations else 0):
                    loc = table.locations[k]
                    stages.append(
                        (
                            (table.names[k] or b"").decode(),
                            SourceLocation(c_string(loc.path, loc.path_length), loc.line),
                        )
                    )
            tag = (lib.exports_tags[i] or b"").decode() if lib.exports_tags else None
            exports.append(
                ExecutableExport(
                    ordinal=i,
                    name=(lib.exports_names[i] or b"").decode("utf-8", "replace"),
                    attributes=attrs,
                    tag=tag or None,
                    parameters=tuple(params),
                    source_location=location,
                    stage_locations=tuple(stages),
                )
            )
        return tuple(exports)

    def _bind_imports(self, provided: Mapping[str, ImportFunction], thunk_address: int) -> None:
        count = len(self.imports)
        self._import_refs = list(provided.values())  # keep ctypes callbacks alive
        if not count:
            return
        funcs = (_c.c_void_p * count)()
        contexts = (_c.c_void_p * count)()
        for imp in self.imports:
            fn = provided.get(imp.name)
            if fn is not None:
                funcs[imp.ordinal] = fn if isinstance(fn, int) else _c.cast(fn, _c.c_void_p).value
        # The rest from the executable plugins the process registered (iree-run-module's --executable_plugin).
        from engine.runtime.hal.executable_plugins import NO_PLUGIN, registered_plugins, resolve_imports

        symbols = [("?" if imp.optional else "") + imp.name for imp in self.imports]
        try:
            missing = resolve_imports(symbols, funcs, contexts)
        except HalError as e:
            self._unload()
            raise ExecutableLoadError(f"executable {self.name!r}: {e}") from None
        if missing:
            self._unload()
            plugins = registered_plugins()
            given = (f"none of the executable plugins given ({', '.join(str(p.path) for p in plugins)}) provides it"
                     if plugins else "no executable plugin was given")  # fmt: skip
            raise ExecutableLoadError(
                f"executable {self.name!r} imports {', '.join(repr(m) for m in missing)}, {NO_PLUGIN}: "
                f"{given}; give the plugin that does with --executable-plugin=FILE (iree-run-module's "
                "--executable_plugin)"
            )
        self._import_tables = (funcs, contexts)
        self._environment.import_thunk = thunk_address
        self._environment.import_funcs = _c.addressof(funcs)
        self._environment.import_contexts = _c.addressof(contexts)

    def _unload(self) -> None:
        if getattr(self, "_dll", None) is not None and not self._closed:
            _ctypes.dlclose(self._dl_handle)
        self._closed = True

    def close(self) -> None:
        """Unload the library. Dispatching it afterwards raises ``HalError``."""
        with self._lock:
            self._unload()

    def __enter__(self) -> CpuExecutableLibrary:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- lookups --

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def lock(self) -> threading.Lock:
        """Held while a dispatch runs or the library closes (a prepared dispatch takes it too)."""
        return self._lock

    def export(self, export: int | str) -> ExecutableExport:
        """An export by ordinal or by name; ``HalError`` when there is no such export."""
        if isinstance(export, str):
            if export not in self._export_index:
                raise HalError(f"executable {self.name!r} has no export named {export!r}")
            return self.exports[self._export_index[export]]
        if not 0 <= export < len(self.exports):
            raise HalError(
                f"export ordinal {export} out of range for {self.name!r} ({len(self.exports)} exports)"
            )
        return self.exports[export]

    def export_address(self, export: int | str) -> int:
        """The address of an export's dispatch function in this process (for mapping faults to code)."""
        return self._export_addresses[self.export(export).ordinal]

    def dispatch_function(self, export: int | str) -> DISPATCH_FN:
        """An export's dispatch function, callable as ``fn(environment, dispatch_state, workgroup_state)``."""
        return self._functions[self.export(export).ordinal]

    @property
    def environment_address(self) -> int:
        """The address of the library's ``iree_hal_executable_environment_v0_t`` (every dispatch passes it)."""
        return _c.addressof(self._environment)

    @property
    def load_base(self) -> int:
        """The address the ELF was loaded at: ELF virtual address + ``load_base`` = runtime address."""

        class _DlInfo(_c.Structure):
            _fields_ = [
                ("fname", _c.c_char_p),
                ("fbase", _c.c_void_p),
                ("sname", _c.c_char_p),
                ("saddr", _c.c_void_p),
            ]

        info = _DlInfo()
        libc = _c.CDLL(None)
        libc.dladdr.argtypes = (_c.c_void_p, _c.POINTER(_DlInfo))
        if not libc.dladdr(self.query_address, _c.byref(info)):
            raise HalError(f"cannot find where {self.name!r} is loaded")
        return info.fbase or 0

    # -- dispatching --

    def prepare_dispatch(
        self,
        export: int | str,
        workgroup_count: Sequence[int],
        constants: Sequence[int] = (),
        bindings: Sequence[object] = (),
        *,
        workgroup_size: Sequence[int] | None = None,
        dynamic_local_memory: int = 0,
        processor_id: int = 0,
        min_alignment: int = BINDING_ALIGNMENT,
    ) -> PreparedDispatch:
        """Check the arguments and build the dispatch's structs; run it with ``.run()`` (any number of times).

        ``bindings`` are writable, C-contiguous numpy arrays or buffer-protocol objects (their memory is
        passed to the kernel as is: zero-copy, and the kernel writes its results there).
        ``constants`` are the dispatch's 32-bit push constants (negative values are taken mod 2**32).
        ``workgroup_size`` defaults to (1, 1, 1), what local-sync passes for a VM dispatch.
        Each binding must start on a ``min_alignment`` boundary (IREE guarantees 64 bytes and kernels
        use aligned vector loads); lower it only for a kernel known to need less.
        """
        return PreparedDispatch(
            self,
            self.export(export),
            workgroup_count,
            constants,
            bindings,
            workgroup_size,
            dynamic_local_memory,
            processor_id,
            min_alignment,
        )

    def dispatch(
        self,
        export: int | str,
        workgroup_count: Sequence[int],
        constants: Sequence[int] = (),
        bindings: Sequence[object] = (),
        *,
        native_loop: bool = True,
    ) -> None:
        """Run every workgroup of one dispatch, as local-sync does; ``DispatchError`` if one fails.

        ``native_loop`` runs the workgroup loop in machine code (fast, GIL released); ``False``
        calls each workgroup from Python (the reference path, and what a per-workgroup stepper uses).
        A dispatch with another workgroup size, local memory, processor id or binding alignment is
        ``prepare_dispatch(...).run()``.
        """
        self.prepare_dispatch(export, workgroup_count, constants, bindings).run(native_loop=native_loop)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self.exports)} exports"
        return f"<CpuExecutableLibrary {self.name!r} ({self.library_name}) {state}>"


def aligned_empty(shape: int | Sequence[int], dtype: object = np.uint8) -> np.ndarray:
    """An uninitialised C-contiguous numpy array whose data starts on a ``BINDING_ALIGNMENT`` boundary."""
    dt = np.dtype(dtype)
    shape_t = (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(v) for v in shape)
    nbytes = int(np.prod(shape_t, dtype=np.int64)) * dt.itemsize
    raw = np.empty(nbytes + BINDING_ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % BINDING_ALIGNMENT
    return raw[start : start + nbytes].view(dt).reshape(shape_t)


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """A ``BINDING_ALIGNMENT``-aligned, C-contiguous, writable copy of ``array``."""
    out = aligned_empty(array.shape, array.dtype)
    out[...] = array
    return out


def _binding_address(
    binding: object, index: int, export: ExecutableExport, alignment: int
) -> tuple[object, int, int]:
    """``(array, address, length)`` of one binding, after the checks that keep the kernel from faulting."""
    arr = binding
    if not isinstance(arr, np.ndarray):
        try:
            arr = np.frombuffer(binding, dtype=np.uint8)
        except (TypeError, ValueError) as e:
            raise HalError(f"binding {index} of {export.name!r} is not an array or buffer: {e}") from None
    flags = arr.flags
    if not flags["C_CONTIGUOUS"]:
        raise HalError(f"binding {index} of {export.name!r} is not C-contiguous")
    if not flags["WRITEABLE"]:
        # Kernels may write into any binding (even one holding module constants); a read-only page would
        # crash the process instead of raising, so refuse it here.
        raise HalError(f"binding {index} of {export.name!r} is read-only; pass a writable copy")
    nbytes = arr.nbytes
    # c_char.from_buffer is ~3x cheaper than ndarray.ctypes.data, but needs at least one byte.
    address = _c.addressof(_c.c_char.from_buffer(arr)) if nbytes else arr.ctypes.data
    if address % alignment:
        # The kernel would fault on an aligned vector load; say so instead.
        raise HalError(
            f"binding {index} of {export.name!r} starts at {address:#x}, not on a {alignment}-byte "
            "boundary; allocate it with aligned_empty() or aligned_copy()"
        )
    return arr, address, nbytes


# The dispatch state and first workgroup state packed in one buffer (layouts checked against the structs).
_STATE_FORMAT = "<IIHHIIHBBQQQ" + "IIHHIQI4x"
_DS_SIZE = _c.sizeof(DispatchStateStruct)
_STATE_SIZE = _DS_SIZE + _c.sizeof(WorkgroupStateStruct)
if struct.calcsize(_STATE_FORMAT) != _STATE_SIZE:  # pragma: no cover
    raise ImportError("dispatch/workgroup state pack format does not match the structs")


class PreparedDispatch:
    """One dispatch with its argument structs built: ``run()`` runs all workgroups, ``run_workgroup`` one.

    Holds references to the binding arrays for as long as it lives (their memory is used in place).
    """

    def __init__(
        self,
        library: CpuExecutableLibrary,
        export: ExecutableExport,
        workgroup_count: Sequence[int],
        constants: Sequence[int],
        bindings: Sequence[object],
        workgroup_size: Sequence[int] | None,
        dynamic_local_memory: int,
        processor_id: int,
        min_alignment: int = BINDING_ALIGNMENT,
    ) -> None:
        attrs = export.attributes
        try:
            cx, cy, cz = (int(v) for v in workgroup_count)
        except (TypeError, ValueError):
            raise HalError(
                f"dispatch of {export.name!r}: workgroup count must be 3 integers, got {workgroup_count}"
            ) from None
        if not (0 <= cx <= 0xFFFFFFFF and 0 <= cy <= 0xFFFFFFFF and 0 <= cz <= 0xFFFF):
            raise HalError(
                f"dispatch of {export.name!r}: workgroup count must be x, y < 2**32, z < 2**16; got {workgroup_count}"
            )
        sx, sy, sz = (1, 1, 1) if workgroup_size is None else (int(v) for v in workgroup_size)
        if not (1 <= sx <= 0xFFFFFFFF and 1 <= sy <= 0xFFFFFFFF and 1 <= sz <= 0xFFFF):
            raise HalError(
                f"dispatch of {export.name!r}: workgroup size must be 3 positive values, got {workgroup_size}"
            )
        m, n = len(constants), len(bindings)
        if m != attrs.constant_count:
            raise HalError(
                f"dispatch of {export.name!r}: constant count mismatch, "
                f"expected {attrs.constant_count} but was provided {m}"
            )
        if n != attrs.binding_count:
            raise HalError(
                f"dispatch of {export.name!r}: binding count mismatch, "
                f"expected {attrs.binding_count} but was provided {n}"
            )
        if dynamic_local_memory < 0 or min_alignment < 1:
            raise HalError(
                f"dispatch of {export.name!r}: bad dynamic_local_memory {dynamic_local_memory} "
                f"or min_alignment {min_alignment}"
            )
        self.library = library
        self.export = export
        self.workgroup_count = (cx, cy, cz)
        self._fn = library.dispatch_function(export.ordinal)
        self._fn_address = library.export_address(export.ordinal)
        resolved = [_binding_address(b, i, export, min_alignment) for i, b in enumerate(bindings)]
        self._arrays = [r[0] for r in resolved]  # keeps the memory alive while the kernel may use it
        local_size = attrs.local_memory_size + int(dynamic_local_memory)
        self._local_memory = (_c.c_uint8 * local_size)() if local_size else None

        # One buffer: [dispatch state][workgroup state][constants, 8-aligned][binding ptrs][binding lengths].
        constants_size = (4 * m + 7) & ~7
        buf = self._state = (_c.c_uint8 * (_STATE_SIZE + constants_size + 16 * n))()
        base = _c.addressof(buf)
        constants_at, ptrs_at = base + _STATE_SIZE, base + _STATE_SIZE + constants_size
        struct.pack_into(
            f"{_STATE_FORMAT}{m}I{constants_size - 4 * m}x{n}Q{n}Q",
            buf,
            0,
            sx, sy, sz, m, cx, cy, cz, 1, n,  # max_concurrency 1, like local-sync
            constants_at, ptrs_at, ptrs_at + 8 * n,
            0, 0, 0, 0, processor_id,
            _c.addressof(self._local_memory) if self._local_memory is not None else 0,
            local_size,
            *(int(v) & 0xFFFFFFFF for v in constants),
            *(r[1] for r in resolved),
            *(r[2] for r in resolved),
        )  # fmt: skip
        self._env_address = library.environment_address
        self._ds_address = base
        self._ws_address = base + _DS_SIZE
        self._ws: WorkgroupStateStruct | None = None

    @property
    def _workgroup_state(self) -> WorkgroupStateStruct:
        if self._ws is None:
            self._ws = WorkgroupStateStruct.from_buffer(self._state, _DS_SIZE)
        return self._ws

    @property
    def native_descriptor(self) -> tuple[int, int, int, int]:
        """(dispatch function, environment, dispatch state, workgroup state) addresses: this dispatch as the
        native batch loop (``native_loop``) takes it; valid while this object and its library live."""
        return (self._fn_address, self._env_address, self._ds_address, self._ws_address)

    @property
    def workgroup_total(self) -> int:
        x, y, z = self.workgroup_count
        return x * y * z

    def _check_open(self) -> None:
        if self.library.closed:
            raise HalError(
                f"executable {self.library.name!r} was closed; cannot dispatch {self.export.name!r}"
            )

    def _failed(self, code: int) -> DispatchError:
        ws = self._workgroup_state
        workgroup = (ws.workgroup_id_x, ws.workgroup_id_y, ws.workgroup_id_z)
        return DispatchError(self.library.name, self.export.name, workgroup, code)

    def run(
        self, *, native_loop: bool = True, on_workgroup: Callable[[int, int, int], None] | None = None
    ) -> None:
        """Run all workgroups in local-sync order (z, y, x); ``DispatchError`` at the first non-zero return.

        ``on_workgroup(x, y, z)``, when given, is called before each workgroup (Python loop only).
        """
        with self.library.lock:
            self._check_open()
            if native_loop and on_workgroup is None:
                code = machine_code().run_workgroups(
                    self._fn_address,
                    self._env_address,
                    self._ds_address,
                    self._ws_address,
                    MXCSR_FLUSH_DENORMALS,
                )
                if code:
                    raise self._failed(code)
                return
            fn, env, ds, ws_address, ws = (
                self._fn,
                self._env_address,
                self._ds_address,
                self._ws_address,
                self._workgroup_state,
            )
            cx, cy, cz = self.workgroup_count
            with FlushDenormals():
                for z in range(cz):
                    ws.workgroup_id_z = z
                    for y in range(cy):
                        ws.workgroup_id_y = y
                        for x in range(cx):
                            ws.workgroup_id_x = x
                            if on_workgroup is not None:
                                on_workgroup(x, y, z)
                            code = fn(env, ds, ws_address)
                            if code:
                                raise self._failed(code)

    def run_workgroup(self, x: int, y: int, z: int) -> None:
        """Run one workgroup (denormals flushed around it); ``DispatchError`` if it returns non-zero."""
        cx, cy, cz = self.workgroup_count
        if not (0 <= x < cx and 0 <= y < cy and 0 <= z < cz):
            raise HalError(
                f"workgroup ({x}, {y}, {z}) is outside the dispatch's count {self.workgroup_count}"
            )
        with self.library.lock:
            self._check_open()
            ws = self._workgroup_state
            ws.workgroup_id_x, ws.workgroup_id_y, ws.workgroup_id_z = x, y, z
            with FlushDenormals():
                code = self._fn(self._env_address, self._ds_address, self._ws_address)
            if code:
                raise self._failed(code)
