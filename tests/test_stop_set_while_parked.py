"""A breakpoint set while the run is parked before a dispatch stops after that same dispatch, as gdb stops
at a breakpoint set ahead of where the program is. The bytes an after stop judges (what the dispatch wrote)
were not copied when the dispatch began, since nothing then looked after it; the run skipped the stop.

Real programs compiled here: ``matmul_chain12`` (twelve matmuls in one command buffer) and ``nan_matmul``
(the log, dispatch 1, writes 64 NaN)."""

from __future__ import annotations

import json

import pytest
from support.session import compile_program

from engine.cli import main as lens_main

CHAIN = ["--function=main", "--input=4x4xf32=1", "--input=4x4xf32=0.5"]
NAN = ["--function=main", "--input=8x8xf32=1", "--input=8x8xf32=-2", "--input=16x8xf32=0.5"]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    root = tmp_path_factory.mktemp("parked")
    return {name: compile_program(name, "llvm-cpu", root) for name in ("matmul_chain12", "nan_matmul")}


def stops(capsys, tmp_path, module, commands: str, args) -> list[tuple]:
    script = tmp_path / "commands.gdb"
    script.write_text(commands)
    status = lens_main(["debug", str(module), f"--commands={script}", "--json", *args])
    out = capsys.readouterr()
    assert status == 0, out.err
    lines = [json.loads(line) for line in out.out.splitlines() if line.strip()]
    return [(d["reason"], d["dispatch"]["ordinal"], d["dispatch"]["when"], sum(f["nan"] for f in d.get("nonfinite", ())))
            if d.get("dispatch") else (d["reason"],) for d in lines]  # fmt: skip


@pytest.mark.parametrize("reverse", [False, True])
def test_an_after_breakpoint_set_while_parked_before_its_dispatch_stops_there(capsys, tmp_path, programs, reverse):
    if reverse:  # parked before #3 by reverse-continue from before #9
        script = "break dispatch 9\ncontinue\nbreak dispatch 3\nreverse-continue\nbreak dispatch 3 after\ncontinue\n"
        expected = [("dispatch", 9, "before", 0), ("dispatch", 3, "before", 0), ("dispatch", 3, "after", 0)]
    else:
        script = "break dispatch 3\ncontinue\nbreak dispatch 3 after\ncontinue\ncontinue\n"
        expected = [("dispatch", 3, "before", 0), ("dispatch", 3, "after", 0), ("finished",)]
    assert stops(capsys, tmp_path, programs["matmul_chain12"], script, CHAIN) == expected


def test_break_nan_set_while_parked_before_the_first_writer_stops_after_it(capsys, tmp_path, programs):
    got = stops(capsys, tmp_path, programs["nan_matmul"], "break dispatch 1\ncontinue\nbreak nan\ncontinue\n", NAN)
    assert got == [("dispatch", 1, "before", 0), ("dispatch", 1, "after", 64)]
