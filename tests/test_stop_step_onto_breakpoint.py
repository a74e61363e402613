"""A step, next or finish that ends where a breakpoint is set stops at that breakpoint, as gdb reports it
("Breakpoint 2, ..."): reason ``breakpoint``, the breakpoint named, as a continue to it would stop. The
program: the ``chain12`` session program compiled here (its host function calls no VM function, so the
calls are stepped over by ``next`` and into by ``step``)."""

from __future__ import annotations

import json

from support.session import compile_program

from engine.cli import main as lens_main

ARGS = ["--function=main", "--input=4x8xf32=0"]


def run(capsys, tmp_path, module, commands: str) -> list[dict]:
    script = tmp_path / "commands.gdb"
    script.write_text(commands)
    status = lens_main(["debug", str(module), f"--commands={script}", "--json", *ARGS])
    out = capsys.readouterr()
    assert status == 0, out.err
    return [json.loads(line) for line in out.out.splitlines() if line.strip()]


def test_a_step_that_ends_at_a_breakpoint_stops_at_it(capsys, tmp_path):
    module = compile_program("chain12", "llvm-cpu", tmp_path)
    walked = run(capsys, tmp_path, module, "step\nstep\nstep\n")  # the first three instructions' pcs
    assert [line["reason"] for line in walked] == ["step", "step", "step"]
    function, third = walked[2]["function"], walked[2]["pc"]
    got = run(capsys, tmp_path, module, f"break pc {function}:{third}\nstep\nstep\nstep\nstep\n")
    assert [(line["reason"], line["pc"]) for line in got] == [
        ("step", walked[0]["pc"]), ("step", walked[1]["pc"]), ("breakpoint", third), ("step", got[3]["pc"])
    ]
    got = run(capsys, tmp_path, module, f"break pc {function}:{third}\nnext\nnext\n")
    assert [(line["reason"], line["pc"]) for line in got] == [("step", walked[0]["pc"]), ("step", walked[1]["pc"])]
    got = run(capsys, tmp_path, module, f"break pc {function}:{third}\nnext 5\n")
    assert [(line["reason"], line["pc"]) for line in got] == [("breakpoint", third)]


def test_a_reverse_step_that_reaches_a_breakpoint_stops_at_it(capsys, tmp_path):
    """gdb's reverse-step N stops at a breakpoint it reaches going back (it went back past it to the count)."""
    module = compile_program("chain12", "llvm-cpu", tmp_path)
    walked = run(capsys, tmp_path, module, "step\nstep\nstep\nstep\nstep\n")
    function, second, fifth = walked[1]["function"], walked[1]["pc"], walked[4]["pc"]
    got = run(capsys, tmp_path, module, f"step 5\nbreak pc {function}:{second}\nreverse-step 4\nreverse-step\n")
    assert [(line["reason"], line["pc"]) for line in got] == [
        ("step", fifth), ("breakpoint", second), ("step", walked[0]["pc"])
    ]
