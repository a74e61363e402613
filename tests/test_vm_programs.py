"""Compiled sample programs run by our interpreter with the emulated HAL: results, stepping, breakpoints,
traps, tracing and VMVX dispatches (expected values from numpy and from IREE's runtime)."""

from __future__ import annotations

import threading

import iree.runtime as rt
import numpy as np
import pytest
from support import VM_PROGRAMS, compile_vm_dialect, wait_until

import engine.runtime.vm.ops  # noqa: F401  (registers every handler)
from engine.runtime import isa
from engine.runtime.hal.convert import buffer_view_from_numpy, buffer_view_to_numpy
from engine.runtime.hal.module import HalModule
from engine.runtime.vm.context import VmContext, VmLinkError
from engine.runtime.vm.controller import (
    Controller,
    FunctionBreakpoint,
    ImportBreakpoint,
    InstructionBreakpoint,
)
from engine.runtime.vm.handlers import HANDLERS
from engine.runtime.vm.interpreter import VmTrap
from engine.runtime.vm.native import StatusCode
from engine.runtime.vm.trace import format_step
from engine.runtime.vm.vmvx import VmvxExecutable
from engine.runtime.vmfb.module import open_vmfb


def test_every_opcode_has_a_handler():
    # Every symbol of the ISA table (prefix bytes are not instructions) has a handler.
    assert [op.symbol for op in isa.ALL_OPCODES if not op.is_prefix and op.symbol not in HANDLERS] == []


def _context(path):
    hal = HalModule()
    return VmContext([hal, open_vmfb(path, writable=True)]), hal


def _inputs(rng):
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal((4, 8)).astype(np.float32)
    return a, b


@pytest.mark.parametrize("target", ["vmvx", "llvm-cpu"])
def test_elementwise_matches_iree_runtime(compiled, target):
    path = compiled.path("elementwise", target)
    ctx, hal = _context(path)
    a, b = _inputs(np.random.default_rng(1))
    dev = hal.devices[0]
    (out,) = ctx.invoke("main", [buffer_view_from_numpy(dev, a), buffer_view_from_numpy(dev, b)])
    reference = rt.load_vm_flatbuffer_file(str(path), driver="local-sync")
    expected = np.asarray(reference.main(a, b))
    np.testing.assert_array_equal(buffer_view_to_numpy(out), expected)
    np.testing.assert_allclose(expected, a * b + np.abs(a), rtol=1e-5, atol=1e-6)


def test_collatz_matches_iree_runtime(compiled):
    path = compiled.path("control_flow", "llvm-cpu")
    ctx, _ = _context(path)
    module = rt.load_vm_flatbuffer_file(str(path), driver="local-sync")
    for start in (1, 7, 27, 97):
        assert ctx.invoke("collatz_steps", [start]) == [int(module.collatz_steps(start))]


def test_link_error_names_the_missing_import(compiled):
    with pytest.raises(VmLinkError) as err:
        VmContext([open_vmfb(compiled.path("elementwise", "vmvx"), writable=True)])
    assert "hal" in str(err.value)


def test_bad_input_shape_traps_with_iree_status(compiled):
    ctx, hal = _context(compiled.path("elementwise", "llvm-cpu"))
    dev = hal.devices[0]
    bad = np.zeros((3, 8), np.float32)
    with pytest.raises(VmTrap) as err:
        ctx.invoke("main", [buffer_view_from_numpy(dev, bad), buffer_view_from_numpy(dev, bad)])
    trap = err.value
    assert trap.code == StatusCode.INVALID_ARGUMENT
    assert "hal.buffer_view.assert" in trap.message
    assert trap.stack[-1].function == "main"
    assert trap.instruction.opcode.symbol.startswith("Call")


def test_stepping_to_the_end_matches_run_and_trace(compiled):
    path = compiled.path("control_flow", "llvm-cpu")
    ctx, _ = _context(path)
    t = ctx.interpreter
    ctx.begin_call("collatz_steps", [27])
    lines, pcs = [], []
    while not t.finished:
        rec = t.step()
        lines.append(format_step(rec))
        pcs.append((rec.location.ordinal, rec.pc))
    assert t.results == [111]
    # Every stepped pc is an instruction start of the disassembly (our decoder's offsets).
    inst = ctx.main
    for ordinal, pc in pcs:
        assert pc in inst.instructions(ordinal)
    # The fast loop executes exactly as many instructions as stepping does.
    before = t.steps_executed
    assert ctx.invoke("collatz_steps", [27]) == [111]
    assert t.steps_executed - before == len(lines)
    assert all("\n" not in line for line in lines)


def test_controller_import_breakpoint_and_continue(compiled):
    ctx, hal = _context(compiled.path("elementwise", "vmvx"))
    a, b = _inputs(np.random.default_rng(2))
    dev = hal.devices[0]
    ctrl = Controller(ctx)
    assert ctrl.add_breakpoint(ImportBreakpoint("hal.device.queue.execute.indirect")) >= 1
    ctx.begin_call("main", [buffer_view_from_numpy(dev, a), buffer_view_from_numpy(dev, b)])
    ev = ctrl.continue_()
    assert ev.reason == "breakpoint"
    ins = ctx.main.instruction_at(ev.location.ordinal, ev.location.pc)
    assert ins.opcode.symbol.startswith("Call") and ins.operands[0] & isa.IMPORT_BIT
    step = ctrl.step_into()
    assert step.record.import_call.name == "hal.device.queue.execute.indirect"
    ev = ctrl.continue_()
    assert ev.reason == "done"
    np.testing.assert_allclose(buffer_view_to_numpy(ev.results[0]), a * b + np.abs(a), rtol=1e-6)


def test_controller_step_over_out_and_run_to(compiled):
    ctx, _ = _context(compiled.path("control_flow", "llvm-cpu"))
    ctrl = Controller(ctx)
    t = ctx.interpreter
    ctx.begin_call("collatz_steps", [6])
    pcs = sorted(ctx.main.instructions(5))
    ev = ctrl.run_to(ctx.main.name, "collatz_steps", pcs[5])
    assert ev.reason == "breakpoint" and ev.location.pc == pcs[5]
    ev = ctrl.step_over()
    assert ev.reason == "step" and ev.location.pc != pcs[5]
    ev = ctrl.step_out()
    assert ev.reason == "done" and ev.results == [8]
    assert t.finished


def test_controller_function_breakpoint_and_instruction_breakpoint(compiled):
    ctx, hal = _context(compiled.path("elementwise", "llvm-cpu"))
    ctrl = Controller(ctx)
    ctrl.add_breakpoint(FunctionBreakpoint("main"))
    a, b = _inputs(np.random.default_rng(3))
    dev = hal.devices[0]
    ctx.begin_call("main", [buffer_view_from_numpy(dev, a), buffer_view_from_numpy(dev, b)])
    ev = ctrl.continue_()  # starts at pc 0 of main: resumes over the breakpoint it sits on
    assert ev.reason == "done"
    ctrl.remove_breakpoint(FunctionBreakpoint("main"))
    second = sorted(ctx.main.instructions(ctx.main.function_ordinal("main")))[3]
    ctrl.add_breakpoint(InstructionBreakpoint(ctx.main.name, "main", second))
    ctx.begin_call("main", [buffer_view_from_numpy(dev, a), buffer_view_from_numpy(dev, b)])
    ev = ctrl.continue_()
    assert ev.reason == "breakpoint" and ev.location.pc == second
    assert ev.stack[-1].function == "main"
    assert ctrl.continue_().reason == "done"




@pytest.fixture(scope="module")
def spin_vmfb(tmp_path_factory):
    return compile_vm_dialect(VM_PROGRAMS / "counting_loop.mlir", tmp_path_factory.mktemp("spin") / "spin.vmfb")


def test_pause_from_another_thread(spin_vmfb):
    ctx = VmContext([open_vmfb(spin_vmfb, writable=True)])
    ctrl = Controller(ctx)
    ctx.begin_call("loop", [2_000_000_000])  # minutes of work: only a pause ends it
    results = {}
    th = threading.Thread(target=lambda: results.setdefault("ev", ctrl.continue_()))
    entry = ctx.interpreter.top
    start_pc = entry.pc
    th.start()
    # continue_() forgets a pause asked before it began: pause once the loop has visibly run.
    wait_until(lambda: entry.pc != start_pc, 60, "the loop to run")
    ctrl.pause()
    th.join(10)
    assert not th.is_alive()
    ev = results["ev"]
    assert ev.reason == "paused" and ev.steps > 0
    assert ev.stack[-1].function == "loop"
    # The state is consistent: the loop can be resumed by stepping.
    assert ctrl.step_into().reason == "step"


def test_vmvx_dispatch_nested_in_a_stepping_interpreter(compiled):
    # Find the VMVX executable of the elementwise program and run its dispatch directly, nested.
    module = open_vmfb(compiled.path("elementwise", "vmvx"), writable=True)
    (exe,) = [e for e in module.executables if e.format == "vmvx-bytecode-fb"]
    vmvx = VmvxExecutable.load(exe.data)
    assert len(vmvx.export_names) == 1
    attrs = vmvx.export_attrs(0)
    a, b = _inputs(np.random.default_rng(4))
    out = np.zeros((4, 8), np.float32)
    views = [np.ascontiguousarray(x).reshape(-1).view(np.uint8) for x in (a, b)] + [
        out.reshape(-1).view(np.uint8)
    ]
    if attrs.binding_count is not None:
        assert attrs.binding_count == 3
    lines = []
    from engine.runtime.vm.interpreter import Interpreter

    host = Interpreter()
    host.trace_hook = lambda rec: lines.append(format_step(rec))
    steps = vmvx.dispatch(0, (1, 1, 1), [], views, interpreter=host)
    np.testing.assert_array_equal(out, a * b + np.abs(a))
    assert steps == len(lines) > 0
    assert any("vm.buffer.load.f32" in line for line in lines)


def test_vmvx_dispatches_nest_in_the_host_trace(compiled):
    from engine.runtime.vm import vmvx

    ctx, hal = _context(compiled.path("elementwise", "vmvx"))
    a, b = _inputs(np.random.default_rng(5))
    dev = hal.devices[0]
    lines = []
    t = ctx.interpreter
    t.trace_hook = lambda rec: lines.append(format_step(rec))
    vmvx.nest_dispatches_in(t)
    try:
        (out,) = ctx.invoke("main", [buffer_view_from_numpy(dev, a), buffer_view_from_numpy(dev, b)])
    finally:
        vmvx.nest_dispatches_in(None)
    np.testing.assert_allclose(buffer_view_to_numpy(out), a * b + np.abs(a), rtol=1e-6)
    host_functions = {f.name for f in ctx.main.functions}
    host = [ln for ln in lines if ln.split("+")[0].split(".", 1)[1] in host_functions]
    kernel = [ln for ln in lines if "_dispatch_" in ln.split("+")[0]]
    assert host and kernel
    assert any("vm.buffer.store.f32" in ln for ln in kernel)
