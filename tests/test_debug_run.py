"""The debug engine end to end through `iree-lens run`: same text as the reference engine; --trace is exact."""

from __future__ import annotations

import re
import subprocess

import pytest
from support import RUN_CASES as CASES
from support import iree_tool, lens_run_in_process

from engine.runtime.debug_runner import DebugRunError, DebugRunner
from engine.runtime.function_io import parse_inputs


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
@pytest.mark.parametrize("sample,function,inputs", CASES, ids=[f"{c[0]}.{c[1]}" for c in CASES])
def test_debug_engine_prints_what_reference_prints(compiled, target, sample, function, inputs):
    vmfb = compiled.path(sample, target)
    reference = lens_run_in_process(vmfb, function, inputs, "reference")
    debug = lens_run_in_process(vmfb, function, inputs, "debug")
    assert reference.returncode == 0, reference.stderr
    assert debug.returncode == 0, debug.stderr
    assert debug.stdout == reference.stdout


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
def test_bad_input_fails_with_the_same_status(compiled, target):
    vmfb = compiled.path("matmul", target)
    inputs = ["4x7xf32=1", "8x16xf32=1"]
    reference = lens_run_in_process(vmfb, "main", inputs, "reference")
    debug = lens_run_in_process(vmfb, "main", inputs, "debug")
    assert reference.returncode == debug.returncode == 1
    assert "INVALID_ARGUMENT; input0 shape dimension 1 mismatch" in reference.stderr
    assert "INVALID_ARGUMENT; input0 shape dimension 1 mismatch" in debug.stderr
    runner = DebugRunner(vmfb)
    with pytest.raises(DebugRunError) as e:
        runner.invoke("main", parse_inputs(inputs, "rr"))
    assert e.value.status == "INVALID_ARGUMENT"
    # The runner stays usable after a failed call.
    assert runner.invoke("main", parse_inputs(["4x8xf32=1", "8x16xf32=1"], "rr"))


def _dump_offsets(vmfb) -> list[set[int]]:
    """Instruction offsets of each function (in ordinal order) from iree-dump-module --bytecode_offsets."""
    text = subprocess.run(
        [iree_tool("iree-dump-module"), "--output=disassembly", "--bytecode_offsets", str(vmfb)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    functions: list[set[int]] = []
    for line in text.splitlines():
        if line.startswith("vm.func "):
            functions.append(set())
        m = re.match(r"\[([0-9A-F]{8})\]", line)
        if m and functions:
            functions[-1].add(int(m.group(1), 16))
    return functions


def test_trace_covers_every_executed_instruction_at_disassembly_offsets(compiled):
    vmfb = compiled.path("control_flow", "llvm-cpu")
    lines: list[str] = []
    traced = DebugRunner(vmfb, trace=lines.append)
    lines.clear()  # drop __init
    results = traced.invoke("collatz_steps", parse_inputs(["27"], "i"))
    assert results[0].value == 111
    # The fast path (no trace hook) counts the same number of instructions for the same call.
    plain = DebugRunner(vmfb)
    before = plain.context.interpreter.steps_executed
    plain.invoke("collatz_steps", parse_inputs(["27"], "i"))
    assert len(lines) == plain.context.interpreter.steps_executed - before > 1000
    # Every traced pc is the start of an instruction in iree-dump-module's listing of that function.
    offsets = _dump_offsets(vmfb)
    ordinal = {f.name: f.ordinal for f in plain.module.functions}
    seen = set()
    for line in lines:
        m = re.match(r"@module\.(\w+)\+0x([0-9a-fA-F]+)\s", line)
        assert m, line
        fn, pc = m.group(1), int(m.group(2), 16)
        assert pc in offsets[ordinal[fn]], line
        seen.add((fn, pc))
    assert len(seen) >= 10  # the whole loop body was visited


def test_trace_from_the_command_line(compiled):
    vmfb = compiled.path("multi_function", "llvm-cpu")
    out = lens_run_in_process(vmfb, "scalar_math", ["1.5", "3"], "debug", "--trace")
    assert out.returncode == 0, out.stderr
    assert "result[1]: i64=21" in out.stdout
    assert re.search(r"@module\.scalar_math\+0x[0-9a-f]+\s+vm\.mul\.i64", out.stdout)


def test_a_truncated_module_is_refused_as_a_file_before_its_initializer_runs(tmp_path):
    """Cut inside its external constant data, a module is refused where the file is read, naming the range
    and the file, as ``inspect`` and IREE's runtime refuse it; it used to run ``__init`` and trap at its
    first constant (``INTERNAL ... at vm.const.ref.rodata ... @module.__init``)."""
    from support import compile_for

    from engine.runtime.vmfb.module import open_vmfb
    from engine.samples import sample_path

    vmfb = compile_for(sample_path("large_constant"), tmp_path / "big.vmfb", "llvm-cpu")
    external = [s for s in open_vmfb(vmfb).rodata_segments if not s.embedded]
    assert external, "the sample keeps a constant outside the FlatBuffer"
    cut = tmp_path / "cut.vmfb"
    cut.write_bytes(vmfb.read_bytes()[: external[0].file_offset + 8])
    with pytest.raises(DebugRunError) as raised:
        DebugRunner(str(cut))
    message = str(raised.value)
    assert "runs past the end" in message and "cut.vmfb" in message and "__init" not in message, message
