"""Record one workgroup of a VMVX dispatch: our VM interprets the executable's code for that workgroup only,
on copies of the dispatch's input bytes, and every executed instruction becomes a ``KernelStep`` mapped to the
executable source's location through the nested module's debug database."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.kernel.dispatch_run import CapturedDispatch, KernelStepError
from engine.kernel.source_lines import SourceFiles, location_of
from engine.kernel.trace import KernelStep, KernelStore, KernelTrace, StopAt, check_workgroup
from engine.runtime import isa
from engine.runtime.vm.values import VmBuffer, VmList

# VM ops the source does not name (no readable source file): the MLIR op they come from.
VM_TO_MLIR = {
    "log": "math.log", "log1p": "math.log1p", "log2": "math.log2", "exp": "math.exp", "exp2": "math.exp2",
    "expm1": "math.expm1", "sqrt": "math.sqrt", "rsqrt": "math.rsqrt", "tanh": "math.tanh", "pow": "math.powf",
    "sin": "math.sin", "cos": "math.cos", "erf": "math.erf", "atan": "math.atan", "atan2": "math.atan2",
    "add": "arith.add", "sub": "arith.sub", "mul": "arith.mul", "div": "arith.div", "fma": "math.fma",
    "abs": "math.absf", "neg": "arith.negf", "min": "arith.minimumf", "max": "arith.maximumf",
    "buffer.load": "memref.load", "buffer.store": "memref.store",
}  # fmt: skip
_STORE_BYTES = {"vm.buffer.store.i8": 1, "vm.buffer.store.i16": 2, "vm.buffer.store.i32": 4,
                "vm.buffer.store.i64": 8, "vm.buffer.store.f32": 4, "vm.buffer.store.f64": 8}  # fmt: skip
MAX_STEPS = 20_000_000


class _Stopped(Exception):  # noqa: N818 (not an error: the statement asked for was reached)
    pass


def _mlir_op(mnemonic: str) -> str:
    body = mnemonic.removeprefix("vm.")
    for key in (body.rsplit(".", 1)[0], body.split(".")[0], ".".join(body.split(".")[:2])):
        if key in VM_TO_MLIR:
            return VM_TO_MLIR[key]
    return mnemonic


def _register(ins, name: str):
    for spec, value in zip(ins.opcode.operands, ins.operands):
        if spec.name == name:
            return spec, value
    raise KeyError(name)


def _read(frame, spec, raw: int):
    if spec.kind == isa.REG_REF:
        return frame.r[raw & isa.REF_INDEX_MASK]
    idx = raw & isa.PRIMITIVE_INDEX_MASK
    if spec.kind in (isa.REG_I64, isa.REG_F64):
        return frame.i64(idx) if spec.kind == isa.REG_I64 else frame.f64(idx)
    return frame.f32(idx) if spec.kind == isa.REG_F32 else frame.i32(idx)


def _names_executable_source(where: dict[int, str], files: SourceFiles) -> bool:
    """Whether the locations name a readable executable source (a ``hal.executable``), not the program."""
    for text in where.values():
        location = location_of(text)
        if location is not None:
            lines = files.lines(location.file)
            return lines is not None and any("hal.executable" in line for line in lines[:50])
    return False


def record_vmvx(
    captured: CapturedDispatch,
    data: bytes,
    workgroup: tuple[int, int, int],
    files: SourceFiles,
    module_path: str | Path | None = None,
    stop_at: StopAt | None = None,
) -> KernelTrace:
    """Interpret ``workgroup`` of the captured VMVX dispatch (executable bytes ``data``) and record it (up to
    the first statement ``stop_at`` is true of, when given: the rest is not interpreted)."""
    from engine.runtime.vm.vmvx import VmvxExecutable
    from engine.runtime.vmfb.disassembler import FunctionDisassembler

    try:
        check_workgroup(workgroup, captured.workgroup_count)
    except ValueError as e:
        raise KernelStepError(str(e)) from None
    executable = VmvxExecutable.load(data)
    export = executable.exports[captured.export_ordinal]
    module = executable.module
    function = module.functions[export.function_ordinal]
    where = FunctionDisassembler(module).instruction_locations(function)
    notes = []
    if module_path is not None and not _names_executable_source(where, files):
        from engine.kernel.vmvx_locations import rebuilt_locations

        rebuilt = rebuilt_locations(module_path, module, function)
        if rebuilt:
            where = rebuilt
            notes.append("locations from a rebuild of the program with its executables' sources dumped "
                         "(same instructions at the same offsets)")  # fmt: skip
        elif not where:
            notes.append("IREE kept no locations for this function (a linked VMVX executable maps only its "
                         "last one) and rebuilding the program found none")  # fmt: skip
    bindings = [VmBuffer(np.array(b, dtype=np.uint8, copy=True), True, f"binding {k}")
                for k, b in enumerate(captured.before)]  # fmt: skip
    constants = np.asarray([int(c) & 0xFFFFFFFF for c in captured.constants], dtype=np.uint32).view(np.uint8)
    interpreter = executable.context.interpreter
    steps: list[KernelStep] = []

    def hook(rec) -> None:
        ins = rec.instruction
        if ins.opcode.is_block_marker:
            return
        mnemonic = ins.opcode.mnemonic
        text = where.get(rec.location.pc)
        location = location_of(text) if text else None
        op = files.op_at(location) or _mlir_op(mnemonic)
        store = None
        if mnemonic in _STORE_BYTES:
            frame = interpreter.frames[-1]
            buffer = _read(frame, *_register(ins, "target_buffer"))
            offset = _read(frame, *_register(ins, "target_offset"))
            value = _read(frame, *_register(ins, "value"))
            values = (value,)
            size = _STORE_BYTES[mnemonic]
            binding = next((k for k, b in enumerate(bindings) if b is buffer), None)
            if binding is not None:
                store = KernelStore(binding, int(offset) * size, value, size)
        else:
            values = tuple(v for name, v in rec.written if isinstance(v, int | float) and not isinstance(v, bool))
        step = KernelStep(len(steps), location, op, mnemonic, values, store)
        steps.append(step)
        if len(steps) > MAX_STEPS:
            raise KernelStepError(f"workgroup runs more than {MAX_STEPS} instructions")
        if stop_at is not None and stop_at(step):
            raise _Stopped

    x, y, z = workgroup
    cx, cy, cz = captured.workgroup_count
    args = [VmBuffer.allocate(export.attributes.local_memory, "local memory"),
            VmBuffer(constants, False, "dispatch constants"), VmList("!vm.buffer", bindings),
            x, y, z, 1, 1, 1, cx, cy, cz]  # fmt: skip
    interpreter.trace_hook = hook
    complete = True
    try:
        executable.context.invoke_instance(executable.instance, export.function_ordinal, args)
    except _Stopped:
        complete = False
    finally:
        interpreter.trace_hook = None
    return KernelTrace("vmvx", captured.ordinal, captured.export_name, workgroup, captured.workgroup_count,
                       tuple(steps), dict(files.found), tuple(notes), complete)  # fmt: skip
