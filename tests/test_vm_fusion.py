"""Fused code (engine.runtime.vm.fusion): ``Interpreter.run`` with straight-line blocks and their loops in one
call stops exactly where instruction-by-instruction execution (``step()``) would: after exactly ``n``
instructions, at a breakpoint inside a block, at the instruction of a block that traps."""

from __future__ import annotations

import pytest
from support import VM_PROGRAMS, compile_vm_dialect

from engine.errors import VmTrap
from engine.runtime.vm.context import VmContext
from engine.runtime.vmfb.module import open_vmfb


@pytest.fixture(scope="module")
def fuse_vmfb(tmp_path_factory):
    return compile_vm_dialect(VM_PROGRAMS / "fusion.mlir", tmp_path_factory.mktemp("fuse") / "fuse.vmfb")


def _state(ctx: VmContext):
    t = ctx.interpreter
    return [(f.ordinal, f.pc, list(f.i), list(f.r)) for f in t.frames], t.steps_executed


def _stepped(vmfb, function: str, args: list, n: int):
    ctx = VmContext([open_vmfb(vmfb, writable=True)])
    ctx.begin_call(function, args)
    for _ in range(n):
        if ctx.interpreter.finished:
            break
        ctx.interpreter.step()
    return _state(ctx)


def test_run_stops_after_exactly_n_instructions(fuse_vmfb):
    total_ctx = VmContext([open_vmfb(fuse_vmfb, writable=True)])
    total_ctx.begin_call("loop", [7])
    total = total_ctx.interpreter.run(10_000).steps
    assert total > 40
    for n in range(1, total):
        ctx = VmContext([open_vmfb(fuse_vmfb, writable=True)])
        ctx.begin_call("loop", [7])
        outcome = ctx.interpreter.run(n)
        assert (outcome.reason, outcome.steps) == ("limit", n)
        assert _state(ctx) == _stepped(fuse_vmfb, "loop", [7], n), n


def test_fused_results_equal_stepped_results(fuse_vmfb):
    ctx = VmContext([open_vmfb(fuse_vmfb, writable=True)])
    expected_acc = 0
    for i in range(1000):
        expected_acc = (((i * 3) ^ expected_acc) + i) & 0xFFFFFFFF
    assert ctx.invoke("loop", [1000]) == [
        expected_acc - (1 << 32) if expected_acc >= 1 << 31 else expected_acc
    ]


def test_breakpoint_inside_a_block_stops_there(fuse_vmfb):
    ctx = VmContext([open_vmfb(fuse_vmfb, writable=True)])
    inst = ctx.main
    ordinal = inst.function_ordinal("loop")
    pcs = sorted(inst.instructions(ordinal))
    # The xor in the loop body: the middle of a straight-line block.
    xor_pc = next(pc for pc in pcs if inst.instruction_at(ordinal, pc).opcode.symbol == "XorI32")
    ctx.begin_call("loop", [5])
    t = ctx.interpreter
    t.run(3)  # the fused code is built once the function runs; the breakpoint comes after
    inst.set_breakpoint(ordinal, xor_pc)
    outcome = t.run(10_000)
    assert outcome.reason == "break" and t.frames[-1].pc == xor_pc
    stepped = _stepped(fuse_vmfb, "loop", [5], t.steps_executed)
    assert _state(ctx) == stepped
    inst.clear_breakpoint(ordinal, xor_pc)
    assert t.run(10_000).reason == "done"


def test_trap_inside_a_block_names_its_instruction(fuse_vmfb):
    ctx = VmContext([open_vmfb(fuse_vmfb, writable=True)])
    inst = ctx.main
    ordinal = inst.function_ordinal("divide")
    div_pc = next(
        pc for pc, ins in sorted(inst.instructions(ordinal).items()) if ins.opcode.symbol == "DivI32S"
    )
    assert ctx.invoke("divide", [4, 5]) == [6]
    with pytest.raises(VmTrap) as trap:
        ctx.invoke("divide", [4, 0])
    assert trap.value.stack[-1].pc == div_pc
    assert "division by zero" in str(trap.value)
    # The instructions before the division count; the division does not.
    ctx.begin_call("divide", [4, 0])
    before = ctx.interpreter.steps_executed
    with pytest.raises(VmTrap):
        ctx.interpreter.run(100)
    stepped = VmContext([open_vmfb(fuse_vmfb, writable=True)])
    stepped.begin_call("divide", [4, 0])
    count = 0
    while stepped.interpreter.frames[-1].pc != div_pc:
        stepped.interpreter.step()
        count += 1
    assert ctx.interpreter.steps_executed - before == count
    # The registers at the trap are those the instructions before it left (the fused code keeps registers
    # in locals and writes them back when an instruction raises).
    assert list(ctx.interpreter.frames[-1].i) == list(stepped.interpreter.frames[-1].i)
    assert ctx.interpreter.frames[-1].pc == div_pc
    assert ctx.interpreter.frames[-1].pc == div_pc
