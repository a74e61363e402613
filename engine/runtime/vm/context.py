"""VM contexts: module instances, linking (dependencies, imports) and invoking exported functions.

``VmContext([hal_module, program])`` mirrors ``iree_vm_context_create_with_modules``: modules are
registered in order; each bytecode module's dependencies must be satisfied by a module registered
before it (name and minimum version), each import resolves by full name (``hal.buffer_view.create`` →
module ``hal``, export ``buffer_view.create``) to a function with exactly the same calling convention,
optional imports may stay unresolved, and ``__init`` runs once every import is bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import engine.runtime.vm.ops  # noqa: F401,E402  (registers the handlers)
from engine.errors import LensError
from engine.runtime.vm.fusion import FusedCode
from engine.runtime.vm.handlers import BREAK, HANDLERS, CompileEnv
from engine.runtime.vm.interpreter import Frame, Interpreter
from engine.runtime.vm.native import NativeFunction, NativeModule, StatusCode, VmStatusError
from engine.runtime.vm.values import VmBuffer
from engine.runtime.vmfb.cconv import CallingConvention, parse_cconv
from engine.runtime.vmfb.decoder import Instruction, iter_instructions
from engine.runtime.vmfb.module import VmfbModule


class VmLinkError(LensError):
    """A context cannot be built: a missing dependency, an unresolved import, a cconv mismatch."""

    def __init__(self, message: str, *, module: str = "", import_name: str = ""):
        self.module = module
        self.import_name = import_name
        super().__init__(message)


@dataclass
class ImportBinding:
    """One import of a bytecode module and what it resolved to (a native function or a bytecode export)."""

    ordinal: int
    name: str
    cconv: str
    optional: bool
    arg_kinds: tuple = ()
    result_kinds: tuple = ()
    native: NativeFunction | None = None
    target_instance: ModuleInstance | None = None
    target_ordinal: int = -1

    @property
    def resolved(self) -> bool:
        return self.native is not None or self.target_instance is not None


def _invalid_pc(i, r, t):
    """The handler of every pc that is not the start of an instruction: one for all of them (a closure per
    byte of code would be most of a big module's objects), since the trap names the pc the frame was at."""
    raise VmStatusError(StatusCode.OUT_OF_RANGE, "the pc is not the start of an instruction")


class ModuleInstance:
    """A bytecode module in a context: its globals, rodata buffers, bound imports and compiled code."""

    def __init__(self, module: VmfbModule):
        self.module = module
        self.name = module.name
        self.version = module.version
        state = module.module_state
        self.rwdata = bytearray(state.global_bytes_capacity)  # primitive globals, little endian
        self.global_refs: list[Any] = [None] * state.global_ref_count
        self.functions = module.functions
        self.types = module.types
        self.imports: list[ImportBinding] = []
        self._rodata: dict[int, VmBuffer] = {}
        self._cconvs: dict[int, CallingConvention] = {}
        self._plain: list[list | None] = [None] * len(self.functions)
        self._code: list[list | None] = [None] * len(self.functions)
        self._decoded: list[dict[int, Instruction] | None] = [None] * len(self.functions)
        # Fused straight-line code (engine.runtime.vm.fusion), built when a function first runs.
        self._fused: list[FusedCode | None] = [None] * len(self.functions)
        self.breakpoints: set[tuple[int, int]] = set()

    def checkpoint_globals(self) -> tuple[bytes, tuple[Any, ...]]:
        """The module's globals as they are now (primitive bytes and refs), for time travel."""
        return bytes(self.rwdata), tuple(self.global_refs)

    def restore_globals(self, state: tuple[bytes, tuple[Any, ...]]) -> None:
        rwdata, refs = state
        self.rwdata[:] = rwdata
        self.global_refs[:] = refs

    def __repr__(self) -> str:
        return f"<ModuleInstance @{self.name}>"

    # -- metadata -----------------------------------------------------------------------------------------

    def function_name(self, ordinal: int) -> str:
        return self.functions[ordinal].name

    def function_ordinal(self, name: str) -> int:
        for e in self.module.exports:
            if e.name == name:
                return e.internal_ordinal
        for f in self.functions:
            if f.name == name:
                return f.ordinal
        raise KeyError(f"no function {name!r} in module @{self.name}")

    def cconv(self, ordinal: int) -> CallingConvention:
        c = self._cconvs.get(ordinal)
        if c is None:
            c = self._cconvs[ordinal] = parse_cconv(self.functions[ordinal].signature.calling_convention)
        return c

    def type_name(self, type_id: int) -> str:
        return self.types[type_id] if 0 <= type_id < len(self.types) else f"!type#{type_id}"

    def rodata_buffer(self, ordinal: int) -> VmBuffer:
        buf = self._rodata.get(ordinal)
        if buf is None:
            segs = self.module.rodata_segments
            if not 0 <= ordinal < len(segs):
                raise VmStatusError(
                    StatusCode.OUT_OF_RANGE, f"rodata ordinal {ordinal} out of range ({len(segs)})"
                )
            name = next((e.name for e in self.module.executables if e.rodata_ordinal == ordinal), "")
            buf = self._rodata[ordinal] = VmBuffer(segs[ordinal].array, False, f"rodata {ordinal}", name)
        return buf

    # -- code -----------------------------------------------------------------------------------------------

    def instructions(self, ordinal: int) -> dict[int, Instruction]:
        """Decoded instructions of a function by pc (decoded once)."""
        d = self._decoded[ordinal]
        if d is None:
            d = self._decoded[ordinal] = {
                ins.pc: ins for ins in iter_instructions(self.functions[ordinal].code)
            }
        return d

    def instruction_at(self, ordinal: int, pc: int) -> Instruction:
        try:
            return self.instructions(ordinal)[pc]
        except KeyError:
            raise VmStatusError(
                StatusCode.OUT_OF_RANGE, f"pc {pc:#06x} is not the start of an instruction"
            ) from None

    def plain_code(self, ordinal: int) -> list:
        """The function's closures by pc, without breakpoint stubs."""
        code = self._plain[ordinal]
        if code is None:
            instructions = self.instructions(ordinal)
            length = len(self.functions[ordinal].code)
            code = [None] * (length + 1)
            for pc, ins in instructions.items():
                code[pc] = HANDLERS[ins.opcode.symbol](ins, CompileEnv(self, ordinal, pc, ins.next_pc))
            for pc in range(length + 1):
                if code[pc] is None:
                    code[pc] = _invalid_pc
            self._plain[ordinal] = code
            self._code[ordinal] = list(code)
        return code

    def code(self, ordinal: int) -> list:
        """The closures frames run: the plain code with breakpoint stubs patched in."""
        if self._code[ordinal] is None:
            self.plain_code(ordinal)
        return self._code[ordinal]

    def fused_code(self, ordinal: int) -> FusedCode:
        """The function's fused blocks (``engine.runtime.vm.fusion``), less those covering a breakpoint."""
        fused = self._fused[ordinal]
        if fused is None:
            name = f"{self.name}.{self.function_name(ordinal)}"
            fused = self._fused[ordinal] = FusedCode(
                self.instructions(ordinal), self.plain_code(ordinal), name
            )
            fused.exclude({pc for o, pc in self.breakpoints if o == ordinal})
        return fused

    def _breakpoints_changed(self, ordinal: int) -> None:
        fused = self._fused[ordinal]
        if fused is not None:
            fused.exclude({pc for o, pc in self.breakpoints if o == ordinal})

    def new_frame(self, ordinal: int) -> Frame:
        f = self.functions[ordinal]
        return Frame(
            self,
            ordinal,
            self.code(ordinal),
            f.i32_register_count,
            f.ref_register_count,
            self.fused_code(ordinal),
        )

    def set_breakpoint(self, ordinal: int, pc: int) -> None:
        """Patch a stub at ``pc`` that stops ``Interpreter.run`` before the instruction (no cost elsewhere)."""
        self.instruction_at(ordinal, pc)
        code = self.code(ordinal)

        def stub(i, r, t):
            return BREAK

        code[pc] = stub
        self.breakpoints.add((ordinal, pc))
        self._breakpoints_changed(ordinal)

    def clear_breakpoint(self, ordinal: int, pc: int) -> None:
        if (ordinal, pc) in self.breakpoints:
            self.code(ordinal)[pc] = self.plain_code(ordinal)[pc]
            self.breakpoints.discard((ordinal, pc))
            self._breakpoints_changed(ordinal)


def _split_import(full_name: str) -> tuple[str, str]:
    module, _, local = full_name.partition(".")
    return module, local


class VmContext:
    """Modules linked together, with one interpreter that runs their functions."""

    def __init__(
        self,
        modules: list[VmfbModule | NativeModule],
        *,
        interpreter: Interpreter | None = None,
        call_init: bool = True,
    ):
        self.interpreter = interpreter or Interpreter()
        self.instances: list[ModuleInstance | NativeModule] = []
        for m in modules:
            inst: ModuleInstance | NativeModule = ModuleInstance(m) if isinstance(m, VmfbModule) else m
            if isinstance(inst, ModuleInstance):
                self._check_dependencies(inst)
                self._bind_imports(inst)
            self.instances.append(inst)
        if call_init:
            for inst in self.instances:
                if isinstance(inst, ModuleInstance) and any(e.name == "__init" for e in inst.module.exports):
                    self.invoke_instance(inst, inst.function_ordinal("__init"), [])

    # -- linking ------------------------------------------------------------------------------------------

    def use_interpreter(self, interpreter: Interpreter) -> None:
        """Run calls on ``interpreter`` from now on (time travel records with a ``RecordingInterpreter``);
        its trace and zone hooks are taken over from the one it replaces. Only between calls."""
        old = self.interpreter
        if interpreter is old:
            return
        interpreter.trace_hook, interpreter.zone_hook = old.trace_hook, old.zone_hook
        self.interpreter = interpreter

    def find_module(self, name: str) -> ModuleInstance | NativeModule | None:
        for inst in reversed(self.instances):
            if inst.name == name:
                return inst
        return None

    def _check_dependencies(self, inst: ModuleInstance) -> None:
        for dep in inst.module.dependencies:
            have = self.find_module(dep.name)
            if have is None:
                if dep.optional:
                    continue
                raise VmLinkError(
                    f"module @{inst.name} depends on module '{dep.name}' (version >= {dep.minimum_version}), "
                    "which is not registered",
                    module=inst.name,
                )
            if have.version < dep.minimum_version and not dep.optional:
                raise VmLinkError(
                    f"module @{inst.name} needs '{dep.name}' version >= {dep.minimum_version}, "
                    f"the registered one is version {have.version}",
                    module=inst.name,
                )

    def _bind_imports(self, inst: ModuleInstance) -> None:
        for imp in inst.module.imports:
            cconv_text = imp.signature.calling_convention
            cc = parse_cconv(cconv_text)
            binding = ImportBinding(
                imp.ordinal, imp.full_name, cconv_text, imp.optional, cc.arguments, cc.results
            )
            mod_name, local = _split_import(imp.full_name)
            target = self.find_module(mod_name)
            found_cconv = None
            if isinstance(target, NativeModule):
                fn = target.lookup(local)
                if fn is not None:
                    found_cconv = fn.cconv
                    if fn.cconv == cconv_text:
                        binding.native = fn
            elif isinstance(target, ModuleInstance):
                for e in target.module.exports:
                    if e.name == local:
                        found_cconv = e.signature.calling_convention
                        if found_cconv == cconv_text:
                            binding.target_instance = target
                            binding.target_ordinal = e.internal_ordinal
                        break
            if found_cconv is not None and not binding.resolved:
                raise VmLinkError(
                    f"import '{imp.full_name}' of module @{inst.name} has calling convention {cconv_text!r} "
                    f"but '{mod_name}' exports it as {found_cconv!r}",
                    module=inst.name,
                    import_name=imp.full_name,
                )
            if not binding.resolved and not imp.optional:
                why = (
                    "no such module is registered"
                    if target is None
                    else f"module '{mod_name}' has no such export"
                )
                raise VmLinkError(
                    f"required import '{imp.full_name}' of module @{inst.name} cannot be resolved: {why}",
                    module=inst.name,
                    import_name=imp.full_name,
                )
            inst.imports.append(binding)

    # -- calling ------------------------------------------------------------------------------------------

    @property
    def main(self) -> ModuleInstance:
        """The last bytecode module (the program; earlier ones are its dependencies)."""
        for inst in reversed(self.instances):
            if isinstance(inst, ModuleInstance):
                return inst
        raise VmLinkError("the context has no bytecode module")

    def resolve_function(self, name: str) -> tuple[ModuleInstance, int]:
        """``module.function`` or a function of the main module, by export (or internal) name."""
        if "." in name:
            mod, _, fn = name.partition(".")
            inst = self.find_module(mod)
            if isinstance(inst, ModuleInstance):
                try:
                    return inst, inst.function_ordinal(fn)
                except KeyError:
                    pass
        inst = self.main
        try:
            return inst, inst.function_ordinal(name)
        except KeyError:
            names = ", ".join(e.name for e in inst.module.exports)
            raise VmLinkError(f"no function '{name}' in module @{inst.name} (exports: {names})") from None

    def begin_call(self, function_name: str, args: list) -> None:
        """Set up a call of an exported function for stepping (``interpreter.step()``/``run()``)."""
        inst, ordinal = self.resolve_function(function_name)
        self.interpreter.begin_call(inst, ordinal, list(args))

    def invoke(self, function_name: str, args: list | tuple = ()) -> list:
        """Call a function to completion; returns its results as Python values (ints, floats, refs)."""
        inst, ordinal = self.resolve_function(function_name)
        return self.invoke_instance(inst, ordinal, list(args))

    def invoke_instance(self, inst: ModuleInstance, ordinal: int, args: list) -> list:
        t = self.interpreter
        if t.native_depth > 0:  # called from inside an import (e.g. a nested dispatch)
            return t.invoke_nested(inst, ordinal, args)
        t.begin_call(inst, ordinal, args)
        results = t.run_to_completion()
        del t.frames[t.base :]
        return results
