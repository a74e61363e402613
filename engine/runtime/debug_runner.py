"""The debug engine's runner: a program executed by our stepping VM and emulated HAL, with the surface of
``engine.runtime.reference.ReferenceRunner`` (IREE's runtime). ``iree-lens run``/``capture``/``profile``
and the debug session load programs through it.

``DebugRunner`` and ``engine.runtime.reference.ReferenceRunner`` take and return the same plain values
(``engine.runtime.function_io``), so ``iree-lens run`` prints the same text on either engine and tests
compare them directly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import DebugRunError, LensError
from engine.runtime.function_io import OpaqueRef, Scalar, Storage, Tensor, Value, split_cconv
from engine.runtime.hal.buffers import HalBuffer, HalBufferView
from engine.runtime.hal.convert import buffer_view_from_tensor, tensor_from_buffer_view
from engine.runtime.hal.devices import create_device
from engine.runtime.hal.inline_modules import imports_inline_hal, inline_modules
from engine.runtime.hal.module import HalModule
from engine.runtime.hal.parameters_module import IoParametersModule
from engine.runtime.hal.static_libraries import StaticLibraries, is_static_build, static_object
from engine.runtime.hal.sync import HalFence
from engine.runtime.module_dependencies import linked_modules
from engine.runtime.parameters import ParameterArchives, given_or_beside, imports_parameters
from engine.runtime.vm.context import ModuleInstance, VmContext
from engine.runtime.vm.native import NativeModule, VmStatusError
from engine.runtime.vm.trace import format_step
from engine.runtime.vm.values import VmList, ref_type_name
from engine.runtime.vmfb.declared_devices import several_devices_problem
from engine.runtime.vmfb.module import VmfbModule, caller_calling_convention, open_vmfb, takes_fences
from engine.runtime.vmfb.transients import reflection_of, transients_problem

# What a multi-device build can be run with (``several_devices_problem``): the run command's devices are the
# emulated HAL's, but the debugger's stops, tensors and timings follow a single device's dispatches.
_ONE_DEVICE_COMMANDS = (
    "; the debugger, capture, profile and diverge follow one device's dispatches and do not run such a build"
)

# IREE's export of a module's initializer (its globals). A runner made to call it leaves it to that call
# (``run_init=False``): IREE runs it once, on globals it has not set.
INITIALIZER = "__init"


class DebugRunner:
    """One module loaded into our VM with the emulated HAL on one device.

    ``trace`` receives one line per executed instruction (``--trace``). ``extra_modules`` are native modules
    (for example the ``check`` module) registered between ``hal`` and the program; ``parameters``: the
    archives a program compiled with external parameters loads (``io_parameters``). ``before_init`` is called
    with the runner once the program is loaded and before its initializer (``__init``) runs, so that a
    profiler or tracer attached there sees the initializer's work too. ``run_init`` False leaves the
    initializer to the caller (``invoke("__init")``, or a debugger's call of it). ``modules``: the compiled
    modules the program calls (iree-run-module's ``--module``), registered before it, dependencies first; one
    it needs and not given is looked for beside it (``engine.runtime.module_dependencies``), and its
    initializer runs as the program loads.
    """

    def __init__(
        self,
        module_path: str | Path,
        device_uri: str = "local-sync",
        *,
        trace: Callable[[str], Any] | None = None,
        extra_modules: list[NativeModule] | None = None,
        hal_module: HalModule | None = None,
        before_init: Callable[[DebugRunner], Any] | None = None,
        parameters: ParameterArchives | None = None,
        run_init: bool = True,
        modules: list[str | Path] | tuple = (),
    ):
        self.module_path = str(module_path)
        self.device_uri = device_uri
        # Told of each call's results as the VM returned them (buffer views, lists, numbers), before the host
        # reads them back: where ``run --write-replay`` records that read-back (engine/replay/record_run.py).
        self.result_listeners: list[Callable[[list], Any]] = []
        self.static_object: Path | None = None  # a static-library build's object file, loaded for its kernels
        try:
            # Private copy-on-write mapping: kernels may write in place into buffers imported from rodata.
            self.module: VmfbModule = open_vmfb(module_path, writable=True)
            # A truncated file is refused here, as a file: not halfway through __init at the first constant.
            self.module.rodata_segments  # noqa: B018 - reading the table checks every segment's range
            given = len(hal_module.devices) if hal_module else 1
            several = several_devices_problem(self.module, Path(module_path).name, given)
            if several is not None:
                raise DebugRunError(several + _ONE_DEVICE_COMMANDS, "INCOMPATIBLE")
            self.device = hal_module.devices[0] if hal_module else create_device(device_uri)
            if is_static_build(self.module):  # its kernels in an object file, loaded as its host would
                self._give_static_libraries(module_path)
            self.hal = hal_module or HalModule(self.device)
            extra = list(extra_modules or [])
            # Given none, a program that loads weights takes the archive beside it that holds them.
            parameters, self.found_parameters = given_or_beside(module_path, self.module, parameters)
            if parameters is not None or imports_parameters(self.module):
                # Its weights from the archives given (none given: the first load names the one it wants).
                extra.insert(0, IoParametersModule(parameters))
            # The HAL buffer behind a !vm.buffer (an inline build's storage views; None elsewhere).
            self.storage_owner: Callable[[object], HalBuffer | None] = lambda view: None
            if imports_inline_hal(self.module):  # an inline-dynamic build: hal_inline and hal_loader, not hal
                inline = inline_modules(self.hal)
                self.storage_owner = inline[0].shared.owner
                extra[:0] = inline
            # The compiled modules it calls (``--module``, or found beside it): registered before it.
            self.linked = linked_modules(module_path, modules)
            linked = [open_vmfb(m.path, writable=True) for m in self.linked]
            self.context = VmContext([self.hal, *extra, *linked, self.module], call_init=False)
            if trace is not None:
                self.context.interpreter.trace_hook = lambda record: trace(format_step(record))
            if before_init is not None:
                before_init(self)
            for instance in self.context.instances:  # theirs first, as IREE initializes a context's modules
                if isinstance(instance, ModuleInstance) and instance.module in linked and any(
                    e.name == INITIALIZER for e in instance.module.exports
                ):
                    self.context.invoke_instance(instance, instance.function_ordinal(INITIALIZER), [])
            if run_init:
                self._init()
        except LensError as e:
            raise DebugRunError(self._message(e), self._status(e)) from e

    def _give_static_libraries(self, module_path) -> None:
        from engine.runtime.hal.cpu_device import CpuDevice

        found, looked = static_object(self.module, module_path)
        if found is None:
            raise DebugRunError(
                f"{Path(module_path).name} is a static-library build (--iree-llvmcpu-link-static): its kernels are "
                f"in the object file it wrote, not found here (looked for {', '.join(map(str, looked))}): keep it "
                "beside the module", "NOT_FOUND"
            )  # fmt: skip
        if not isinstance(self.device, CpuDevice):
            raise DebugRunError(f"a static-library build runs on the CPU (local-sync), not {self.device_uri}",
                                "INCOMPATIBLE")  # fmt: skip
        self.device.static_libraries = StaticLibraries(found)
        self.static_object = found

    @property
    def has_initializer(self) -> bool:
        return any(e.name == INITIALIZER for e in self.module.exports)

    def _init(self) -> None:
        if self.has_initializer:
            self.context.invoke(INITIALIZER, [])

    @staticmethod
    def _status(e: Exception) -> str | None:
        return e.code.name if isinstance(e, VmStatusError) else None

    @staticmethod
    def _message(e: Exception) -> str:
        describe = getattr(e, "describe", None)
        return describe() if callable(describe) else str(e)

    @property
    def function_names(self) -> list[str]:
        return [e.name for e in self.module.exports if not e.name.startswith("__")]

    def cconv(self, function: str) -> str:
        """The calling convention as callers pass values: an async (coarse-fences) function's wait and signal
        fences are the runner's (``vm_arguments``), as iree-run-module adds them."""
        cconv = caller_calling_convention(self.module, function)
        if not cconv:
            raise DebugRunError(
                f"function {function!r} not found in {self.module.name}; exports: {', '.join(self.function_names)}"
            )
        return cconv

    def vm_arguments(self, function: str, args: list[Value]) -> tuple[list, HalFence | None]:
        """The VM's arguments of a call of ``function`` with ``args`` (plain values, as ``cconv`` takes them),
        and the fence the call signals when it is a coarse-fences function (else None), which ``finish_call``
        checks. Its wait fence is null (nothing to wait for) and its signal fence a new semaphore's 0 -> 1, as
        iree-run-module passes them."""
        arg_kinds, _ = split_cconv(self.cconv(function))
        if len(args) != len(arg_kinds):
            raise DebugRunError(
                f"{function} takes {len(arg_kinds)} input{'s' if len(arg_kinds) != 1 else ''} "
                f"(calling convention {self.cconv(function)}); {len(args)} given"
            )
        problem = transients_problem(reflection_of(self.module, function), function, args)
        if problem is not None:
            raise DebugRunError(problem, "INVALID_ARGUMENT")
        vm_args = [self.to_vm(kind, value) for kind, value in zip(arg_kinds, args)]
        if not takes_fences(self.module, function):
            return vm_args, None
        signal = HalFence.new()
        return [*vm_args, None, signal], signal

    @staticmethod
    def finish_call(function: str, signal: HalFence | None) -> None:
        """Check a coarse-fences call's signal fence once it returned: queue work runs synchronously here, so
        a fence not reached by then never will be (IREE's tools would wait forever)."""
        if signal is None or signal.reached:
            return
        failure = signal.failure
        if failure is not None:
            raise DebugRunError(f"{function} failed its signal fence: {failure}", failure.code.name)
        raise DebugRunError(
            f"{function} returned without signaling its fence (an async-external function signals it when its "
            "work is done): waiting for it would never end"
        )

    def invoke(self, function: str, args: list[Value]) -> list[Value]:
        """Call ``function``; results as plain values (tensors copied to the host)."""
        _, result_kinds = split_cconv(self.cconv(function))
        vm_args, signal = self.vm_arguments(function, args)
        try:
            results = self.context.invoke(function, vm_args)
            self.finish_call(function, signal)
        except LensError as e:
            raise DebugRunError(self._message(e), self._status(e)) from e
        finally:
            # A trapped invocation leaves its frames for inspection; a runner starts the next call clean.
            self.context.interpreter.reset()
        for listener in self.result_listeners:
            listener(results)
        return [self.from_vm(kind, value) for kind, value in zip(result_kinds, results)]

    def to_vm(self, kind: str, value: Value):
        """A plain value as the VM takes it for an argument of cconv ``kind`` (a tensor becomes a buffer view
        on this runner's device)."""
        if kind in "iIfF":
            if isinstance(value, Scalar):
                return value.value
            raise DebugRunError(f"expected a scalar for a '{kind}' argument, got {value!r}")
        if isinstance(value, Tensor):
            return buffer_view_from_tensor(self.device, value)
        if isinstance(value, Storage):  # its buffer alone, as iree-run-module passes an ``&`` input
            return buffer_view_from_tensor(self.device, value.tensor).buffer
        if isinstance(value, OpaqueRef) and value.type_name is None:
            return None
        raise DebugRunError(f"cannot pass {value!r} as a ref argument")

    def from_vm(self, kind: str, value) -> Value:
        """A VM result of cconv ``kind`` as a plain value (buffer views copied to host tensors)."""
        if kind in "iIfF":
            return Scalar({"i": "i32", "I": "i64", "f": "f32", "F": "f64"}[kind], _signed(kind, value))
        if value is None:
            return OpaqueRef(None)
        if isinstance(value, HalBufferView):
            return tensor_from_buffer_view(value)
        if isinstance(value, VmList):
            return [self.from_vm(_list_kind(value.element_type), v) for v in value.items]
        return OpaqueRef(ref_type_name(value))


def _signed(kind: str, value):
    if kind == "i":
        v = int(value) & 0xFFFFFFFF
        return v - (1 << 32) if v & 0x80000000 else v
    if kind == "I":
        v = int(value) & 0xFFFFFFFFFFFFFFFF
        return v - (1 << 64) if v & (1 << 63) else v
    return float(value)


def _list_kind(element_type: str) -> str:
    return {"i32": "i", "i64": "I", "f32": "f", "f64": "F"}.get(element_type, "r")


__all__ = ["DebugRunner", "DebugRunError", "create_device"]
