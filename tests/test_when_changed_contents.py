""""When did this change?" on the contents of a buffer global: the instruction that last wrote the bytes the
global holds, and the device operations that put them there, followed back through copies.

IREE rarely writes a global's buffer in place: a stateful program's call computes the new state into a
transient buffer and copies it into the buffer it then stores into the global. So the ref changes at the
store, while the bytes change in the command buffer's copy, and what made them is the dispatch before it.
The expectations come from the programs' own VM code (the compiled ``vm`` dialect names each copy and
dispatch) and from the values the calls compute.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from support import iree_compile, lens_in_process
from support.session import PROGRAMS, TimeTravelClient

from engine.session.module_queries import disassembly
from engine.session.protocol import (
    Call,
    Disassembly,
    Globals,
    LastChange,
    ReadDisassembly,
    ReadGlobals,
    Step,
    WatchGlobalContents,
    WatchGlobalRef,
    WhenChanged,
)

X = np.arange(8, dtype=np.float32)


def _phased(tmp_path_factory, name: str, *flags: str):
    """``session_programs/NAME.mlir`` compiled by ``iree-lens phases`` (its globals named and typed) and its
    VM code (``--compile-to=vm``), both with IREE ``flags``."""
    out = tmp_path_factory.mktemp(name)
    proc = lens_in_process("phases", str(PROGRAMS / f"{name}.mlir"), f"--out={out}", *flags)
    assert proc.returncode == 0, proc.stderr
    (vmfb,) = out.glob("*.vmfb")
    vm = iree_compile(
        [str(PROGRAMS / f"{name}.mlir"), "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=llvm-cpu", "--compile-to=vm", *flags]  # fmt: skip
    )
    assert vm.returncode == 0, vm.stderr
    return vmfb, vm.stdout


@pytest.fixture(scope="module")
def stateful(tmp_path_factory):
    return _phased(tmp_path_factory, "stateful")


@pytest.fixture(scope="module")
def kv_cache(tmp_path_factory):
    return _phased(tmp_path_factory, "kv_cache")


def _ref_index(c: TimeTravelClient, name: str) -> int:
    globals_ = c.send(ReadGlobals())
    assert isinstance(globals_, Globals)
    (index,) = [v.index for v in globals_.variables if v.name == name and v.kind == "ref"]
    return index


def _line_at(vmfb, function: str, pc: int) -> str:
    listing = disassembly(str(vmfb), ReadDisassembly(function))
    assert isinstance(listing, Disassembly)
    return dict(listing.lines)[pc]


def _two_steps(vmfb, first: str, second: str, instructions: int = 100_000):
    """A session that ran the cache's ``step`` on the same row at row ``first``, then (recorded) ``second``
    for ``instructions`` (to its end by default); and where the second stopped."""
    row = "1x8xf32=" + " ".join(str(int(v)) for v in X)
    c = TimeTravelClient(vmfb, "step", [row, first])
    c.send(Step("into", 100_000))
    c.send(Call("step", (row, second), True))
    return c, c.send(Step("into", instructions))


def _ask(c: TimeTravelClient, watch):
    answer = c.send(WhenChanged(watch))
    assert isinstance(answer, LastChange) and answer.change is not None
    return answer.change


def test_a_global_filled_by_a_copy_names_the_dispatch_that_made_its_bytes(stateful):
    vmfb, vm = stateful
    # The program as IREE compiles it: the dispatch's output is copied into the buffer stored into @state.
    assert re.search(r"command_buffer\.dispatch.*\n.*\n?.*command_buffer\.copy_buffer", vm)
    c = TimeTravelClient(vmfb, "accumulate", [f"8xf32={' '.join(str(int(v)) for v in X)}"])
    c.send(Step("into", 100_000))  # to the end of the call
    state = _ref_index(c, "state")
    contents = _ask(c, WatchGlobalContents("module", state))
    ref = _ask(c, WatchGlobalRef("module", state))
    # The bytes changed where the command buffer ran (its copy), before the ref was stored.
    assert "queue.execute" in _line_at(vmfb, contents.function, contents.pc)
    assert "vm.global.store.ref" in _line_at(vmfb, ref.function, ref.pc)
    assert contents.position < ref.position and ref.via == ""
    assert re.fullmatch(
        r"a copy from allocation #\d+ bytes \[0, 32\), written by dispatch #0 accumulate_dispatch_0\w*", contents.via
    ), contents.via
    assert contents.dispatch is None and contents.made_by == 0  # a copy wrote them; dispatch 0 made them
    # The first element that changed, as the program declares @state (8xf32): state 0 + x.
    assert contents.detail.startswith("element [1] of 8xf32; 7 of 8 elements differ"), contents.detail
    assert contents.after == "1"
    assert "before: as allocated at instr." in contents.detail


def test_a_copy_of_unchanged_bytes_is_followed_to_an_earlier_instruction(kv_cache):
    """The second call writes the same row again: its dispatch changes nothing, so the new cache's bytes come
    from the queue copy of the old cache, an instruction before the command buffer."""
    vmfb, vm = kv_cache
    assert "hal.device.queue.copy" in vm and "hal.command_buffer.copy_buffer" in vm
    c, _ = _two_steps(vmfb, "0", "0")
    cache = _ref_index(c, "cache")
    change = _ask(c, WatchGlobalContents("module", cache))
    assert "queue.execute" in _line_at(vmfb, change.function, change.pc)
    m = re.fullmatch(
        r"a copy from allocation #\d+ bytes \[0, 128\), written by a copy from allocation #\d+ bytes \[0, 128\) "
        r"\(instr\. (\d+)\)",
        change.via,
    )
    assert m, change.via
    assert int(m.group(1)) < change.position
    # The earlier instruction is the queue copy.
    _, stop = _two_steps(vmfb, "0", "0", int(m.group(1)))
    frame = stop.location.frames[-1]
    assert "hal.device.queue.copy" in _line_at(vmfb, frame.function, frame.pc)
    # Row 0 holds twice the input since the first call: element [0, 1] is the first that differs from the
    # new buffer's first bytes.
    assert change.detail.startswith("element [0, 1] of 4x8xf32; 7 of 32 elements differ"), change.detail
    assert change.after == "2"


def test_the_dispatch_writing_a_new_row_is_named(kv_cache):
    vmfb, _ = kv_cache
    c = TimeTravelClient(vmfb, "step", ["1x8xf32=" + " ".join(str(int(v)) for v in X), "2"])
    c.send(Step("into", 100_000))
    change = _ask(c, WatchGlobalContents("module", _ref_index(c, "cache")))
    assert re.fullmatch(
        r"a copy from allocation #\d+ bytes \[0, 128\), written by dispatch #0 step_dispatch_0\w*", change.via
    ), change.via
    assert change.detail.startswith("element [2, 1] of 4x8xf32; 7 of 32 elements differ"), change.detail


def test_an_inline_build_names_the_vm_instruction_that_stored_into_a_global(tmp_path_factory):
    """An inline-dynamic build keeps its globals as ``!vm.buffer`` storage of HAL buffers and writes a scalar
    element with the VM's own ``vm.buffer.fill``: no hal call is involved, and the search must still read
    the bytes after that instruction (the Globals tab names and types the global too)."""
    vmfb, vm = _phased(tmp_path_factory, "scalar_store", "--iree-execution-model=inline-dynamic")
    assert "vm.global.ref private mutable @counter : !vm.buffer" in vm and "vm.buffer.fill.i32" in vm
    c = TimeTravelClient(vmfb, "bump", ["2", "7"])
    c.send(Step("into", 100_000))
    globals_ = c.send(ReadGlobals())
    assert isinstance(globals_, Globals)
    (counter,) = globals_.variables
    assert (counter.name, counter.kind, counter.tensor_type) == ("counter", "ref", "4xi32")
    change = _ask(c, WatchGlobalContents("module", counter.index))
    assert "vm.buffer.fill.i32" in _line_at(vmfb, change.function, change.pc)
    assert (change.before, change.after) == ("0", "7")
    assert change.detail.startswith("element [2] of 4xi32; 1 of 4 elements differ"), change.detail


def test_a_ref_global_that_holds_no_buffer_is_refused(stateful):
    vmfb, _ = stateful
    c = TimeTravelClient(vmfb, "accumulate", ["8xf32=1"])
    c.send(Step("into", 20))
    device = _ref_index(c, "__device_0")
    c.events.clear()
    c.session.handle(WhenChanged(WatchGlobalContents("module", device)))
    (failed,) = [e for e in c.events if type(e).__name__ == "Failed"]
    assert "__device_0 holds" in failed.message and "not a buffer" in failed.message


def test_bytes_written_as_they_were_allocated_name_the_allocation(stateful):
    """A call on zeros copies zeros into a new buffer that held zeros: by value (as gdb's software watchpoints)
    the bytes last changed when the buffer came to be, and the answer says so rather than naming a write."""
    vmfb, _ = stateful
    c = TimeTravelClient(vmfb, "accumulate", ["8xf32=0"])
    c.send(Step("into", 100_000))
    change = _ask(c, WatchGlobalContents("module", _ref_index(c, "state")))
    assert "queue.alloca" in _line_at(vmfb, change.function, change.pc)
    assert (change.before, change.after, change.via) == (None, None, "")
    assert change.detail == "a write of the same bytes is not a change"


def test_one_element_of_a_global_is_followed_to_what_wrote_it(kv_cache):
    """One element of the cache, its bytes named by offset: the row this call wrote comes from its dispatch;
    a row an earlier call wrote comes, through both copies, from the old cache (unchanged in this call)."""
    vmfb, _ = kv_cache
    c, _ = _two_steps(vmfb, "0", "1")
    cache = _ref_index(c, "cache")
    new_row = _ask(c, WatchGlobalContents("module", cache, (1 * 8 + 3) * 4, 4, "f32"))  # [1, 3]
    assert (new_row.before, new_row.after) == ("0", "6")
    assert re.fullmatch(r"before: as allocated at instr\. \d+ \(IREE leaves new memory undefined\)", new_row.detail)
    assert re.fullmatch(
        r"a copy from allocation #\d+ bytes \[44, 48\), written by dispatch #0 step_dispatch_0\w*", new_row.via
    ), new_row.via
    old_row = _ask(c, WatchGlobalContents("module", cache, 3 * 4, 4, "f32"))  # [0, 3]: the first call's
    assert (old_row.before, old_row.after) == ("0", "6")
    assert re.fullmatch(
        r"a copy from allocation #\d+ bytes \[12, 16\), written by a copy from allocation #\d+ bytes \[12, 16\) "
        r"\(instr\. \d+\)",
        old_row.via,
    ), old_row.via


def test_where_an_input_of_a_paused_dispatch_came_from(tmp_path):
    """Parked before dispatch 5 of a chain (dispatch k adds k + 1): an element of its input came from
    dispatch 4, which wrote the input plus 1 + ... + 5; the run is parked at dispatch 5 again after the
    search, its bindings as they were. Dispatch 0's input is the call's own: no write in the history."""
    from support.session import compile_program

    from engine.session.protocol import (
        Breakpoint,
        Continue,
        ReadBindings,
        SetBreakpoints,
        Stopped,
        WatchBinding,
    )

    vmfb = compile_program("chain12", "llvm-cpu", tmp_path)
    a = np.arange(32, dtype=np.float32)
    c = TimeTravelClient(vmfb, "main", ["4x8xf32=" + " ".join(str(int(v)) for v in a)])
    c.session.handle(SetBreakpoints((Breakpoint("dispatch", ordinal=5),)))
    assert c.send(Continue()).location.dispatch_info.ordinal == 5
    before = [t.to_numpy().copy() for t in c.send(ReadBindings()).tensors]
    np.testing.assert_array_equal(before[0].view(np.float32), a + 15)
    c.events.clear()
    c.session.handle(WhenChanged(WatchBinding(0, 7 * 4, 4, "f32")))
    (answer,) = [e for e in c.events if isinstance(e, LastChange)]
    (stop,) = [e for e in c.events if isinstance(e, Stopped)]
    change = answer.change
    assert change.dispatch == change.made_by == 4 and change.after == str(7 + 15), change
    assert re.fullmatch(r"dispatch #4 main_dispatch_4\w*", change.via), change.via
    assert stop.location.dispatch_info.ordinal == 5 and str(stop.location.dispatch_info.when) == "before"
    after = [t.to_numpy() for t in c.send(ReadBindings()).tensors]
    assert all(np.array_equal(x, y) for x, y in zip(before, after))
    # Dispatch 0 reads the call's input: written before the recorded history began.
    first = TimeTravelClient(vmfb, "main", ["4x8xf32=1"])
    first.session.handle(SetBreakpoints((Breakpoint("dispatch", ordinal=0),)))
    first.send(Continue())
    first.events.clear()
    first.session.handle(WhenChanged(WatchBinding(0, 0, 4, "f32")))
    (answer,) = [e for e in first.events if isinstance(e, LastChange)]
    assert answer.change is None


def test_where_an_input_of_a_real_model_dispatch_came_from(tmp_path):
    """EfficientViT's 336 dispatches share one command buffer: dispatch 200's input element was written by an
    earlier dispatch of the same instruction, with the value the stop shows; bytes another dispatch wrote
    before are never called "as allocated"."""
    from support import SHARED_MODELS, model_cpu_build

    from engine.session.protocol import (
        Breakpoint,
        Continue,
        ReadTensors,
        SetBreakpoints,
        Tensors,
        WatchBinding,
    )

    build = model_cpu_build("efficientvit_m0", tmp_path / "efficientvit_m0.vmfb", sources_beside=True)
    c = TimeTravelClient(build.module, "main", [f"@{SHARED_MODELS / 'efficientvit_m0_x.npy'}"])
    c.session.handle(SetBreakpoints((Breakpoint("dispatch", ordinal=200),)))
    stop = c.send(Continue())
    assert stop.location.dispatch_info.ordinal == 200
    tensors = c.send(ReadTensors())
    assert isinstance(tensors, Tensors)
    checked = 0
    for t in [t for t in tensors.tensors if t.role == "input" and t.tensor.element_type == "f32"]:
        value = t.tensor.to_numpy().reshape(-1)[0]
        c.events.clear()
        c.session.handle(WhenChanged(WatchBinding(t.index, t.offset, 4, "f32")))
        (answer,) = [e for e in c.events if isinstance(e, LastChange)]
        change = answer.change
        if change is None:
            continue  # a weight: a constant of the module, never written in the call
        assert change.after == f"{float(value):.9g}", (t.index, change)
        assert change.dispatch is not None and change.dispatch < 200, change
        assert change.via.startswith(f"dispatch #{change.dispatch} main$async_dispatch_{change.dispatch}_"), change.via
        if "as allocated" in change.detail:
            assert change.before == "0", change  # this engine's new memory is zeros
        checked += 1
    assert checked >= 1
    assert c.send(ReadTensors()).info.ordinal == 200  # parked there again


def test_where_from_in_a_debug_script(tmp_path_factory, tmp_path):
    """``where-from input 0 12`` at dispatch 5 of the chain names dispatch 4 and the value it wrote (12 plus
    1 + ... + 5); the run goes on from dispatch 5 (the call's result is the input plus 1 + ... + 12);
    dispatch 0's input is the call's own (no write; null in --json); after dispatch 3, its output's element is
    its own write (was: the search answered for the bytes before it ran, a value the output no longer shows);
    an element out of range is an error."""
    vmfb, _ = _phased(tmp_path_factory, "chain12")
    commands = tmp_path / "where.cmds"
    commands.write_text("break dispatch 5\ncontinue\nwhere-from input 0 12\ncontinue\n")
    x = "4x8xf32=" + " ".join(str(k) for k in range(32))
    args = ["debug", str(vmfb), "--function=main", f"--input={x}"]
    proc = lens_in_process(*args, f"--commands={commands}")
    assert proc.returncode == 0, proc.stderr
    (line,) = [s for s in proc.stdout.splitlines() if s.startswith("input 0 [12]")]
    assert re.fullmatch(
        r"input 0 \[12\] of dispatch #5 came from dispatch #4 main_dispatch_4\w*, at instruction \d+: 0 → 27 \(.*\)", line
    ), line
    assert "4x8xf32=[78 79 80 81 82 83 84 85]" in proc.stdout  # 0 + 78: the run went on from dispatch 5
    first = tmp_path / "first.cmds"
    first.write_text("break dispatch 0\ncontinue\nwhere-from input 0 1\nbreak dispatch 3 after\ncontinue\n"
                     "where-from output 0 1\nwhere-from input 0 99\n")  # fmt: skip
    proc = lens_in_process(*args, f"--commands={first}", "--json")
    records = [json.loads(s) for s in proc.stdout.splitlines() if s.startswith("{")]
    assert {"where-from": "input 0 [1] of dispatch #0", "change": None} in records
    assert {"where-from": "output 0 [1] of dispatch #3", "change": None, "written_by": 3} in records
    assert proc.returncode == 1 and "'where-from input 0 99': no element [99] in (32,)" in proc.stderr


def test_where_from_on_a_vulkan_device(tmp_path):
    """The same question of a Vulkan build (lavapipe without a GPU): the history of device memory names the
    same dispatch and value."""
    out = tmp_path / "vulkan"
    proc = lens_in_process("phases", str(PROGRAMS / "chain12.mlir"), f"--out={out}", "--target=vulkan-spirv")
    assert proc.returncode == 0, proc.stderr
    (vmfb,) = out.glob("*.vmfb")
    commands = tmp_path / "where.cmds"
    commands.write_text("break dispatch 5\ncontinue\nwhere-from input 0 12\n")
    x = "4x8xf32=" + " ".join(str(k) for k in range(32))
    proc = lens_in_process("debug", str(vmfb), "--function=main", f"--input={x}", f"--commands={commands}")
    assert proc.returncode == 0, proc.stderr
    assert "Stopped (dispatch) before dispatch #5" in proc.stdout
    (line,) = [s for s in proc.stdout.splitlines() if s.startswith("input 0 [12]")]
    assert re.match(r"input 0 \[12\] of dispatch #5 came from dispatch #4 main_dispatch_4\w*, at instruction \d+: \S+ → 27", line), line
