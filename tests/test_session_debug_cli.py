"""``iree-lens debug``: commands files run on both engines, one JSON line a stop.

The programs are compiled here with the real iree-compile: ``session_programs/nan_log.mlir`` (three
dispatches, NaN from the second for a < b), with and without IREE's trace points, and the real-frontend
ONNX imports of the shared models folder when it is there.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.session import PROGRAMS, compile_program

from engine.cli import main as lens_main

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
TRACE_FLAG = "--iree-flow-trace-dispatch-tensors"
HEALTHY_VALUES = ["4x8xf32=3", "4x8xf32=1"]
HEALTHY = [f"--input={value}" for value in HEALTHY_VALUES]
NAN = ["--input=4x8xf32=1", "--input=4x8xf32=2"]


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    root = tmp_path_factory.mktemp("debug_cli")
    return {
        "plain": compile_program("nan_log", "llvm-cpu", root),
        "traced": compile_program("nan_log", "llvm-cpu", root, TRACE_FLAG),
    }


def debug(capsys, tmp_path, module, commands: str, *args: str) -> tuple[int, list[dict], str]:
    script = tmp_path / "commands.gdb"
    script.write_text(commands)
    code = lens_main(["debug", str(module), f"--commands={script}", "--json", *args])
    out = capsys.readouterr()
    lines = [json.loads(line) for line in out.out.splitlines() if line.strip()]
    return code, lines, out.err


def test_break_dispatch_json_lines_and_finished(capsys, tmp_path, modules):
    code, lines, err = debug(
        capsys, tmp_path, modules["plain"], "break dispatch 1\n# comment\n\ncontinue\ncontinue\n",
        "--function=main", *HEALTHY,
    )
    assert code == 0, err
    stop, end = lines
    assert set(stop) >= {"reason", "function", "pc", "depth", "dispatch", "registers"}
    assert stop["reason"] == "dispatch" and stop["function"] == "main" and stop["depth"] == 1
    assert stop["dispatch"]["ordinal"] == 1 and stop["dispatch"]["when"] == "before"
    assert stop["dispatch"]["name"].startswith("main_dispatch_1_")
    assert isinstance(stop["pc"], int) and len(stop["registers"]["i32"]) > 0
    assert end["reason"] == "finished" and end["dispatch"] is None
    assert np.allclose(end["outputs"][0]["values"], np.log(2.0) ** 2)


def test_break_nan_stops_after_the_log(capsys, tmp_path, modules):
    code, lines, err = debug(
        capsys, tmp_path, modules["plain"], "break nan\ncontinue\n", "--function=main", *NAN
    )
    assert code == 0, err
    assert [(x["dispatch"]["ordinal"], x["dispatch"]["when"]) for x in lines] == [(1, "after")]


def test_break_by_name_function_and_pc(capsys, tmp_path, modules):
    """The entry of the called function is where gdb's ``break main`` then ``run`` stops: first there (both
    breakpoints at pc 0), then at the dispatch, then the end."""
    code, lines, err = debug(
        capsys, tmp_path, modules["plain"],
        "break dispatch *dispatch_2* after\nbreak pc main:0\nbreak function main\ncontinue\ncontinue\ncontinue\n",
        "--function=main", *HEALTHY,
    )
    assert code == 0, err
    assert [x["reason"] for x in lines] == ["breakpoint", "dispatch", "finished"], lines
    assert lines[0]["function"] == "main" and lines[0]["pc"] == 0 and lines[0]["depth"] == 1
    assert lines[1]["dispatch"]["ordinal"] == 2 and lines[1]["dispatch"]["when"] == "after"


def test_break_function_of_the_called_function_stops_at_its_entry(capsys, tmp_path, modules):
    code, lines, err = debug(
        capsys, tmp_path, modules["plain"], "break function main\ncontinue\ncontinue\n", "--function=main", *HEALTHY
    )
    assert code == 0, err
    assert [(x["reason"], x["function"], x["pc"]) for x in lines[:1]] == [("breakpoint", "main", 0)]
    assert lines[1]["reason"] == "finished" and len(lines) == 2


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("break function nosuchfn", "break function nosuchfn: no function of nan_log.llvm-cpu.vmfb is named so (its functions: "),
        ("break pc nosuch:12", "break pc nosuch:0xc: no function of nan_log.llvm-cpu.vmfb is named so (its functions: "),
        ("break pc main:99999", "break pc main:0x1869f: 0x1869f is not the pc of an instruction of main (its last "),
        ("break pc main:2", "break pc main:0x2: 0x2 is not the pc of an instruction of main (the nearest: 0x1, 0x"),
    ],
)
def test_a_vm_breakpoint_naming_no_instruction_is_not_set(capsys, tmp_path, modules, line, said):
    """As a dispatch name no dispatch has: a '(not set)' note naming the module's functions (or the pcs near),
    the script goes on, status 0, and no Python exception's name."""
    code, lines, err = debug(capsys, tmp_path, modules["plain"], f"{line}\ncontinue\n", "--function=main", *HEALTHY)
    assert code == 0 and [x["reason"] for x in lines] == ["finished"], err
    assert f"commands.gdb:1: {said}" in err and "(not set)" in err, err
    if "its functions" in said:
        assert "main" in err.split("its functions: ")[-1], err
    assert "KeyError" not in err and "OUT_OF_RANGE" not in err, err


def test_a_breakpoint_not_set_is_said_once_at_its_line(capsys, tmp_path, modules):
    code, lines, err = debug(
        capsys, tmp_path, modules["plain"],
        "break dispatch *nomatch*\nbreak dispatch 1\nbreak function nosuchfn\nbreak dispatch 2\ncontinue\ncontinue\ncontinue\n",
        "--function=main", *HEALTHY,
    )  # fmt: skip
    assert code == 0, err
    assert [x["reason"] for x in lines] == ["dispatch", "dispatch", "finished"], err
    notes = [n for n in err.splitlines() if "(not set)" in n]
    assert len(notes) == 2, err
    assert "commands.gdb:1: break dispatch *nomatch*" in notes[0] and "nosuchfn" not in notes[0]
    assert "commands.gdb:3: break function nosuchfn" in notes[1] and "nomatch" not in notes[1]
    assert "ended without stopping" not in err, err


def test_step_n_is_exact_and_deterministic(capsys, tmp_path, modules):
    """step 7 lands where step 3 + step 4 lands, with the same registers, every time."""
    args = ("--function=main", *HEALTHY)
    _, once, _ = debug(capsys, tmp_path, modules["plain"], "step 7\n", *args)
    _, split, _ = debug(capsys, tmp_path, modules["plain"], "step 3\nstep 4\n", *args)
    _, again, _ = debug(capsys, tmp_path, modules["plain"], "step 7\n", *args)
    assert once[-1] == split[-1] == again[-1]
    assert once[-1]["reason"] == "step"
    # next 1 / finish work too
    code, lines, err = debug(capsys, tmp_path, modules["plain"], "next 2\nfinish\n", *args)
    assert code == 0, err and lines[-1]["reason"] == "finished"


def test_both_engines_stop_at_the_same_dispatch_with_the_same_inputs(capsys, tmp_path, modules):
    for ordinal in range(3):
        saved = {}
        for engine in ("debug", "reference"):
            out = tmp_path / f"{engine}{ordinal}"
            code, lines, err = debug(
                capsys, tmp_path, modules["traced"], f"break dispatch {ordinal}\ncontinue\nsave-tensors {out}\n",
                "--function=main", *HEALTHY, f"--engine={engine}",
            )
            assert code == 0, err
            assert lines[0]["dispatch"]["ordinal"] == ordinal
            saved[engine] = (lines[0]["dispatch"]["name"], [np.load(p) for p in lines[1]["saved"]])
        assert saved["debug"][0] == saved["reference"][0]
        reference_inputs = saved["reference"][1]
        debug_bindings = saved["debug"][1]
        assert reference_inputs
        for k, expected in enumerate(reference_inputs):
            assert debug_bindings[k].tobytes() == expected.tobytes(), (ordinal, k)


def test_reference_engine_needs_trace_points(capsys, tmp_path, modules):
    code, lines, err = debug(
        capsys, tmp_path, modules["plain"], "break dispatch 0\ncontinue\n", "--function=main", *HEALTHY,
        "--engine=reference",
    )
    assert code != 0 and "trace points" in err and "--iree-flow-trace-dispatch-tensors" in err


def test_reference_engine_runs_a_module_without_trace_points_when_no_stop_is_asked(capsys, tmp_path, modules):
    # A plain reference run: nothing asks for a dispatch stop, so no trace points are needed (it was refused
    # at open); the result is the traced module's.
    results = {}
    for name in ("plain", "traced"):
        (tmp_path / name).mkdir()
        code, lines, err = debug(capsys, tmp_path / name, modules[name], "continue\n", "--function=main", *HEALTHY,
                                 "--engine=reference")  # fmt: skip
        assert code == 0, err
        results[name] = lines[-1]["outputs"]
    assert results["plain"] == results["traced"] and results["plain"]


def test_reference_engine_refuses_vm_commands_by_line(capsys, tmp_path, modules):
    code, _, err = debug(
        capsys, tmp_path, modules["traced"], "break dispatch 0\n\nstep 2\n", "--function=main", *HEALTHY,
        "--engine=reference",
    )
    assert code == 2 and ":3:" in err


@pytest.mark.parametrize(
    "script, line",
    [("continue\nfrobnicate\n", 2), ("break dispatch\n", 1), ("# x\nstep zero\n", 2), ("break pc main\n", 1)],
)
def test_a_bad_line_is_an_error_naming_its_number(capsys, tmp_path, modules, script, line):
    code, lines, err = debug(capsys, tmp_path, modules["plain"], script, "--function=main", *HEALTHY)
    assert code == 2 and lines == [] and f"commands.gdb:{line}:" in err


@pytest.mark.parametrize("model, function", [("small_cnn", "small_cnn"), ("attention_block", "attention_block")])
def test_real_frontend_model_every_dispatch_in_both_engines(capsys, tmp_path, model, function):
    source = MODELS / f"{model}.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent (the shared models folder)")
    module = compile_program(str(source), "llvm-cpu", tmp_path, TRACE_FLAG)
    x = f"--input=@{MODELS / f'{model}_x.npy'}"
    names = {}
    for engine in ("debug", "reference"):
        code, lines, err = debug(
            capsys, tmp_path, module, "break dispatch *\n" + "continue\n" * 200, f"--function={function}", x,
            f"--engine={engine}",
        )
        # More continues than stops: the first after the end is an error that ends the script (gdb -batch -x).
        assert code == 1 and err.count("'continue': the program is not being run (finished)") == 1, err
        stops = [line for line in lines if line["reason"] == "dispatch"]
        assert lines[len(stops)]["reason"] == "finished" and len(lines) == len(stops) + 1
        names[engine] = [(s["dispatch"]["ordinal"], s["dispatch"]["name"]) for s in stops]
    assert names["debug"] == names["reference"] and len(names["debug"]) >= 3


def test_a_failing_program_prints_failed_and_exits_1(capsys, tmp_path, modules):
    code, lines, err = debug(
        capsys, tmp_path, modules["plain"], "continue\ncontinue\n", "--function=main",
        "--input=4x7xf32=1", "--input=4x8xf32=1",
    )
    assert code == 1 and lines[-1]["reason"] == "failed" and lines[-1]["status"] == "INVALID_ARGUMENT"
    assert "mismatch" in lines[-1]["message"]


def test_after_the_program_fails_the_script_looks_back_from_where_it_failed(capsys, tmp_path):
    """A failed cf.assert (vm.fail, FAILED_PRECONDITION): as gdb after a fatal signal, the commands after the
    failure run: info registers gives the failing frame's (the register vm.fail names holds 9), reverse-step
    goes to the instruction before it; forward again from there fails at the same pc; a continue after the
    failure is an error. The status is 1: the program failed. The commands file stopped at the failure."""
    module = compile_program("square_assert", "llvm-cpu", tmp_path)
    script = "continue\ninfo registers\nreverse-step\ninfo registers\ncontinue\ncontinue\nstep\n"
    code, lines, err = debug(capsys, tmp_path, module, script, "--function=main", "--input=4xf32=1")
    assert code == 1, err
    failed, at_failure, back, before, again = lines
    assert failed["reason"] == "failed" and failed["status"] == "FAILED_PRECONDITION", failed
    assert at_failure["info"] == "registers" and at_failure["pc"] == failed["pc"]
    assert at_failure["registers"]["i32"][0] == 9  # FAILED_PRECONDITION, the status vm.fail %i0 raises
    assert back["reason"] == "step" and back["pc"] < failed["pc"] and before["pc"] == back["pc"]
    assert again["reason"] == "failed" and again["pc"] == failed["pc"]
    assert "commands.gdb:6: 'continue': the program is not being run (failed)" in err, err
    assert "(1 later commands not run)" in err, err


@pytest.mark.parametrize(
    ("script", "printed", "line", "said"),
    [
        # A run command after the end: gdb's "The program is not being run." is an error, not a note.
        ("continue\ncontinue\ninfo registers\n", ["finished"], 2, "'continue': the program is not being run (finished)"),
        ("continue\nstep 2\ncontinue\n", ["finished"], 2, "'step 2': the program is not being run (finished)"),
        ("continue\nfinish\n", ["finished"], 2, "'finish': the program is not being run (finished)"),
        # Nothing to read: gdb's "The program has no registers now.", an error too.
        ("info registers\ncontinue\n", [], 1, "no registers: the program is not stopped (not started)"),
        ("continue\ninfo registers\n", ["finished"], 2, "no registers: the program is not stopped (finished)"),
        ("save-tensors out\ncontinue\n", [], 1, "needs a stop at a dispatch, or the finished program's outputs"),
        ("step\nsave-tensors out\ncontinue\n", ["step"], 2, "(stopped, not at a dispatch)"),
    ],
)
def test_a_command_that_cannot_be_done_ends_the_script_with_status_1(
    capsys, tmp_path, modules, script, printed, line, said
):
    """One rule for every verb, gdb -batch -x's: the error is said at its line, the commands after it are
    not run, and the exit status is 1."""
    script = script.replace("save-tensors out", f"save-tensors {tmp_path / 'out'}")
    code, lines, err = debug(capsys, tmp_path, modules["plain"], script, "--function=main", *HEALTHY)
    assert code == 1, err
    assert [x["reason"] for x in lines] == printed  # nothing after the failing line ran
    assert f"commands.gdb:{line}: " in err and said in err, err
    later = len([x for x in script.splitlines() if x.strip()]) - line
    assert (f"({later} later commands not run)" in err) == (later > 0), err
    assert not (tmp_path / "out").exists()


def test_notes_leave_the_status_alone(capsys, tmp_path, modules):
    """A breakpoint that cannot be set is said '(not set)' and the script goes on (as gdb answers no to a
    pending breakpoint); a dispatch breakpoint the program never reached is said at the end: status 0."""
    code, lines, err = debug(
        capsys, tmp_path, modules["plain"], "break dispatch *no_such_export*\nbreak dispatch 9\ncontinue\n",
        "--function=main", *HEALTHY,
    )  # fmt: skip
    assert code == 0 and [x["reason"] for x in lines] == ["finished"], err
    assert "(not set)" in err and "ended without stopping at" in err


def test_the_rule_is_in_the_help(capsys):
    with pytest.raises(SystemExit):
        lens_main(["debug", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit status, as gdb -batch -x FILE: 0 when every command did what it says. 1 when one could not" in text
    assert "the commands file stops there" in text and "2: a commands file that cannot be read or parsed" in text


@pytest.mark.parametrize(
    ("script", "printed", "said"),
    [
        ("continue\ncontinue\n", ["finished"], "line 2: 'continue': the replay is not being run (finished)"),
        ("info registers\ncontinue\n", [], "line 1: 'info registers': the replay is not stopped (not started)"),
        ("save-tensors out\ncontinue\n", [], "line 1: save-tensors: not stopped at a dispatch"),
    ],
)
def test_a_replays_debugger_follows_the_same_rule(capsys, tmp_path, modules, script, printed, said):
    from support import record_replay

    replay = record_replay(modules["plain"], "main", HEALTHY_VALUES, tmp_path / "run.ireereplay")
    commands = tmp_path / "commands.gdb"
    commands.write_text(script.replace("save-tensors out", f"save-tensors {tmp_path / 'out'}"))
    code = lens_main(["debug", str(replay), f"--commands={commands}", "--json"])
    out = capsys.readouterr()
    lines = [json.loads(line) for line in out.out.splitlines() if line.strip()]
    assert code == 1 and [x["reason"] for x in lines] == printed and said in out.err, out.err


def test_a_command_ends_with_its_code_even_if_a_thread_lingers(tmp_path):
    # A thread still running when a command returns (a session's worker inside IREE's runtime, under load)
    # must not turn a complete run into an abort at interpreter exit: the command's output is flushed and
    # the process ends with the command's own code.
    import os
    import subprocess
    import sys

    program = (
        "import threading, time\n"
        "from engine.cli import end_command\n"
        "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
        "print('complete', flush=False)\n"
        "raise SystemExit(end_command(3))\n"
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60)
    assert (proc.returncode, proc.stdout) == (3, "complete\n"), proc.stderr


@pytest.mark.skipif(not (MODELS / "small_cnn.mlir").exists(), reason="../shared/models is not here")
def test_save_tensors_names_an_untyped_binding_by_its_index(capsys, tmp_path):
    """Untyped (no sources, the program gone), each file saved at a stop holds one binding and is named by
    its binding index: small_cnn's convolution shows binding 1 (read) before bindings 0 and 2 (one slab bound
    twice, access unknown); a count of the shown bindings named them otherwise, one file overwriting another."""
    import re
    import shutil

    from support import compile_for

    work = tmp_path / "work"
    work.mkdir()
    program = Path(shutil.copy(MODELS / "small_cnn.mlir", work / "small_cnn.mlir"))
    module = Path(shutil.copy(compile_for(program, work / "m.vmfb", "llvm-cpu"), tmp_path / "small_cnn.vmfb"))
    shutil.rmtree(work)  # nothing can rebuild the executables' sources: the bindings stay untyped
    checked = 0
    for ordinal in range(6):
        saved = tmp_path / f"saved{ordinal}"
        code, lines, err = debug(capsys, tmp_path, module, f"break dispatch {ordinal} after\ncontinue\n"
                                 f"save-tensors {saved}\n", "--function=small_cnn",
                                 f"--input=@{MODELS / 'small_cnn_x.npy'}")  # fmt: skip
        assert code == 0, err
        [answer] = [line for line in lines if "saved" in line]
        assert len(answer["saved"]) == len(answer["labels"]) == len(list(saved.iterdir())), answer
        for name, label in answer["labels"].items():
            index = int(re.fullmatch(rf"dispatch{ordinal}_after_binding(\d+)\.npy", name).group(1))
            assert label.startswith(f"binding {index}, "), (name, label)
            checked += 1
    assert checked >= 14  # every binding of the six dispatches, none lost to a name taken twice


def test_the_first_stop_record_is_typed_as_save_tensors_types_it(capsys, tmp_path):
    """A module compiled without its sources, its program still there: the session rebuilds the sources
    before the run (``Open.wait_for_sources``), so the stop record's tensors are typed from the first stop,
    as save-tensors types them. They were the bindings' u8 bytes until a save-tensors had waited for it."""
    import shutil

    from support import compile_for

    from engine.samples import sample_path

    program = Path(shutil.copy(sample_path("mlp"), tmp_path / "mlp.mlir"))
    module = compile_for(program, tmp_path / "mlp.vmfb", "llvm-cpu")
    code, lines, err = debug(capsys, tmp_path, module, f"break dispatch 0 after\ncontinue\nsave-tensors {tmp_path / 's'}\n",
                             "--function=main", "--input=2x16xf32=1")  # fmt: skip
    assert code == 0, err
    assert "executables identical to the module's" in err, err
    [stop, saved] = lines
    described = [(t["label"], t["element"], t["type_source"]) for t in stop["tensors"]]
    assert all(source == "sources" and element != "u8" for _, element, source in described), described
    assert [label for label, _, _ in described] == list(saved["labels"].values())
    # --no-rebuild: only given or found sources type them (a large model's first rebuild takes minutes).
    code, lines, err = debug(capsys, tmp_path, module, "break dispatch 0 after\ncontinue\n", "--function=main",
                             "--input=2x16xf32=1", "--no-rebuild")  # fmt: skip
    assert code == 0 and "rebuil" not in err, err
    assert {(t["element"], t["type_source"]) for t in lines[0]["tensors"]} == {("u8", "untyped")}




def test_save_tensors_says_which_files_hold_bits(capsys, tmp_path):
    """A bf16 tensor is saved as its bits (a .npy cannot hold bf16 without ml_dtypes): the answer says so, or
    the file's uint16 16400 reads as a number rather than bf16 2.25."""
    from support import compile_for

    module = compile_for(PROGRAMS / "bf16_square.mlir", tmp_path / "bf16.vmfb", "llvm-cpu")
    saved = tmp_path / "s"
    code, lines, err = debug(capsys, tmp_path, module, f"break dispatch 0 after\ncontinue\nsave-tensors {saved}\n",
                             "--function=main", "--input=6x7xbf16=1.5")  # fmt: skip
    assert code == 0, err
    answer = lines[-1]
    assert answer["bits"] == {"dispatch0_after_input0.npy": "bf16", "dispatch0_after_output0.npy": "bf16"}, answer
    out = np.load(saved / "dispatch0_after_output0.npy")
    assert out.dtype == np.uint16 and set(out.ravel().tolist()) == {0x4010}  # bf16 2.25
    script = tmp_path / "text.gdb"
    script.write_text(f"break dispatch 0 after\ncontinue\nsave-tensors {saved}\n")
    assert lens_main(["debug", str(module), f"--commands={script}", "--function=main", "--input=6x7xbf16=1.5"]) == 0
    text = capsys.readouterr().out
    assert "dispatch0_after_output0.npy: bf16 as its bits (uint16)" in text, text


def test_break_nan_stops_at_the_same_dispatches_on_both_engines(capsys, tmp_path, modules):
    """nan_log's third dispatch squares the logs: its NaN are the second's, carried over bit for bit. The debug
    engine counts them written there (the output is not updated in place); the reference engine judged every
    output only on the elements that differ from a same-shape input, so it did not stop there, and said its
    NaN breakpoint never stopped the program though it had. With the executables' sources (here: rebuilt)
    telling the output is write-only, it is judged whole, as the debug engine judges it."""
    script = "break nan\ncontinue\ncontinue\ncontinue\n"
    seen = {}
    for engine, module in (("debug", modules["plain"]), ("reference", modules["traced"])):
        code, lines, err = debug(capsys, tmp_path, module, script, "--function=main", *NAN, f"--engine={engine}")
        assert code == 0, err
        assert "without stopping at" not in err, err
        seen[engine] = [(x["dispatch"]["ordinal"], [(f["count"], f["nan"]) for f in x["nonfinite"]])
                        for x in lines if x["reason"] == "dispatch"]  # fmt: skip
    assert seen["debug"] == seen["reference"] == [(1, [(32, 32)]), (2, [(32, 32)])], seen
