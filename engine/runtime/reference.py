"""The reference run: a program executed by IREE's own runtime (``iree.runtime``), the ground truth.

Inputs and outputs are the plain values of ``engine.runtime.function_io``, so the debug run's results can
be compared with these bit for bit and printed the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import HalError, LensError
from engine.runtime.element_types import ElementType, unpack
from engine.runtime.function_io import OpaqueRef, Scalar, Storage, Tensor, Value, split_cconv
from engine.runtime.hal.static_libraries import is_static_build
from engine.runtime.vmfb.module import ABI_MODEL, ASYNC_SUFFIX, COARSE_FENCES, takes_fences, without_fences
from engine.runtime.vmfb.transients import transients_problem


def _imports_parameters(module_path: str | Path) -> bool:
    """Whether the module depends on ``io_parameters``."""
    from engine.runtime.parameters import imports_parameters

    return _module_says(module_path, imports_parameters)


def _imports_inline_hal(module_path: str | Path) -> bool:
    """Whether the module depends on IREE's inline HAL (``hal_inline``, ``hal_loader``)."""
    from engine.runtime.hal.inline_modules import imports_inline_hal

    return _module_says(module_path, imports_inline_hal)


def _several_devices_problem(module_path: str | Path, given: int) -> str | None:
    """``declared_devices.several_devices_problem`` of the module file (None when it cannot be read)."""
    from engine.runtime.vmfb.declared_devices import several_devices_problem
    from engine.runtime.vmfb.module import open_vmfb

    try:
        return several_devices_problem(open_vmfb(module_path), Path(module_path).name, given)
    except LensError:
        return None


def _module_says(module_path: str | Path, question: Callable[[Any], bool]) -> bool:
    """``question`` of the module read from the .vmfb (IREE's Python module object does not list its imports);
    False when the file is not a module we can read (IREE says why, next)."""
    from engine.runtime.vmfb.module import open_vmfb

    try:
        return question(open_vmfb(module_path))
    except LensError:
        return False


class ReferenceRunError(LensError):
    """IREE's runtime refused to load or run a program; the message is IREE's status text.

    ``status`` is the IREE status code name found in that text (``INVALID_ARGUMENT``...), if any.
    """

    def __init__(self, message: str):
        super().__init__(message)
        found = re.search(r"\b([A-Z][A-Z_]+[A-Z]); ", message)
        self.status = found.group(1) if found else None


@dataclass
class ReferenceRunner:
    """One module loaded into IREE's runtime on one device (``local-sync``, ``local-task``, ``vulkan``...).

    Extra modules (for example the ``check`` module of IREE's e2e tests) are ``iree.runtime`` module objects
    or factories ``f(instance, device) -> module`` registered between ``hal`` and the program.
    """

    module_path: str | Path
    device_uri: str = "local-sync"
    extra_modules: list = field(default_factory=list)
    # An ``iree.runtime.HalModuleDebugSink``: its callback receives each trace point (a module compiled
    # with ``--iree-flow-trace-dispatch-tensors``) on the invoking thread, and may block there.
    debug_sink: Any = None
    # Called with the runner once its device exists, before the module's initializer runs: a debug sink that
    # reads the initializer's trace points (``read_buffer_view``) needs the runner then.
    on_loading: Any = None
    # The archives a program compiled with external parameters loads (IREE's ``io_parameters``, registered
    # when given or when the program imports it: none given, IREE names the scope it wants).
    parameters: Any = None
    # A multi-device build's devices after the first (``device_uri``), in the order the module selects them.
    more_device_uris: list[str] = field(default_factory=list)
    # The compiled modules the program calls (iree-run-module's ``--module``), registered before it; those it
    # needs and not given are looked for beside it (``engine.runtime.module_dependencies``).
    modules: list = field(default_factory=list)

    def __post_init__(self) -> None:
        import iree.runtime as rt  # the heavy import happens only when a reference run is wanted

        from engine.runtime.hal.devices import iree_device_uri

        self._rt = rt
        self._takes_fences: dict[str, bool] = {}  # function -> whether it takes coarse fences (``_coarse_fences``)
        try:
            self.instance = rt.VmInstance()
            _pass_plugins(rt)
            # A device of its own, released with the runner: not iree.runtime's process-wide cache, which keeps
            # every device until the process exits, and IREE's Vulkan driver on lavapipe keeps two threads
            # spinning at 100 % of a core each for as long as its device lives (12-50 ms to make one).
            self.device = _new_device(rt, iree_device_uri(self.device_uri))
            # A multi-device build's further devices (``--device`` once per device, as iree-run-module).
            self.more_devices = [_new_device(rt, iree_device_uri(uri)) for uri in self.more_device_uris]
            if self.more_devices:
                hal = rt.create_hal_module(self.instance, devices=[self.device, *self.more_devices],
                                           debug_sink=self.debug_sink)  # fmt: skip
            else:
                hal = rt.create_hal_module(self.instance, self.device, debug_sink=self.debug_sink)
            # Loaded into writable memory, as IREE's tools do: some kernels write in place into buffers imported
            # from the module's constant data, and a read-only map makes them crash (architecture note).
            with open(self.module_path, "rb") as fh:
                self.module = rt.VmModule.copy_buffer(self.instance, fh.read())
            # The compiled modules it calls (``modules``, or found beside it), dependencies first.
            from engine.runtime.module_dependencies import called_modules, linked_modules

            # (Only for a program that calls some: IREE reads and refuses a damaged file, next, in its words.)
            calls = self.modules or _module_says(self.module_path, lambda m: bool(called_modules(m)))
            self.linked = linked_modules(self.module_path, self.modules) if calls else []
            linked = [rt.VmModule.copy_buffer(self.instance, m.path.read_bytes()) for m in self.linked]
            extra = [m(self.instance, self.device) if callable(m) else m for m in self.extra_modules]
            self.found_parameters = ()
            if self.parameters is None and _imports_parameters(self.module_path):
                # Given none, a program that loads weights takes the archive beside it that holds them.
                from engine.runtime.parameters import given_or_beside
                from engine.runtime.vmfb.module import open_vmfb

                self.parameters, self.found_parameters = given_or_beside(
                    self.module_path, open_vmfb(self.module_path), None
                )
            if self.parameters is not None or _imports_parameters(self.module_path):
                from engine.runtime.parameters import ParameterArchives

                extra.insert(0, (self.parameters or ParameterArchives()).io_parameters_module(self.instance))
            if self.on_loading is not None:
                self.on_loading(self)
            self.context = rt.VmContext(self.instance, [hal, *extra, *linked, self.module])
        except (RuntimeError, ValueError, OSError, HalError) as e:
            if _imports_inline_hal(self.module_path):
                from engine.runtime.hal.inline_modules import INLINE_EXECUTION_FLAG

                raise ReferenceRunError(
                    f"cannot load {self.module_path}: it is an {INLINE_EXECUTION_FLAG} build, which "
                    "imports IREE's inline HAL (hal_inline, hal_loader); IREE's Python runtime, the reference "
                    "engine, does not register it: run it on the debug engine (or with iree-run-module)"
                ) from None
            if _module_says(self.module_path, is_static_build):
                raise ReferenceRunError(
                    f"cannot load {self.module_path}: it is a static-library build (--iree-llvmcpu-link-static), "
                    "whose kernels a host program links and registers; IREE's Python runtime, the reference engine, "
                    "has none: run it on the debug engine, which loads them from the object file the build wrote"
                ) from None
            several = _several_devices_problem(self.module_path, 1 + len(self.more_device_uris))
            if several is not None:  # said plainly, not as IREE's target attribute of a device not found
                raise ReferenceRunError(f"cannot load {self.module_path}: INCOMPATIBLE; {several}") from None
            unresolved = _unresolved_imports(self.module_path) if "no executable loader registered" in str(e) else None
            if unresolved is not None:  # IREE says "no loader" of an executable whose imports no plugin provides
                raise ReferenceRunError(f"cannot load {self.module_path}: {unresolved}") from None
            raise ReferenceRunError(f"cannot load {self.module_path} on {self.device_uri}: {e}") from None

    @property
    def function_names(self) -> list[str]:
        return [n for n in self.module.function_names if not n.startswith("__")]

    def _lookup(self, function: str):
        fn = self.module.lookup_function(function)
        if fn is None:
            raise ReferenceRunError(
                f"function {function!r} not found in {self.module.name}; exports: {', '.join(self.function_names)}"
            )
        return fn

    def _coarse_fences(self, function: str) -> bool:
        """``takes_fences``: the reflection says so, or the program is a torch import's ``F$async`` (read from
        the file once per function: ``cconv`` and ``invoke`` both ask, at every call)."""
        known = self._takes_fences.get(function)
        if known is None:
            known = dict(self._lookup(function).reflection).get(ABI_MODEL) == COARSE_FENCES or (
                function.endswith(ASYNC_SUFFIX) and _module_says(self.module_path, lambda m: takes_fences(m, function))
            )
            self._takes_fences[function] = known
        return known

    def cconv(self, function: str) -> str:
        """The calling convention of an exported function as callers pass values, e.g. ``0rr_r``: an
        async-external (coarse-fences) function's wait and signal fences are the runner's, as iree-run-module
        adds them (``invoke``)."""
        # VmFunction prints as `<VmFunction name(0rr_r), reflection = ...>`.
        text = repr(self._lookup(function))
        cconv = text[text.index("(") + 1 : text.index(")")]
        return without_fences(cconv) if self._coarse_fences(function) else cconv

    def invoke(self, function: str, args: list[Value]) -> list[Value]:
        """Call ``function`` with ``args``; returns its results as plain values (tensors copied to the host)."""
        rt = self._rt
        fn = self._lookup(function)
        cconv = self.cconv(function)
        arg_kinds, result_kinds = split_cconv(cconv)
        if len(args) != len(arg_kinds):
            raise ReferenceRunError(f"{function} takes {len(arg_kinds)} input{'s' if len(arg_kinds) != 1 else ''} (calling convention {cconv}); {len(args)} given")
        problem = transients_problem(dict(fn.reflection), function, args)
        if problem is not None:
            raise ReferenceRunError(problem)
        arg_list, ret_list = rt.VmVariantList(len(args) + 2), rt.VmVariantList(len(result_kinds))
        signal = None
        try:
            for kind, value in zip(arg_kinds, args):
                self._push(arg_list, kind, value)
            if self._coarse_fences(function):
                # As iree-run-module: an empty wait fence (nothing to wait for), a signal fence 0 -> 1 awaited.
                signal = rt.HalFence.create_at(self.device.create_semaphore(0), 1)
                arg_list.push_ref(rt.HalFence(1))
                arg_list.push_ref(signal)
            try:
                self.context.invoke(fn, arg_list, ret_list)
                if signal is not None:
                    signal.wait()
            except (RuntimeError, ValueError) as e:
                raise ReferenceRunError(str(e)) from None
            return [self._pull(ret_list, i, kind) for i, kind in enumerate(result_kinds)]
        finally:
            # IREE's buffers do not keep their device alive, and a returning frame lets go of ``self`` (which
            # may hold the device's last reference: ``ReferenceRunner(...).invoke(...)``) before its other
            # locals: the call's buffers go first.
            del arg_list, ret_list, signal

    # -- marshaling

    def _push(self, arg_list, kind: str, value: Value) -> None:
        rt = self._rt
        if kind in "iI":
            arg_list.push_int(int(value.value if isinstance(value, Scalar) else value))
        elif kind in "fF":
            arg_list.push_float(float(value.value if isinstance(value, Scalar) else value))
        elif isinstance(value, (Tensor, Storage)):
            tensor = value.tensor if isinstance(value, Storage) else value
            bv = self.device.allocator.allocate_buffer_copy(
                memory_type=rt.MemoryType.DEVICE_LOCAL,
                allowed_usage=rt.BufferUsage.DEFAULT,
                device=self.device,
                buffer=np.asarray(tensor.array, order="C"),  # ascontiguousarray makes rank 0 rank 1
                element_type=tensor.element_type.code,
            )
            # A storage input is the buffer alone, as iree-run-module passes an ``&`` input.
            arg_list.push_ref(bv.get_buffer() if isinstance(value, Storage) else bv)
        else:
            raise ReferenceRunError(f"cannot pass {value!r} as a ref argument")

    def _pull(self, ret_list, index: int, kind: str) -> Value:
        rt = self._rt
        if kind in "iIfF":
            return Scalar({"i": "i32", "I": "i64", "f": "f32", "F": "f64"}[kind], ret_list.get_variant(index))
        try:
            bv = ret_list.get_as_object(index, rt.HalBufferView)
        except (RuntimeError, ValueError, TypeError):
            variant = ret_list.get_variant(index)
            return OpaqueRef(None if variant is None else type(variant).__name__)
        if bv is None:
            return OpaqueRef(None)
        try:
            element = ElementType(int(bv.element_type))
            if element.packed:  # a result of i4, ui2...: its values one a byte, as the debug engine gives them
                return Tensor(unpack(self.read_buffer_view(bv), element, tuple(int(d) for d in bv.shape)), element)
            return Tensor(self.read_buffer_view(bv), element)
        finally:
            del bv  # before ``self`` (see ``invoke``)

    def read_buffer_view(self, bv) -> np.ndarray:
        rt = self._rt
        element_type = ElementType(int(bv.element_type))
        shape = tuple(bv.shape)
        nbytes = int(bv.byte_length)
        try:
            raw = np.array(bv.map().asarray([nbytes], np.dtype(np.uint8)), copy=True)
        except RuntimeError:
            # Device-local memory that cannot be mapped (Vulkan): copy through a host-visible staging buffer.
            staging = self.device.allocator.allocate_buffer(
                memory_type=rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE,
                allowed_usage=rt.BufferUsage.TRANSFER | rt.BufferUsage.MAPPING,
                allocation_size=max(nbytes, 1),
            )
            sem = self.device.create_semaphore(0)
            try:
                self.device.queue_copy(bv.get_buffer(), staging, [(sem, 0)], [(sem, 1)])
                sem.wait(1)
                raw = np.array(staging.map().asarray([nbytes], np.dtype(np.uint8)), copy=True)
            finally:
                del staging, sem  # before ``self`` (see ``invoke``)
        if element_type.packed:  # several elements a byte (i4...): numpy has no such dtype; the bytes as they are
            return raw
        return raw.view(element_type.dtype).reshape(shape)


_passed_plugins: set[str] = set()


def _pass_plugins(rt) -> None:
    """Hand IREE's runtime the executable plugins registered since the last device it created (its flags are
    the process's; the list only grows)."""
    from engine.runtime.hal.executable_plugins import iree_runtime_flags

    new = [flag for flag in iree_runtime_flags() if flag not in _passed_plugins]
    if new:
        rt.flags.parse_flags(*new)
        _passed_plugins.update(new)


def _new_device(rt, uri: str):
    """A device of its own (not iree.runtime's process-wide cache). Where plugins were given, of a driver made
    now too: IREE's local drivers read ``--executable_plugin`` when the driver is made, and iree.runtime keeps
    the first one it made of each driver."""
    if _passed_plugins and uri.split(":", 1)[0] in ("local-sync", "local-task"):
        try:  # iree.runtime (3.13) makes an uncached driver only through its binding module
            from iree.runtime._binding import create_hal_driver
        except ImportError:
            return rt.get_device(uri, cache=False)  # the plugins reach drivers made after they were given
        return create_hal_driver(uri).create_device_by_uri(uri)
    return rt.get_device(uri, cache=False)


def _unresolved_imports(module_path: str) -> str | None:
    """Why a CPU executable of the module cannot be loaded, where the reason is a function it imports that
    no executable plugin provides (IREE's runtime reports that as no loader for the format); None else."""
    from engine.errors import ExecutableLoadError
    from engine.runtime.hal.cpu_library import CpuExecutableLibrary
    from engine.runtime.hal.executable_plugins import NO_PLUGIN
    from engine.runtime.hal.formats import is_native_cpu
    from engine.runtime.vmfb.module import open_vmfb

    try:
        executables = [e for e in open_vmfb(module_path).executables if is_native_cpu(e.format)]
    except LensError:
        return None
    for executable in executables:
        try:
            CpuExecutableLibrary.load(bytes(executable.data), executable.name).close()
        except ExecutableLoadError as e:
            if NO_PLUGIN in str(e):
                return str(e)
        except LensError:
            continue
    return None

