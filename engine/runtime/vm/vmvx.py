"""VMVX executables (``vmvx-bytecode-fb``): nested VM bytecode modules run by our own interpreter.

The executable data is a complete ``.vmfb``; every export is a dispatch function with cconv
``0rrriiiiiiiii_v``: (local memory ``!vm.buffer``, constants ``!vm.buffer`` of u32, bindings
``!vm.list<!vm.buffer>``, workgroup id x/y/z, workgroup size x/y/z, workgroup count x/y/z)
(``runtime/src/iree/hal/local/loaders/vmvx_module_loader.c``). A dispatch calls it once per workgroup,
iterating z, then y, then x, with workgroup size (1, 1, 1), as local-sync does.

Pass ``interpreter=`` to ``dispatch`` to run the workgroups nested on that interpreter's call stack
(so a debugger stepping the host program sees, and can trace, the generated code); without it the
executable runs on its own interpreter.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from engine.errors import DispatchError, ExecutableLoadError, LensError
from engine.runtime.vm.context import ModuleInstance, VmContext
from engine.runtime.vm.interpreter import Interpreter, VmTrap
from engine.runtime.vm.values import VmBuffer, VmList
from engine.runtime.vm.vmvx_module import VmvxModule
from engine.runtime.vm.vmvx_native import DispatchContext, NativeExecutable, compile_module, pointer_table
from engine.runtime.vmfb.module import VmfbModule

DISPATCH_CCONV = "0rrriiiiiiiii_v"

# Interpreter that every executable without its own ``nest_in`` nests its dispatches on (see
# ``nest_dispatches_in``); process-wide, like a debugger's "step into dispatches" switch.
_default_nest: Interpreter | None = None


def nest_dispatches_in(interpreter: Interpreter | None) -> None:
    """Run VMVX dispatches nested on ``interpreter`` (its trace hook then sees the generated code's
    instructions and a trap shows host and kernel frames in one stack); ``None`` turns nesting off."""
    global _default_nest
    _default_nest = interpreter


FORMAT = "vmvx-bytecode-fb"

_native_default = True


def native_dispatches_enabled() -> bool:
    """Whether executables loaded from now on run their dispatches natively (see ``vmvx_native``)."""
    return _native_default


def run_dispatches_natively(enabled: bool) -> None:
    """Run VMVX dispatches of executables loaded from now on as native code (True, the default) or on the
    interpreter (False: what a differential test compares the native code with)."""
    global _native_default
    _native_default = enabled


# Stateless, so one instance serves every executable.
_VMVX_MODULE = VmvxModule()


class VmvxTrapError(DispatchError):
    """A VMVX dispatch function trapped in one workgroup; the message is the VM's trap (``__cause__``)."""

    def __init__(self, export: str, workgroup: tuple[int, int, int], trap: VmTrap):
        super().__init__("vmvx executable", export, workgroup, int(trap.code))
        x, y, z = workgroup
        self.args = (f"VMVX dispatch {export} workgroup ({x}, {y}, {z}) failed: {trap.describe()}",)


@dataclass(frozen=True)
class VmvxExportAttributes:
    binding_count: int | None
    constant_count: int | None
    local_memory: int
    parameter_count: int | None


@dataclass(frozen=True)
class VmvxExport:
    ordinal: int  # export ordinal (the HAL's function index)
    name: str
    function_ordinal: int  # internal function ordinal in the nested module
    attributes: VmvxExportAttributes


def _int_attr(attrs: dict[str, str], key: str) -> int | None:
    v = attrs.get(key)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


class VmvxExecutable:
    """A loaded VMVX executable: its nested module, a context of its own and its dispatch functions."""

    def __init__(self, module: VmfbModule, constants: list[int] | None = None):
        self.module = module
        try:
            # IREE's VMVX loader registers the `vmvx` microkernel module next to every executable; programs
            # compiled with --iree-vmvx-enable-microkernels import it (vmvx.add.2d.f32, vmvx.mmt4d...).
            self.context = VmContext([_VMVX_MODULE, module])
        except LensError as e:
            raise ExecutableLoadError(f"cannot link VMVX module @{module.name}: {e}") from e
        self.instance: ModuleInstance = self.context.main
        exports = []
        for e in module.exports:
            cconv = e.signature.calling_convention
            if e.name == "__set_constants" or e.name == "__init":
                continue
            if cconv != DISPATCH_CCONV:
                raise ExecutableLoadError(
                    f"VMVX export '{e.name}' has calling convention {cconv!r}, expected {DISPATCH_CCONV!r}"
                )
            a = e.signature.attrs
            attrs = VmvxExportAttributes(
                _int_attr(a, "binding_count"),
                _int_attr(a, "constant_count"),
                _int_attr(a, "local_memory") or 0,
                _int_attr(a, "parameter_count"),
            )
            exports.append(VmvxExport(len(exports), e.name, e.internal_ordinal, attrs))
        self.exports: list[VmvxExport] = exports
        # When set, dispatches run nested on this interpreter's call stack (step into generated code, trace).
        self.nest_in: Interpreter | None = None
        # Dispatches not nested on an interpreter run as native code (vmvx_native) unless this is False.
        self.native = native_dispatches_enabled()
        self._native: NativeExecutable | None = None
        if constants and any(e.name == "__set_constants" for e in module.exports):
            data = np.asarray(constants, dtype=np.uint32).view(np.uint8)
            self.context.invoke("__set_constants", [VmBuffer(data.copy(), False, "executable constants")])

    @classmethod
    def load(
        cls, data: bytes | bytearray | memoryview | np.ndarray, constants: list[int] | None = None
    ) -> VmvxExecutable:
        """Open the nested ``.vmfb`` (copied into private writable memory: kernels may write constants)."""
        raw = bytearray(
            np.asarray(data, dtype=np.uint8).tobytes() if isinstance(data, np.ndarray) else bytes(data)
        )
        try:
            module = VmfbModule.from_bytes(memoryview(raw), name="vmvx executable")
            _ = module.exports, module.functions
        except LensError as e:
            raise ExecutableLoadError(f"cannot read VMVX executable: {e}") from e
        return cls(module, constants)

    @property
    def export_names(self) -> list[str]:
        return [e.name for e in self.exports]

    def export_attrs(self, ordinal: int) -> VmvxExportAttributes:
        return self.exports[ordinal].attributes

    def dispatch(
        self,
        export_ordinal: int,
        workgroup_count: tuple[int, int, int],
        constants: list[int] | tuple[int, ...],
        bindings: list[np.ndarray],
        *,
        interpreter: Interpreter | None = None,
    ) -> int:
        """Run every workgroup of one dispatch; ``bindings`` are uint8 views the kernel writes through.

        Returns the number of VM instructions executed. Raises ``DispatchError`` wrapping the ``VmTrap``
        (``__cause__``) if the kernel traps.
        """
        if not 0 <= export_ordinal < len(self.exports):
            raise DispatchError(
                f"entry point ordinal {export_ordinal} out of bounds ({len(self.exports)} exports)"
            )
        export = self.exports[export_ordinal]
        const_data = np.asarray([int(c) & 0xFFFFFFFF for c in constants], dtype=np.uint32).view(np.uint8)
        const_buf = VmBuffer(const_data, False, "dispatch constants")
        binding_list = VmList(
            "!vm.buffer",
            [
                VmBuffer(np.asarray(b).reshape(-1).view(np.uint8), True, f"binding {k}")
                for k, b in enumerate(bindings)
            ],
        )
        local = VmBuffer.allocate(export.attributes.local_memory, "local memory")
        cx, cy, cz = (int(v) for v in workgroup_count)
        if interpreter is None:
            interpreter = self.nest_in or _default_nest
        if interpreter is None and self.native:
            driver = self._native_driver(export)
            if driver is not None:
                return self._dispatch_native(export, driver, (cx, cy, cz), local, const_buf, binding_list)
        t = interpreter if interpreter is not None else self.context.interpreter
        before = t.steps_executed
        try:
            for z in range(cz):
                for y in range(cy):
                    for x in range(cx):
                        args = [local, const_buf, binding_list, x, y, z, 1, 1, 1, cx, cy, cz]
                        if interpreter is not None:
                            t.invoke_nested(self.instance, export.function_ordinal, args)
                        else:
                            self.context.invoke_instance(self.instance, export.function_ordinal, args)
        except VmTrap as e:
            raise VmvxTrapError(export.name, (x, y, z), e) from e
        return t.steps_executed - before

    # -- native dispatches

    @property
    def native_refusals(self) -> dict[str, str]:
        """Export name -> why its dispatches stay on the interpreter (translates the exports if not yet)."""
        if self._native is None:
            self._native = compile_module(self.module, [e.function_ordinal for e in self.exports])
        return {
            e.name: self._native.refused[e.function_ordinal]
            for e in self.exports
            if e.function_ordinal in self._native.refused
        }

    def _native_driver(self, export: VmvxExport):
        if self._native is None:
            # Every export at once: one LLVM module per executable (its first dispatch pays the compile).
            self._native = compile_module(self.module, [e.function_ordinal for e in self.exports])
        return self._native.drivers.get(export.function_ordinal)

    def _dispatch_native(
        self,
        export: VmvxExport,
        driver,
        counts: tuple[int, int, int],
        local: VmBuffer,
        const_buf: VmBuffer,
        binding_list: VmList,
    ) -> int:
        buffers = [b.data for b in binding_list.items]
        bind_ptr, bind_len = pointer_table(buffers)
        rodata = [self.instance.rodata_buffer(k).data for k in range(len(self.module.rodata_segments))]
        ro_ptr, ro_len = pointer_table(rodata)
        ctx = DispatchContext()
        ctx.local, ctx.local_len = (local.data.ctypes.data if local.length else None), local.length
        ctx.consts, ctx.consts_len = (
            (const_buf.data.ctypes.data if const_buf.length else None),
            const_buf.length,
        )
        ctx.bind_ptr, ctx.bind_len, ctx.nbind = bind_ptr.ctypes.data, bind_len.ctypes.data, len(buffers)
        ctx.ro_ptr, ctx.ro_len = ro_ptr.ctypes.data, ro_len.ctypes.data
        rc = driver(ctypes.byref(ctx), *counts)
        if rc == 0:
            return int(ctx.steps)
        # A check failed (bounds, null, division by zero...): the interpreter reruns that workgroup and
        # raises the VM's trap with its message and stack.
        x, y, z = int(ctx.wg_x), int(ctx.wg_y), int(ctx.wg_z)
        cx, cy, cz = counts
        args = [local, const_buf, binding_list, x, y, z, 1, 1, 1, cx, cy, cz]
        try:
            self.context.invoke_instance(self.instance, export.function_ordinal, args)
        except VmTrap as e:
            raise VmvxTrapError(export.name, (x, y, z), e) from e
        raise DispatchError(self.module.name, export.name, (x, y, z), 1)  # the interpreter passed: say so
