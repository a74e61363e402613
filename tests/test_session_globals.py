"""A debug session's globals by the names the program gave them, with their values, against IREE's runtime.

A stateful program (``session_programs/stateful.mlir``: a tensor global and i32/f32/i64 globals, each call
updates and returns them) is compiled with its phase snapshots; IREE's runtime calls it in one context and
its results are what the globals hold after each call.
"""

from __future__ import annotations

import base64
import json
import queue
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from support import lens_in_process
from support.session import PROGRAMS

from engine.session.debug_session import DebugSession
from engine.session.inprocess import InProcessSession
from engine.session.protocol import (
    Call,
    Continue,
    Failed,
    Finished,
    GlobalBuffer,
    Globals,
    Log,
    Open,
    Opened,
    ReadGlobalBuffer,
    ReadGlobals,
    Reverse,
    ReverseMode,
    Stopped,
)
from engine.session.timetravel_session import TimeTravelSession

X = "8xf32=0 1 2 3 4 5 6 7"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    """The stateful program compiled by ``iree-lens phases``: the .vmfb beside its phase snapshots."""
    out = tmp_path_factory.mktemp("stateful")
    proc = lens_in_process("phases", str(PROGRAMS / "stateful.mlir"), f"--out={out}")
    assert proc.returncode == 0, proc.stderr
    (vmfb,) = out.glob("*.vmfb")
    return vmfb


def _iree_results(vmfb: Path, calls: int) -> list[tuple]:
    import iree.runtime as rt

    ctx = rt.SystemContext(config=rt.Config("local-sync"))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb.read_bytes()))
    x = np.arange(8, dtype=np.float32)
    out = []
    for _ in range(calls):
        state, count, scale, big = ctx.modules.module["accumulate"](x)
        out.append((np.asarray(state).copy(), int(count), float(scale), int(big)))
    return out


class Driver:
    def __init__(self, session_type=DebugSession):
        self.events: queue.Queue = queue.Queue()
        self.session = InProcessSession(session_type, self.events.put)

    def ask(self, command, kind):
        self.session.send(command)
        while isinstance(event := self.events.get(timeout=120), Log):
            pass
        assert not isinstance(event, Failed) and isinstance(event, kind), event
        return event

    def close(self):
        self.session.close()


def test_globals_are_named_and_hold_what_iree_returns_after_each_call(compiled):
    expected = _iree_results(compiled, 2)
    d = Driver()
    try:
        d.ask(Open(str(compiled)), Opened)
        for state, count, scale, big in expected:
            d.ask(Call("accumulate", (X,)), Finished)
            g = d.ask(ReadGlobals(), Globals)
            assert "names from" in g.names_note and g.names_note.endswith(".vm.mlir")
            by_name = {v.name: v for v in g.variables}
            assert by_name["calls"].kind == "i32" and by_name["calls"].value == str(count)
            assert float(by_name["scale"].value) == scale
            assert by_name["big"].kind == "i64" and by_name["big"].value == str(big)
            held = by_name["state"]
            assert (held.kind, held.byte_length, held.tensor_type) == ("ref", 32, "8xf32")
            assert g.refs[held.index] == held.value  # the same ordinal as the unnamed list
            b = d.ask(ReadGlobalBuffer(held.index), GlobalBuffer)
            assert b.name == "state" and b.tensor.element_type == "f32" and "8xf32" in b.type_note
            np.testing.assert_array_equal(b.tensor.to_numpy(), state)
        not_a_buffer = next(v for v in g.variables if v.kind == "ref" and v.byte_length is None)
        d.session.send(ReadGlobalBuffer(not_a_buffer.index))
        while isinstance(event := d.events.get(timeout=60), Log):
            pass
        assert isinstance(event, Failed) and "not a buffer" in event.message and not_a_buffer.name in event.message
    finally:
        d.close()


def test_a_reverse_step_shows_the_globals_of_that_moment(compiled):
    """Time travel restores the globals: stepped back to the second call's entry, ``calls`` is 1 again."""
    d = Driver(TimeTravelSession)
    try:
        d.ask(Open(str(compiled)), Opened)
        d.ask(Call("accumulate", (X,)), Finished)
        d.ask(Call("accumulate", (X,), stop_at_entry=True), Stopped)
        d.ask(Continue(), Finished)
        after = {v.name: v.value for v in d.ask(ReadGlobals(), Globals).variables}
        assert after["calls"] == "2"
        assert d.ask(Reverse(ReverseMode.CONTINUE), Stopped).reason == "history-start"
        back = {v.name: v.value for v in d.ask(ReadGlobals(), Globals).variables}
        assert back["calls"] == "1" and back["big"] == "14"
    finally:
        d.close()


def test_no_snapshot_or_another_builds_snapshot_gives_no_names(compiled, tmp_path):
    alone = tmp_path / "alone" / compiled.name
    alone.parent.mkdir()
    shutil.copy(compiled, alone)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(compiled, other / compiled.name)
    vm_text = next(compiled.parent.glob("*.vm.mlir")).read_text()
    # Another build: one ref global fewer than the module holds.
    dropped = "\n".join(line for line in vm_text.splitlines() if "@state__timepoint :" not in line)
    (other / next(compiled.parent.glob("*.vm.mlir")).name).write_text(dropped)
    # Another build with the same counts: two globals of the same size declared the other way round.
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    shutil.copy(compiled, swapped / compiled.name)
    lines = vm_text.splitlines()
    calls = next(k for k, line in enumerate(lines) if "vm.global.i32" in line and "@calls" in line)
    scale = next(k for k, line in enumerate(lines) if "vm.global.f32" in line and "@scale" in line)
    lines[calls], lines[scale] = lines[scale], lines[calls]
    (swapped / next(compiled.parent.glob("*.vm.mlir")).name).write_text("\n".join(lines))
    d = Driver()
    try:
        cases = ((alone, "no VM phase snapshot"), (other / compiled.name, "another build"),
                 (swapped / compiled.name, "the snapshot declares @calls as i32"))  # fmt: skip
        for path, says in cases:
            d.ask(Open(str(path), rebuild_sources=False), Opened)
            d.ask(Call("accumulate", (X,)), Finished)
            g = d.ask(ReadGlobals(), Globals)
            assert g.variables == () and says in g.names_note, g.names_note
            assert len(g.refs) == 5 and len(g.rwdata) == 16  # still there, unnamed
            state = g.refs.index("!hal.buffer")
            b = d.ask(ReadGlobalBuffer(state), GlobalBuffer)
            assert b.tensor.element_type == "u8" and "untyped" in b.type_note and b.name == f".refs[{state}]"
            np.testing.assert_array_equal(b.tensor.to_numpy().view(np.float32), np.arange(8, dtype=np.float32))
    finally:
        d.close()


def test_the_dap_globals_scope_names_them(compiled):
    """VS Code's Globals scope: each global by its name with its value at the entry of the first call (the
    initial values the program declares), not ``rwdata[0]``/``ref3``."""
    from support.dap import DapClient, lens_command

    client = DapClient([*lens_command(), "dap"])
    try:
        client.request("initialize", {"adapterID": "iree-lens"})
        client.request("launch", {"program": str(compiled), "function": "accumulate", "inputs": [X],
                                  "device": "local-sync", "engine": "debug", "stopOnEntry": True})  # fmt: skip
        client.wait_event("initialized")
        client.request("configurationDone")
        assert client.stopped()["reason"] == "entry"
        scopes = client.request("scopes", {"frameId": 1})["body"]["scopes"]
        scope = next(s for s in scopes if s["name"] == "Globals")
        variables = client.request("variables", {"variablesReference": scope["variablesReference"]})["body"]
        values = {v["name"]: (v["value"], v["type"]) for v in variables["variables"]}
        assert values["@calls"] == ("0", "i32") and values["@scale"] == ("2.5", "f32") and values["@big"] == ("7", "i64")
        assert values["@state"] == ("!hal.buffer (32 bytes, 8xf32)", "8xf32")
        # Its bytes as memory (VS Code's hex view): the initial zeros; a read past its 32 bytes is short.
        state = next(v for v in variables["variables"] if v["name"] == "@state")
        body = client.request("readMemory", {"memoryReference": state["memoryReference"], "count": 64})["body"]
        assert base64.b64decode(body["data"]) == bytes(32) and body["unreadableBytes"] == 32
        # A watch expression names a global as the scope does.
        watched = client.request("evaluate", {"expression": "@big", "frameId": 1, "context": "watch"})["body"]
        assert watched["result"] == "7"
        assert client.request("evaluate", {"expression": "@nope", "frameId": 1}, ok=False)["success"] is False
        client.request("continue", {"threadId": 1})
        client.wait_event("terminated")
    finally:
        client.close()


def test_info_globals_in_a_debug_script(compiled, tmp_path):
    """``info globals`` before the call (the initial values the program declares) and after it (IREE's
    results); --json gives the same as records; the reference engine cannot read globals and says so."""
    commands = tmp_path / "globals.cmds"
    commands.write_text("info globals\ncontinue\ninfo globals\n")
    args = ["debug", str(compiled), "--function=accumulate", f"--input={X}", f"--commands={commands}"]
    proc = lens_in_process(*args)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "@calls = 0  (i32 .rwdata[0])" in lines and "@big = 7  (i64 .rwdata[8])" in lines
    (state, count, scale, big) = _iree_results(compiled, 1)[0]
    after = lines[lines.index("Finished accumulate") :]
    assert f"@calls = {count}  (i32 .rwdata[0])" in after and f"@big = {big}  (i64 .rwdata[8])" in after
    assert f"@scale = {scale:.9g}  (f32 .rwdata[4])" in after
    assert any(line.startswith("@state = !hal.buffer, 32 bytes, 8xf32") for line in after)
    proc = lens_in_process(*args, "--json")
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"info": "globals"')]
    assert len(records) == 2 and records[1]["names"].startswith("names from")
    assert {g["name"]: g["value"] for g in records[1]["globals"]}["calls"] == str(count)
    proc = lens_in_process(*args, "--engine=reference")
    assert proc.returncode == 2 and "'info globals': the reference engine" in proc.stderr


def test_a_module_alone_is_named_by_the_rebuild_of_its_program(compiled, tmp_path):
    """A .vmfb without its phases beside it, whose program is where its debug locations say: the session's
    rebuild (identical executables) has the VM phase, which names the globals."""
    alone = tmp_path / compiled.name
    shutil.copy(compiled, alone)
    d = Driver()
    try:
        d.ask(Open(str(alone), wait_for_sources=True), Opened)
        d.ask(Call("accumulate", (X,)), Finished)
        g = d.ask(ReadGlobals(), Globals)
        assert "names from" in g.names_note and str(tmp_path) not in g.names_note, g.names_note
        assert {v.name: v.value for v in g.variables}["calls"] == "1"
    finally:
        d.close()


@pytest.mark.vulkan
def test_a_buffer_global_on_a_vulkan_device(tmp_path):
    """The state lives in device memory: read back from the Vulkan device (lavapipe without a GPU)."""
    out = tmp_path / "vulkan"
    proc = lens_in_process("phases", str(PROGRAMS / "stateful.mlir"), f"--out={out}", "--target=vulkan-spirv")
    assert proc.returncode == 0, proc.stderr
    (vmfb,) = out.glob("*.vmfb")
    state, count, _, _ = _iree_results(_cpu_build(tmp_path), 2)[-1]  # IREE's runtime on the CPU
    d = Driver()
    try:
        d.ask(Open(str(vmfb), "vulkan"), Opened)
        for _ in range(2):
            d.ask(Call("accumulate", (X,)), Finished)
        g = d.ask(ReadGlobals(), Globals)
        by_name = {v.name: v for v in g.variables}
        assert by_name["calls"].value == str(count)
        b = d.ask(ReadGlobalBuffer(by_name["state"].index), GlobalBuffer)
        np.testing.assert_array_equal(b.tensor.to_numpy(), state)
    finally:
        d.close()


def _cpu_build(tmp_path: Path) -> Path:
    from support import compile_for

    return compile_for(PROGRAMS / "stateful.mlir", tmp_path / "stateful_cpu.vmfb", "llvm-cpu")


def test_inspect_lists_the_globals_and_who_loads_and_stores_them(compiled, tmp_path):
    proc = lens_in_process("inspect", str(compiled), "--output=globals")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("globals: 5 refs, 16 bytes of others (names from")
    # As the program says: accumulate reads and writes each of its globals; the initial values are __init's.
    assert "  @calls  .rwdata[0]  i32: loaded by accumulate; stored by accumulate" in lines
    assert ("  @state  .refs[3]  !vm.ref<!hal.buffer> (holds 8xf32, as the flow phase declares it): loaded by "
            "accumulate; stored by __init, accumulate") in lines
    assert not any(line.startswith("  @__") for line in lines[1:6])  # the program's own before the compiler's
    alone = tmp_path / compiled.name
    shutil.copy(compiled, alone)
    proc = lens_in_process("inspect", str(alone), "--output=globals")
    lines = proc.stdout.splitlines()
    assert "names unknown" in lines[0] and "  .rwdata[0] i32: loaded by accumulate; stored by accumulate" in lines


def test_print_a_global_in_a_debug_script(compiled, tmp_path):
    """``print @state`` prints the tensor as IREE prints a buffer view (its runtime's own result after the
    call, formatted by iree-run-module); ``print`` of a name the module lacks is an error at its line."""
    commands = tmp_path / "print.cmds"
    commands.write_text("print @state\ncontinue\nprint @state\nprint @calls\nprint @missing\n")
    args = ["debug", str(compiled), "--function=accumulate", f"--input={X}", f"--commands={commands}"]
    proc = lens_in_process(*args)
    lines = proc.stdout.splitlines()
    assert lines[0] == "@state = 8xf32=0 0 0 0 0 0 0 0"
    import subprocess

    from support import iree_tool

    run = [iree_tool("iree-run-module"), f"--module={compiled}", "--function=accumulate", f"--input={X}"]
    expected = subprocess.run(run, capture_output=True, text=True, check=True).stdout.splitlines()
    assert f"@state = {expected[2]}" in lines and "@calls = 1" in lines  # result[0]'s line: 8xf32=0 1 2 ...
    assert proc.returncode == 1 and "print.cmds:5: 'print @missing': no global named @missing" in proc.stderr
    proc = lens_in_process(*args[:-1], f"--commands={_write(tmp_path / 'one.cmds', 'print @big')}", "--json")
    assert json.loads(proc.stdout.splitlines()[-1]) == {"print": "@big", "value": "7", "kind": "i64"}


def test_when_changed_in_a_debug_script(compiled, tmp_path):
    """``when-changed @NAME`` after the call: a number global's last store, as its kind reads (the call's
    own results say the values), and a buffer global's bytes with the dispatch that made them; before the
    program ran there is no history (an error at its line)."""
    commands = _write(tmp_path / "when.cmds", "continue\nwhen-changed @big\nwhen-changed @state\nwhen-changed @__device_0")
    args = ["debug", str(compiled), "--function=accumulate", f"--input={X}", f"--commands={commands}"]
    proc = lens_in_process(*args)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "result[3]: i64=14" in lines  # the call's own result: @big after it
    (big,) = [line for line in lines if line.startswith("@big ")]
    assert re.fullmatch(r"@big was last written at instruction \d+ \(accumulate pc 0x[0-9a-f]+\): 7 → 14", big), big
    (state,) = [line for line in lines if line.startswith("@state ")]
    assert "by a copy from allocation #" in state and "written by dispatch #0 accumulate_dispatch_0" in state, state
    assert ": 0 → 1 (element [1] of 8xf32; 7 of 8 elements differ;" in state, state
    assert "@__device_0 did not change in the recorded history" in lines
    early = _write(tmp_path / "early.cmds", "when-changed @big")
    proc = lens_in_process(*args[:-1], f"--commands={early}")
    assert proc.returncode == 1 and "early.cmds:1: 'when-changed @big': the program has no history yet" in proc.stderr
    proc = lens_in_process(*args[:-1], f"--commands={_write(tmp_path / 'j.cmds', 'continue' + chr(10) + 'when-changed @big')}",
                           "--json")  # fmt: skip
    answer = json.loads(proc.stdout.splitlines()[-1])
    assert answer["when-changed"] == "@big" and (answer["change"]["before"], answer["change"]["after"]) == ("7", "14")


def test_when_changed_on_a_register_in_a_debug_script(compiled, tmp_path):
    """``when-changed rN`` at the call's vm.return (one reverse step from its end): the ref register holding
    the result's buffer view is watched by its bytes, written by the call's dispatch (x + the state's
    zeros); a register past the frame's is an error at its line."""
    listing = _write(tmp_path / "regs.cmds", "continue\nreverse-step\ninfo registers")
    args = ["debug", str(compiled), "--function=accumulate", f"--input={X}"]
    proc = lens_in_process(*args, f"--commands={listing}")
    assert proc.returncode == 0, proc.stderr
    (held,) = [line.split(" = ")[0] for line in proc.stdout.splitlines() if line.endswith(" = 8xf32")]
    commands = _write(tmp_path / "when.cmds", f"continue\nreverse-step\nwhen-changed {held}\nwhen-changed r99")
    proc = lens_in_process(*args, f"--commands={commands}")
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith(f"%{held} ")]
    assert re.fullmatch(
        rf"%{held} was last written at instruction \d+ \(accumulate pc 0x[0-9a-f]+\) by dispatch #0 "
        r"accumulate_dispatch_0\w*: 0 → 1 \(element \[1\] of 8xf32; 7 of 8 elements differ; before: as allocated .*",
        line,
    ), line
    assert proc.returncode == 1 and "when.cmds:4: 'when-changed r99': the frame has" in proc.stderr, proc.stderr


def _write(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    return path


def test_a_constant_inline_on_a_long_line_keeps_its_name_and_type(tmp_path):
    """A flow snapshot declares weights inline (``= dense<"0x...">`` of MBs on one line): its name and type are
    read from the line's ends."""
    from engine.runtime.vmfb.global_names import flow_tensor_types

    flow = tmp_path / "m.6.flow.mlir"
    hex_digits = "AB" * 200_000
    flow.write_text(
        "module {\n"
        f'  util.global private @weights = dense<"0x{hex_digits}"> : tensor<100000xf32>\n'
        "  util.global private mutable @cache = dense<0.0> : tensor<4x8xf16>\n"
        '  util.global private @tiled : tensor<8x8xf32, #iree_encoding.encoding<"x">>\n'
        "}\n"
    )
    assert flow_tensor_types(flow) == {"weights": "100000xf32 constant", "cache": "4x8xf16"}


def test_a_dispatch_tensor_names_the_global_that_holds_it(compiled):
    """accumulate's dispatch reads @state's buffer (input 0, named) and x (an input's buffer: none); it writes a
    new buffer that becomes @state only when the call stores it after the dispatch."""
    from engine.session.protocol import Breakpoint, ReadTensors, SetBreakpoints, Tensors

    d = Driver()
    try:
        d.ask(Open(str(compiled)), Opened)
        d.session.send(SetBreakpoints((Breakpoint("dispatch", dispatch="*", when="after"),)))
        d.ask(Call("accumulate", (X,)), Stopped)
        tensors = d.ask(ReadTensors(wait_for_sources=True), Tensors).tensors
        assert [(t.label, t.global_name) for t in tensors] == [("input 0", "@state"), ("input 1", ""), ("output 0", "")]
    finally:
        d.close()


def test_save_tensors_says_which_global_holds_a_tensor(compiled, tmp_path):
    commands = _write(tmp_path / "save.cmds", f"break dispatch 0 after\ncontinue\nsave-tensors {tmp_path / 'out'}")
    args = ["debug", str(compiled), "--function=accumulate", f"--input={X}", f"--commands={commands}"]
    proc = lens_in_process(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout.splitlines()[-1])
    assert record["globals"] == {"dispatch0_after_input0.npy": "@state"}
    assert lens_in_process(*args).stdout.splitlines()[-1].endswith("dispatch0_after_input0.npy: in global @state")
