"""Exact stops, as gdb would make them (docs/ARCHITECTURE.md, "Stops"), through ``iree-lens debug --json``.

Programs (``session_programs/``, compiled here with the real iree-compile):

* ``nan_matmul.mlir``: tanh of a and log of b written into one slab (IREE concatenates in place, so the log
  reads and writes a binding the first dispatch wrote), then a matmul of the concatenation. With b < 0 the
  log is the first dispatch that writes NaN; which dispatch that is comes from IREE's own traced run;
* ``matmul_chain12.mlir``: twelve matmuls in one command buffer (one ``queue.execute`` runs them all: every
  dispatch at the same VM instruction);
* ``chain12.mlir``: twelve additions, each in its own command buffer.

The gdb sequences' expectations are gdb's rules applied by hand: a forward command runs on from where the
program is; reverse-continue goes to the latest hit of any condition before where it is.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import iree_compile, iree_traced_tensors
from support.session import compile_program

from engine.cli import main as lens_main
from engine.runtime.hal.vulkan.loader import vulkan_available

TRACE_FLAG = "--iree-flow-trace-dispatch-tensors"
NAN_ARGS = [np.full((8, 8), 1.0, np.float32), np.full((8, 8), -2.0, np.float32), np.full((16, 8), 0.5, np.float32)]
NAN_INPUTS = ["--function=main", "--input=8x8xf32=1", "--input=8x8xf32=-2", "--input=16x8xf32=0.5"]
CHAIN_INPUTS = {
    "matmul_chain12": ["--function=main", "--input=4x4xf32=1", "--input=4x4xf32=0.5"],
    "chain12": ["--function=main", "--input=4x8xf32=0"],
}


def debug(capsys, tmp_path, module, commands: str, *args: str, code: int = 0) -> list[dict]:
    script = tmp_path / "commands.gdb"
    script.write_text(commands)
    status = lens_main(["debug", str(module), f"--commands={script}", "--json", *args])
    out = capsys.readouterr()
    assert status == code, out.err
    return [json.loads(line) for line in out.out.splitlines() if line.strip()]


def stops(lines: list[dict]) -> list[tuple]:
    """Each printed stop as (reason, dispatch ordinal, when) — what a gdb user would read."""
    return [
        (line["reason"], *((line["dispatch"]["ordinal"], line["dispatch"]["when"]) if line.get("dispatch") else ()))
        for line in lines
        if "reason" in line
    ]


@pytest.fixture(scope="module")
def nan_first_writer(tmp_path_factory) -> tuple[str, int]:
    """The export name and ordinal of the first dispatch whose outputs hold NaN/Inf when its inputs do not, in
    IREE's own traced run of the program (no engine code)."""
    root = tmp_path_factory.mktemp("nan_traced")
    traced = iree_traced_tensors(compile_program("nan_matmul", "llvm-cpu", root, TRACE_FLAG), "main", NAN_ARGS)
    exports = []
    for key, arrays in traced:
        name, kind = key.rsplit(" ", 1)
        if kind == "inputs":
            exports.append(name.split("::")[-1])
            clean_inputs = all(np.isfinite(a).all() for a in arrays if a.dtype.kind == "f")
        elif clean_inputs and any(not np.isfinite(a).all() for a in arrays if a.dtype.kind == "f"):
            return exports[-1], len(exports) - 1
    raise AssertionError("IREE's traced run wrote no NaN")


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return tmp_path_factory.mktemp("stops")


def test_the_log_works_in_place_in_this_program(capsys, tmp_path, programs, nan_first_writer):
    """The case the rule must get right: the first NaN writer changes a binding another dispatch wrote."""
    module = compile_program("nan_matmul", "llvm-cpu", programs)
    name, ordinal = nan_first_writer
    assert "elementwise" in name and ordinal == 1
    line = debug(capsys, tmp_path, module, f"break dispatch {ordinal} after\ncontinue\n", *NAN_INPUTS)[0]
    assert line["dispatch"]["name"] == name


@pytest.mark.parametrize("engine", ["debug", "timetravel", "reference", "sources", "vulkan"])
def test_break_nan_stops_at_the_first_dispatch_that_writes_nan(capsys, tmp_path, programs, nan_first_writer, engine):
    name, ordinal = nan_first_writer
    args = list(NAN_INPUTS)
    target = "llvm-cpu"
    if engine == "reference":
        args.append("--engine=reference")
    elif engine == "vulkan":
        reason = vulkan_available()
        if reason is not None:
            pytest.skip(f"no Vulkan: {reason}")
        target = "vulkan-spirv"
        args.append("--device=vulkan")
    elif engine == "sources":
        dumps = programs / "nan_sources"
        compile_program("nan_matmul", "llvm-cpu", programs)
        module = programs / "nan_matmul.sources.vmfb"
        if not module.exists():

            from support.session import PROGRAMS

            from engine.compiler.targets import TARGETS

            iree_compile(
                [str(PROGRAMS / "nan_matmul.mlir"), *TARGETS["llvm-cpu"].flags,
                 f"--iree-hal-dump-executable-sources-to={dumps}", "-o", str(module)],
                check=True)
        args.append(f"--sources={dumps}")
    if engine != "sources":
        module = compile_program("nan_matmul", target, programs, *((TRACE_FLAG,) if engine == "reference" else ()))
    # "timetravel": a reverse command in the script makes it the session with history.
    script = "break nan\ncontinue\n" + ("reverse-step\n" if engine == "timetravel" else "")
    first = debug(capsys, tmp_path, module, script, *args)[0]
    assert first["reason"] == "dispatch"
    assert first["dispatch"] == {"ordinal": ordinal, "name": name, "when": "after"}
    written = first["nonfinite"]
    assert sum(f["nan"] for f in written) == 64  # log of 64 negative numbers
    if engine in ("sources", "reference"):
        assert [f["tensor"] for f in written] == ["output 0"]  # typed: the log's one output, whole


@pytest.mark.parametrize("target", ["llvm-cpu", "vulkan-spirv"])
def test_reverse_continue_goes_back_through_the_nan_writers_to_the_first(
    capsys, tmp_path, programs, nan_first_writer, target
):
    name, ordinal = nan_first_writer
    args = list(NAN_INPUTS)
    if target == "vulkan-spirv":
        reason = vulkan_available()
        if reason is not None:
            pytest.skip(f"no Vulkan: {reason}")
        args.append("--device=vulkan")
    module = compile_program("nan_matmul", target, programs)
    # More continues than stops: the first after the end is an error that ends the script (gdb -batch -x).
    forward = debug(capsys, tmp_path, module, "break nan\n" + "continue\n" * 8, *args, code=1)
    hits = [s for s in stops(forward) if s[0] == "dispatch"]
    assert hits[0] == ("dispatch", ordinal, "after") and stops(forward)[len(hits)] == ("finished",)
    script = "break nan\n" + "continue\n" * (len(hits) + 1) + "reverse-continue\n" * (len(hits) + 1)
    back = stops(debug(capsys, tmp_path, module, script, *args))[len(hits) + 1 :]
    assert back == [*reversed(hits), ("history-start",)]


def _chain(programs, program: str) -> tuple:
    """(module, arguments) of a chain program; ``..._vulkan``: built for Vulkan, run on lavapipe."""
    if program.endswith("_vulkan"):
        reason = vulkan_available()
        if reason is not None:
            pytest.skip(f"no Vulkan: {reason}")
        name = program.removesuffix("_vulkan")
        return compile_program(name, "vulkan-spirv", programs), [*CHAIN_INPUTS[name], "--device=vulkan"]
    return compile_program(program, "llvm-cpu", programs), CHAIN_INPUTS[program]


CHAINS = ["matmul_chain12", "chain12", "matmul_chain12_vulkan"]


@pytest.mark.parametrize("program", CHAINS)
def test_forward_after_a_reverse_move_runs_on_from_where_the_program_is(capsys, tmp_path, programs, program):
    module, args = _chain(programs, program)
    script = "break dispatch 10\ncontinue\nnext\nreverse-next\nbreak dispatch 5\ncontinue\n"
    got = stops(debug(capsys, tmp_path, module, script, *args))
    # reverse-next undoes the next: back where the next left dispatch 10's instruction (after its last
    # dispatch), so dispatch 5 is behind and the program runs to its end.
    assert got[0] == ("dispatch", 10, "before") and got[1] == ("step",)
    assert got[2][0] == "step" and got[-1] == ("finished",) and len(got) == 4


@pytest.mark.parametrize("program", CHAINS)
def test_reverse_continue_finds_after_breakpoints_and_ones_set_after_a_reverse_step(
    capsys, tmp_path, programs, program
):
    module, args = _chain(programs, program)
    script = "break dispatch 3 after\nbreak dispatch 7\ncontinue\ncontinue\nreverse-continue\nreverse-continue\n"
    got = stops(debug(capsys, tmp_path, module, script, *args))
    assert got == [("dispatch", 3, "after"), ("dispatch", 7, "before"), ("dispatch", 3, "after"), ("history-start",)]
    script = "break dispatch 10\ncontinue\nreverse-step\nbreak dispatch 5\nreverse-continue\ncontinue\n"
    got = stops(debug(capsys, tmp_path, module, script, *args))
    assert got[0] == ("dispatch", 10, "before") and got[1][0] == "step"
    # Back to 5, then forward from 5: the next hit is 10 again.
    assert got[2:] == [("dispatch", 5, "before"), ("dispatch", 10, "before")]


def test_reverse_step_inside_a_command_buffer_goes_back_one_dispatch(capsys, tmp_path, programs):
    module = compile_program("matmul_chain12", "llvm-cpu", programs)
    script = "break dispatch 6 after\ncontinue\nreverse-step\nreverse-step\nreverse-step 3\nstep\n"
    got = stops(debug(capsys, tmp_path, module, script, *CHAIN_INPUTS["matmul_chain12"]))
    assert got[:4] == [("dispatch", 6, "after"), ("step", 6, "before"), ("step", 5, "before"), ("step", 2, "before")]
    # A forward step from inside the command buffer finishes the native call (one VM instruction), and
    # stops on the way at the breakpoint after dispatch 6, ahead of dispatch 2.
    assert got[4] == ("dispatch", 6, "after")


def test_a_breakpoint_that_cannot_match_is_refused_when_set(capsys, tmp_path, programs):
    module = compile_program("chain12", "llvm-cpu", programs)
    script = tmp_path / "c.gdb"
    for line, reason in (
        ("break dispatch *softmax*", "no dispatch of chain12.llvm-cpu.vmfb is named so"),
        ("break diverge 5", "5 does not exist"),
        ("break diverge " + str(script), "is not a capture bundle"),
    ):
        script.write_text(f"{line}\ncontinue\n")
        status = lens_main(["debug", str(module), f"--commands={script}", "--json", *CHAIN_INPUTS["chain12"]])
        out = capsys.readouterr()
        assert reason in out.err and f"c.gdb:1: {line.split()[0]}" in out.err and "(not set)" in out.err, out.err
        # Refused when set, said, and the script goes on as gdb's does: the run never stops at it.
        assert status == 0 and [json.loads(x)["reason"] for x in out.out.splitlines()] == ["finished"]
    # A name some dispatch has (a glob of IREE's export names) is taken.
    got = stops(debug(capsys, tmp_path, module, "break dispatch *_dispatch_4_*\ncontinue\n", *CHAIN_INPUTS["chain12"]))
    assert got == [("dispatch", 4, "before")]


def test_the_reference_engine_refuses_a_name_no_dispatch_has(capsys, tmp_path, programs):
    module = compile_program("nan_matmul", "llvm-cpu", programs, TRACE_FLAG)
    script = tmp_path / "c.gdb"
    script.write_text("break dispatch *softmax*\ncontinue\n")
    status = lens_main(["debug", str(module), f"--commands={script}", "--engine=reference", *NAN_INPUTS])
    assert status == 0 and "no dispatch of nan_matmul.llvm-cpu.traced.vmfb is named so" in capsys.readouterr().err


def test_a_run_that_never_stops_at_a_breakpoint_says_so(capsys, tmp_path, programs):
    module = compile_program("chain12", "llvm-cpu", programs)
    script = tmp_path / "c.gdb"
    script.write_text("break dispatch 99\nbreak dispatch 2\nbreak nan\ncontinue\ncontinue\n")
    status = lens_main(["debug", str(module), f"--commands={script}", *CHAIN_INPUTS["chain12"]])
    err = capsys.readouterr().err
    assert status == 0  # a note, as gdb's program simply exits
    assert "the program ended without stopping at: before dispatch #99; after a dispatch that writes NaN/Inf" in err


# -- the replay debugger: the same gate, the same NaN rule, reverse-continue, typed tensors


@pytest.fixture(scope="module")
def nan_replay(programs):
    """``nan_matmul`` built with its executables' sources dumped, and IREE's own replay of one call."""

    from support import record_replay
    from support.session import PROGRAMS

    from engine.compiler.targets import TARGETS

    sources = programs / "replay_sources"
    module = programs / "nan_matmul.dumped.vmfb"
    iree_compile(
        [str(PROGRAMS / "nan_matmul.mlir"), *TARGETS["llvm-cpu"].flags,
         f"--iree-hal-dump-executable-sources-to={sources}", "-o", str(module)],
        check=True)  # fmt: skip
    inputs = [arg.split("=", 1)[1] for arg in NAN_INPUTS[1:]]
    replay = record_replay(module, "main", inputs, programs / "nan_matmul.ireereplay")
    return module, sources, replay


def test_replay_debugger_judges_nan_like_the_module_debugger(capsys, tmp_path, nan_replay, nan_first_writer):
    _, sources, replay = nan_replay
    name, ordinal = nan_first_writer
    script = (
        "break nan\n" + "continue\n" * 4 + "reverse-continue\n" * 3
        + f"save-tensors {tmp_path / 'saved'}\nreverse-continue\ncontinue\n"
    )
    lines = debug(capsys, tmp_path, replay, script, f"--sources={sources}")
    forward = [(line["dispatch"]["ordinal"], line["reason"]) for line in lines[:3]]
    assert forward[0] == (ordinal, "nan") and lines[0]["dispatch"]["name"] == name
    assert lines[0]["nonfinite"][0]["tensor"] == "output 0" and lines[0]["nonfinite"][0]["nan"] == 64
    assert lines[3] == {"reason": "finished", "dispatches": 5}
    # Back through the same stops, latest first, to the first writer; nothing earlier; forward again.
    back = [(line["dispatch"]["ordinal"], line["reason"]) for line in lines[4:7]]
    assert back == [(o, "reverse") for o, _ in reversed(forward)]
    saved = lines[7]["saved"]
    assert lines[8]["reason"] == "nan" and lines[8]["dispatch"]["ordinal"] == forward[1][0]
    output = np.load(next(p for p in saved if "output0" in p))
    assert output.dtype == np.float32 and np.isnan(output).sum() == 64  # typed by the sources, not bytes


def test_replay_reverse_continue_finds_a_breakpoint_set_after_stepping(capsys, tmp_path, nan_replay):
    _, _, replay = nan_replay
    # 45 host calls: past the queue_execute that ran the five dispatches (record 54), before the end.
    lines = debug(capsys, tmp_path, replay, "step 45\nbreak dispatch 2 after\nreverse-continue\ncontinue\n")
    assert lines[0]["reason"] == "step" and lines[0]["record"] > 54
    assert lines[1]["reason"] == "reverse" and lines[1]["dispatch"]["ordinal"] == 2
    assert lines[1]["dispatch"]["when"] == "after"
    assert lines[2]["reason"] == "finished"


def test_replay_run_output_is_typed_from_the_sources(tmp_path, nan_replay):
    import iree.runtime as rt

    module, sources, replay = nan_replay
    out = tmp_path / "out.npy"
    assert lens_main(["run", str(replay), f"--output=@{out}", f"--sources={sources}"]) == 0
    got = np.load(out)
    expected = rt.load_vm_flatbuffer_file(str(module), driver="local-sync").main(*NAN_ARGS).to_host()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


# -- one stop sequence through the CLI and DAP

GDB_SEQUENCE = [
    # (CLI line, DAP request, its arguments)
    ("continue", "configurationDone", None),
    ("reverse-next", "stepBack", {"threadId": 1}),
    ("reverse-continue", "reverseContinue", {"threadId": 1}),  # breakpoints 5 and "3 after" set first
    ("reverse-continue", "reverseContinue", {"threadId": 1}),
    ("continue", "continue", {"threadId": 1}),
    ("continue", "continue", {"threadId": 1}),
    ("continue", "continue", {"threadId": 1}),
]


def _dap_stop(client) -> tuple:
    """The next stop as (ordinal, when), or ("finished",) when the program exited."""
    import re

    while True:
        message = client._next(120)  # events in arrival order: the stop or the end
        if message["type"] == "event" and message["event"] == "stopped":
            client.events.remove(message)
            found = re.search(r"(before|after) dispatch #(\d+)", message["body"].get("description", ""))
            return (int(found.group(2)), found.group(1)) if found else ("stopped",)
        if message["type"] == "event" and message["event"] == "exited":
            client.events.remove(message)
            return ("finished",)


def test_the_cli_and_dap_stop_at_the_same_places(capsys, tmp_path, programs):
    from support.dap import DapClient, lens_command

    module = compile_program("matmul_chain12", "llvm-cpu", programs)
    args = CHAIN_INPUTS["matmul_chain12"]
    script = "break dispatch 10\ncontinue\nreverse-next\nbreak dispatch 5\nbreak dispatch 3 after\n" + "\n".join(
        line for line, _, _ in GDB_SEQUENCE[2:]
    ) + "\n"
    cli = [
        ("finished",) if line["reason"] == "finished" else (line["dispatch"]["ordinal"], line["dispatch"]["when"])
        for line in debug(capsys, tmp_path, module, script, *args)
    ]
    # gdb's answers: 10 (forward), back one dispatch to 9, back to 5 then to "after 3", forward 5, 10, the end.
    assert cli == [(10, "before"), (9, "before"), (5, "before"), (3, "after"), (5, "before"), (10, "before"),
                   ("finished",)]  # fmt: skip

    client = DapClient([*lens_command(), "dap"])
    try:
        client.request("initialize", {"adapterID": "iree-lens", "clientID": "pytest", "pathFormat": "path"})
        inputs = [a.split("=", 1)[1] for a in args if a.startswith("--input=")]
        client.request("launch", {"program": str(module), "function": "main", "inputs": inputs,
                                  "device": "local-sync", "engine": "debug"})  # fmt: skip
        client.wait_event("initialized")
        client.request("setFunctionBreakpoints", {"breakpoints": [{"name": "dispatch:10"}]})
        dap = []
        for k, (_, command, arguments) in enumerate(GDB_SEQUENCE):
            if k == 2:
                names = ["dispatch:10", "dispatch:5", "dispatch:3 after"]
                answer = client.request("setFunctionBreakpoints", {"breakpoints": [{"name": n} for n in names]})
                assert all(b["verified"] for b in answer["body"]["breakpoints"])
            client.request(command, arguments)
            dap.append(_dap_stop(client))
    finally:
        client.close()
    assert dap == cli


def test_a_stop_record_describes_the_typed_tensors_in_one_vocabulary(capsys, tmp_path, nan_replay, programs):
    module, sources, _ = nan_replay
    script = f"break dispatch 1 after\ncontinue\nsave-tensors {tmp_path / 'saved'}\n"
    stop, saved = debug(capsys, tmp_path, module, script, *NAN_INPUTS, f"--sources={sources}")
    # The log reads %b (binding 0) and writes its slice of the concatenation slab (binding 1): the source
    # says write-only, so the label says "write" with its role, whatever the bytes around it hold.
    labels = [t["label"] for t in stop["tensors"]]
    assert labels == ["binding 0, read, input 0", "binding 1, write, output 0"], labels
    output = stop["tensors"][1]
    assert output["element"] == "f32" and output["type_source"] == "sources" and output["length"] == 256
    assert sorted(saved["labels"].values()) == sorted(labels)


@pytest.mark.slow
def test_held_out_gdb_sequences_on_a_pytorch_cnn(capsys, tmp_path_factory):
    """The issue's sequences on SqueezeNet 1.1 as iree-turbine exports it (41 dispatches in one command
    buffer on llvm-cpu): each stop is where gdb would put it."""
    from support import SHARED_MODELS, compile_for, shared_model

    tmp = tmp_path_factory.mktemp("squeezenet_stops")
    module = compile_for(shared_model("squeezenet1_1"), tmp / "squeezenet1_1.vmfb", "llvm-cpu")
    args = ["--function=main", f"--input=@{SHARED_MODELS / 'squeezenet1_1_x.npy'}"]
    script = "break dispatch 10\ncontinue\nnext\nreverse-next\nbreak dispatch 5\ncontinue\n"
    first = stops(debug(capsys, tmp, module, script, *args))
    assert first[0] == ("dispatch", 10, "before") and first[1] == ("step",) and first[-1] == ("finished",)
    assert first[2][0] == "step" and len(first) == 4  # back inside the command buffer, after its last dispatch
    script = "break dispatch 3 after\nbreak dispatch 7\ncontinue\ncontinue\nreverse-continue\n"
    second = stops(debug(capsys, tmp, module, script, *args))
    assert second == [("dispatch", 3, "after"), ("dispatch", 7, "before"), ("dispatch", 3, "after")]
    script = "break dispatch 10\ncontinue\nreverse-step\nbreak dispatch 5\nreverse-continue\n"
    third = stops(debug(capsys, tmp, module, script, *args))
    assert third == [("dispatch", 10, "before"), ("step", 9, "before"), ("dispatch", 5, "before")]


def test_reverse_continue_finds_where_a_diverge_breakpoint_fired(capsys, tmp_path):
    from support import broken_pair

    from engine.samples import sample_path

    good, broken, _ = broken_pair(sample_path("mlp"), tmp_path, "main_dispatch_1", "arith.addf", "arith.subf")
    args = ["--function=main", "--input=2x16xf32=0.25"]
    got = stops(debug(capsys, tmp_path, broken, f"break diverge {good}\ncontinue\ncontinue\nreverse-continue\n"
                      "reverse-continue\ncontinue\ncontinue\n", *args))  # fmt: skip
    # Forward it fires once, after the broken dispatch (#1); back from the end it is found there, then nothing;
    # forward again from the start it fires there again (it is ahead again), once.
    assert got == [("dispatch", 1, "after"), ("finished",), ("dispatch", 1, "after"), ("history-start",),
                   ("dispatch", 1, "after"), ("finished",)]  # fmt: skip


def test_reverse_continue_judges_a_diverge_breakpoint_set_after_its_dispatch_ran(capsys, tmp_path):
    """gdb judges a breakpoint set late on the hits it finds going back: a diverge breakpoint set after the
    broken dispatch ran (stopped further on, or once the program finished) is found by reverse-continue
    where it would have fired forward: the first dispatch that diverges (#0, its subtraction for an
    addition), not #1, which inherits the difference."""
    from support import broken_pair

    from engine.samples import sample_path

    good, broken, _ = broken_pair(sample_path("mlp"), tmp_path, "main_dispatch_0", "arith.addf", "arith.subf")
    args = ["--function=main", "--input=2x16xf32=0.25"]
    got = stops(debug(capsys, tmp_path, broken, f"break dispatch 1 after\ncontinue\nbreak diverge {good}\n"
                      "reverse-continue\ncontinue\ncontinue\n", *args))  # fmt: skip
    # Back from after #1 to where it would have fired (after #0); forward from there: it fired already, so the
    # next stop is the breakpoint after #1, then the end.
    assert got == [("dispatch", 1, "after"), ("dispatch", 0, "after"), ("dispatch", 1, "after"), ("finished",)]
    got = stops(debug(capsys, tmp_path, broken, f"continue\nbreak diverge {good}\nreverse-continue\n"
                      "reverse-continue\ncontinue\ncontinue\n", *args))  # fmt: skip
    assert got == [("finished",), ("dispatch", 0, "after"), ("history-start",), ("dispatch", 0, "after"),
                   ("finished",)]  # fmt: skip
