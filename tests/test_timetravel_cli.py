"""``iree-lens debug --json`` with reverse commands: ``step N`` + ``reverse-step K`` prints what ``step N-K``
prints (pc, depth, registers), on llvm-cpu, vmvx and Vulkan; reverse-next/finish/continue stop records.
The expectation of every comparison is a separate run of the forward commands alone.
"""

from __future__ import annotations

import json

import pytest

from engine.cli import main as lens_main
from engine.runtime.hal.vulkan.loader import vulkan_available

_NO_VULKAN = vulkan_available()
DEVICE = {"llvm-cpu": "local-sync", "vmvx": "local-sync", "vulkan-spirv": "vulkan"}


def debug(capsys, tmp_path, module, commands: str, *args: str) -> list[dict]:
    script = tmp_path / "commands.gdb"
    script.write_text(commands)
    code = lens_main(["debug", str(module), f"--commands={script}", "--json", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return [json.loads(line) for line in out.out.splitlines() if line.strip()]


CASES = [
    ("control_flow", "collatz_steps", ["27"], [(60, 1), (60, 25), (200, 199), (9, 9)]),
    ("control_flow", "repeat_double", ["4xf32=1 2 3 4", "4"], [(30, 1), (45, 20), (52, 3)]),
    ("globals", "accumulate", ["4xf32=1 2 3 4"], [(20, 1), (25, 11)]),
]


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx", "vulkan-spirv"])
@pytest.mark.parametrize("sample,function,inputs,pairs", CASES, ids=[c[0] + "." + c[1] for c in CASES])
def test_step_n_reverse_step_k_prints_step_n_minus_k(capsys, tmp_path, compiled, target, sample, function, inputs, pairs):
    if target == "vulkan-spirv" and _NO_VULKAN is not None:
        pytest.skip(f"no Vulkan: {_NO_VULKAN}")
    module = compiled.path(sample, target)
    args = [f"--function={function}", *(f"--input={i}" for i in inputs), f"--device={DEVICE[target]}"]
    for n, k in pairs:
        back = debug(capsys, tmp_path, module, f"step {n}\nreverse-step {k}\ninfo registers\n", *args)
        assert len(back) == 3
        if n - k == 0:
            # Back to the entry: the state the call starts in (history-start only when asked for more).
            assert back[1]["reason"] == "step" and back[1]["pc"] == 0
            continue
        ahead = debug(capsys, tmp_path, module, f"step {n - k}\ninfo registers\n", *args)
        assert back[1] == ahead[0], (n, k)
        assert back[2] == ahead[1]


def test_reverse_next_finish_and_continue_records(capsys, tmp_path, compiled):
    module = compiled.path("control_flow", "llvm-cpu")
    args = ["--function=repeat_double", "--input=4xf32=1 2 3 4", "--input=5"]
    lines = debug(
        capsys,
        tmp_path,
        module,
        "break dispatch 1\nbreak dispatch 3 after\ncontinue\ncontinue\ncontinue\n"
        "reverse-continue\nreverse-continue\nreverse-continue\nreverse-next 2\n",
        *args,
    )
    first, second, end, back_second, back_first, start, nexted = lines
    assert first["dispatch"] == {**first["dispatch"], "ordinal": 1, "when": "before"}
    assert second["dispatch"]["ordinal"] == 3 and second["dispatch"]["when"] == "after"
    assert end["reason"] == "finished"
    # From the end back through the same stops, in reverse order, with the same pc and registers.
    assert back_second["reason"] == "dispatch"
    assert back_second["dispatch"]["ordinal"] == 3 and back_second["dispatch"]["when"] == "after"
    assert (back_second["function"], back_second["pc"], back_second["depth"]) == (
        second["function"],
        second["pc"],
        second["depth"],
    )
    assert back_first["dispatch"]["ordinal"] == 1 and back_first["dispatch"]["when"] == "before"
    assert back_first["pc"] == first["pc"] and back_first["registers"]["i32"] == first["registers"]["i32"]
    assert start["reason"] == "history-start" and start["pc"] == 0
    assert nexted["reason"] == "history-start"


def test_reverse_before_the_program_runs_is_an_error(capsys, tmp_path, compiled):
    module = compiled.path("control_flow", "llvm-cpu")
    script = tmp_path / "c.gdb"
    script.write_text("reverse-step\n")
    code = lens_main(["debug", str(module), f"--commands={script}", "--json", "--function=collatz_steps", "--input=27"])
    err = capsys.readouterr().err
    assert code == 1 and "no history yet" in err
    script.write_text("reverse-continue\ncontinue\n")  # as every error: the script stops at its line
    code = lens_main(["debug", str(module), f"--commands={script}", "--json", "--function=collatz_steps", "--input=27"])
    out = capsys.readouterr()
    assert code == 1 and f"{script}:1: " in out.err and "no history yet" in out.err and out.out == ""
    script.write_text("reverse-step 0\n")
    code = lens_main(["debug", str(module), f"--commands={script}", "--function=collatz_steps", "--input=27"])
    assert code == 2 and "count must be at least 1" in capsys.readouterr().err


def test_reverse_step_from_inside_a_dispatch_and_forward_again(capsys, tmp_path, compiled):
    """Parked inside dispatch 2, one reverse step goes before its instruction; one step forward parks
    in the same dispatch again, with the same record."""
    module = compiled.path("control_flow", "llvm-cpu")
    args = ["--function=repeat_double", "--input=4xf32=1 2 3 4", "--input=5"]
    parked, back, again = debug(
        capsys, tmp_path, module, "break dispatch 2\ncontinue\nreverse-step 1\nstep 1\n", *args
    )
    assert parked["reason"] == "dispatch" and parked["dispatch"]["ordinal"] == 2
    assert back["reason"] == "step" and back["dispatch"] is None and back["pc"] == parked["pc"]
    assert again == parked


def test_reverse_continue_to_a_nan_stop(capsys, tmp_path):
    from support.session import compile_program

    module = compile_program("nan_log", "llvm-cpu", tmp_path)
    args = ["--function=main", "--input=4x8xf32=1", "--input=4x8xf32=2"]
    forward = debug(capsys, tmp_path, module, "break nan\ncontinue\ncontinue\n", *args)
    stops = [line for line in forward if line["reason"] == "dispatch"]
    assert stops and all(stop["dispatch"]["when"] == "after" for stop in stops)
    script = "break nan\n" + "continue\n" * (len(stops) + 1) + "reverse-continue\n" * (len(stops) + 1)
    lines = debug(capsys, tmp_path, module, script, *args)
    assert lines[: len(stops)] == stops and lines[len(stops)]["reason"] == "finished"
    back = lines[len(stops) + 1 :]
    # Back through the NaN stops, latest first, with the records the forward run printed; then the start.
    for stop, again in zip(reversed(stops), back):
        assert again["reason"] == "dispatch"
        assert again["dispatch"]["ordinal"] == stop["dispatch"]["ordinal"] and again["dispatch"]["when"] == "after"
        assert (again["function"], again["pc"], again["depth"]) == (stop["function"], stop["pc"], stop["depth"])
    assert back[-1]["reason"] == "history-start"


def test_a_reverse_command_that_cannot_be_done_ends_the_script(capsys, tmp_path, compiled):
    """reverse-finish in the outermost frame cannot move: an error, so (as gdb -batch -x) the commands
    file stops at its line with status 1; the commands after it are not run."""
    module = compiled.path("control_flow", "llvm-cpu")
    script = tmp_path / "c.gdb"
    script.write_text("step 10\nreverse-finish\ninfo registers\nstep 1\n")
    code = lens_main(["debug", str(module), f"--commands={script}", "--json", "--function=collatz_steps", "--input=27"])
    out = capsys.readouterr()
    assert code == 1 and f"{script}:2: " in out.err and "outermost frame" in out.err
    assert "(2 later commands not run)" in out.err
    [stepped] = [json.loads(line) for line in out.out.splitlines()]
    assert stepped["reason"] == "step"




def test_reverse_next_stops_at_a_breakpoint_inside_the_call_it_steps_back_over(capsys, tmp_path):
    """gdb: reverse-next, like next, stops at a breakpoint hit inside a call it steps over. Back from after the
    second call of bump, the breakpoint at bump's entry stops it there (that call's argument, 16 = 3*5+1);
    it stepped back over the whole call to the call instruction."""
    from support.session import compile_program

    module = compile_program("bump_twice", "llvm-cpu", tmp_path)
    args = ["--function=twice", "--input=5"]
    # IREE names the private callee __func_0 in the .vmfb (its only other function is twice).
    lines = debug(capsys, tmp_path, module, "break function __func_0\ncontinue\ncontinue\nfinish\nreverse-next\n", *args)
    first, second, after, back = lines
    assert (first["function"], first["registers"]["i32"][0]) == ("__func_0", 5)
    assert (second["function"], second["registers"]["i32"][0]) == ("__func_0", 16)
    assert after["function"] == "twice" and after["depth"] == 1
    assert back["reason"] == "breakpoint" and back == second
    # Without the breakpoint, reverse-next steps back over the whole call to its call instruction in twice.
    plain = debug(capsys, tmp_path, module, f"break pc twice:{after['pc']}\ncontinue\nreverse-next\n", *args)
    assert plain[0]["registers"] == after["registers"]  # the same place, reached with no breakpoint in bump
    assert plain[1]["reason"] == "step" and plain[1]["function"] == "twice" and plain[1]["pc"] < after["pc"]
