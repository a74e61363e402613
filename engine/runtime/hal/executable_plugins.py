"""Executable plugins: shared libraries that provide the functions CPU executables import at run time
(IREE's ``iree/hal/local/executable_plugin.h``; its samples/custom_dispatch/cpu/plugin). A kernel that calls
a function its executable does not define names it in the library's import table; IREE's runtime asks each
plugin given with ``--executable_plugin=FILE`` to resolve those names when it loads the executable, the most
recently given first, and passes the plugin's context to every call.

IREE Lens does the same for the debug engine (``CpuExecutableLibrary`` asks ``resolve_imports``) and hands
the files to IREE's runtime as that flag (``iree_runtime_flags``). As in IREE, plugins belong to the process:
registered once (``register_plugins``), they stay loaded until it ends, since the executables loaded with
their functions may outlive any one run.
"""

from __future__ import annotations

import _ctypes
import ctypes
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.errors import HalError

PLUGIN_VERSION = 1  # IREE_HAL_EXECUTABLE_PLUGIN_VERSION_0_1, the only (latest) one
QUERY_SYMBOL = "iree_hal_executable_plugin_query"
STATUS_CODE_MASK = 0x1F
STATUS_NOT_FOUND = 5
STATUS_RESOURCE_EXHAUSTED = 8
RESOLUTION_MISSING_OPTIONAL = 1
SANITIZERS = {1: "address", 2: "memory", 3: "thread", 4: "undefined"}
NO_PLUGIN = "which it does not define"  # said of an executable's import no plugin provides (cpu_library)
EMBEDDED_PREFIX = "embedded:"  # IREE's spelling of a standalone (embedded-ELF) plugin; loaded alike here


class PluginError(HalError):
    """A plugin file that cannot be used (missing, not a plugin, another version, refused to load)."""


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("name", ctypes.c_char_p), ("description", ctypes.c_char_p),
                ("features", ctypes.c_uint32), ("sanitizer", ctypes.c_int32), ("reserved", ctypes.c_uint64 * 8)]  # fmt: skip


_AllocatorCtl = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                 ctypes.POINTER(ctypes.c_void_p))  # fmt: skip


class _Allocator(ctypes.Structure):
    _fields_ = [("self", ctypes.c_void_p), ("ctl", _AllocatorCtl)]


class _Environment(ctypes.Structure):
    _fields_ = [("host_allocator", _Allocator)]


class _ResolveParams(ctypes.Structure):
    _fields_ = [("count", ctypes.c_size_t), ("symbol_names", ctypes.POINTER(ctypes.c_char_p)),
                ("out_fn_ptrs", ctypes.POINTER(ctypes.c_void_p)), ("out_fn_contexts", ctypes.POINTER(ctypes.c_void_p))]  # fmt: skip


_Load = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_Environment), ctypes.c_size_t, ctypes.c_void_p,
                         ctypes.POINTER(ctypes.c_void_p))  # fmt: skip
_Unload = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_Resolve = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(_ResolveParams),
                            ctypes.POINTER(ctypes.c_uint32))  # fmt: skip


class _PluginV0(ctypes.Structure):
    _fields_ = [("header", ctypes.POINTER(_Header)), ("load", _Load), ("unload", _Unload), ("resolve", _Resolve)]


_Query = ctypes.CFUNCTYPE(ctypes.POINTER(_PluginV0), ctypes.c_uint32, ctypes.c_void_p)

_libc = ctypes.CDLL(None)
_libc.malloc.restype = _libc.calloc.restype = _libc.realloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]


@_AllocatorCtl
def _host_allocator(_self, command, params, inout_ptr):
    """IREE's allocator control for plugins: malloc (0), calloc (1), realloc (2), free (3)."""
    length = ctypes.cast(params, ctypes.POINTER(ctypes.c_size_t))[0] if params else 0
    if command == 3:
        _libc.free(inout_ptr[0])
        inout_ptr[0] = None
        return 0
    if command == 0:
        pointer = _libc.malloc(length)
    elif command == 1:
        pointer = _libc.calloc(1, length)
    elif command == 2:
        pointer = _libc.realloc(inout_ptr[0], length)
    else:
        return STATUS_NOT_FOUND
    if not pointer and length:
        return STATUS_RESOURCE_EXHAUSTED
    inout_ptr[0] = pointer
    return 0


_ENVIRONMENT = _Environment(_Allocator(None, _host_allocator))


@dataclass
class ExecutablePlugin:
    """One loaded plugin: its file, the name and description it gives, and its loaded state."""

    path: Path
    name: str
    description: str
    embedded: bool  # given as ``embedded:FILE``: IREE's runtime loads it with its embedded-ELF loader
    _plugin: _PluginV0
    _self: ctypes.c_void_p
    _handle: int

    @classmethod
    def load(cls, given: str | Path) -> ExecutablePlugin:
        text = str(given)
        path = Path(text[len(EMBEDDED_PREFIX):] if text.startswith(EMBEDDED_PREFIX) else text)
        if not path.is_file():
            raise PluginError(f"executable plugin {path} does not exist")
        try:
            handle = _ctypes.dlopen(str(path.resolve()), os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            raise PluginError(f"executable plugin {path} cannot be loaded: {e}") from None
        library = ctypes.CDLL(str(path), handle=handle)
        try:
            query = _Query((QUERY_SYMBOL, library))
        except AttributeError:
            raise PluginError(f"{path} is not an executable plugin: it exports no {QUERY_SYMBOL}") from None
        found = query(PLUGIN_VERSION, None)
        if not found or not found.contents.header:
            raise PluginError(f"executable plugin {path} does not answer for plugin version {PLUGIN_VERSION}")
        plugin = found.contents
        header = plugin.header.contents
        name = (header.name or b"").decode("utf-8", "replace")
        if header.sanitizer in SANITIZERS:  # IREE's runtime, built without one, refuses the same
            raise PluginError(f"executable plugin {path} ({name}) needs the {SANITIZERS[header.sanitizer]} sanitizer")
        state = ctypes.c_void_p()
        status = plugin.load(ctypes.byref(_ENVIRONMENT), 0, None, ctypes.byref(state))
        if status:
            raise PluginError(f"executable plugin {path} ({name}) refused to load: status {_code(status)}")
        description = (header.description or b"").decode("utf-8", "replace")
        return cls(path, name, description, text.startswith(EMBEDDED_PREFIX), plugin, state, handle)

    def resolve(self, names, functions, contexts) -> tuple[bool, bool]:
        """Fill the unresolved slots of ``functions``/``contexts`` it provides; (all required resolved, some
        optional one missing)."""
        params = _ResolveParams(len(names), names, functions, contexts)
        resolution = ctypes.c_uint32(0)
        status = self._plugin.resolve(self._self, ctypes.byref(params), ctypes.byref(resolution))
        code = _code(status)
        if code not in (0, STATUS_NOT_FOUND):
            raise PluginError(f"executable plugin {self.path} ({self.name}) failed to resolve imports: status {code}")
        return code == 0, bool(resolution.value & RESOLUTION_MISSING_OPTIONAL)


def _code(status) -> int:
    return int(status or 0) & STATUS_CODE_MASK


_registered: list[ExecutablePlugin] = []
_lock = threading.Lock()


def register_plugins(paths: Iterable[str | Path]) -> list[ExecutablePlugin]:
    """Load each plugin not loaded yet (in the order given: the last one is asked first); ``PluginError``
    naming a file that cannot be used. Returns them all."""
    with _lock:
        for given in paths:
            text = str(given)
            resolved = Path(text[len(EMBEDDED_PREFIX):] if text.startswith(EMBEDDED_PREFIX) else text).resolve()
            if any(p.path.resolve() == resolved for p in _registered):
                continue
            _registered.append(ExecutablePlugin.load(given))
        return list(_registered)


def forget_registered_plugins() -> None:
    """Ask no registered plugin again (a test that needs none, after one that gave some). They stay loaded:
    executables loaded with their functions may still run. IREE's runtime, told once, keeps them."""
    with _lock:
        _registered.clear()


def registered_plugins() -> list[ExecutablePlugin]:
    with _lock:
        return list(_registered)


def resolve_imports(symbols: Sequence[str], functions, contexts) -> list[str]:
    """Resolve the import ``symbols`` (``?`` before an optional one, as the library names them) through the
    registered plugins, the most recently registered first, as IREE's plugin manager does, into the slots of
    ``functions``/``contexts`` still NULL; returns the required ones no plugin provides."""
    names = (ctypes.c_char_p * len(symbols))(*(s.encode() for s in symbols))
    for plugin in reversed(registered_plugins()):
        complete, missing_optional = plugin.resolve(names, functions, contexts)
        if complete and not missing_optional:
            break
    return [s for i, s in enumerate(symbols) if not functions[i] and not s.startswith("?")]


def absolute_plugin(given: str) -> str:
    """``given`` with its file made absolute (``embedded:`` kept): what another process's folder still finds."""
    prefix = EMBEDDED_PREFIX if given.startswith(EMBEDDED_PREFIX) else ""
    return prefix + str(Path(given[len(prefix):]).resolve())


def iree_runtime_flags() -> list[str]:
    """The registered plugins as IREE's runtime takes them (its flags are read when a device is created)."""
    return [f"--executable_plugin={EMBEDDED_PREFIX if p.embedded else ''}{p.path.resolve()}" for p in registered_plugins()]
