"""A stop that reverse-continue finds is reported as the forward stop at that place was: what matched it and
what it found there, through ``iree-lens debug --json`` on a real compiled pair (the mlp sample, and the same
with its second dispatch's addition made a subtraction: it diverges there)."""

from __future__ import annotations

import json

import pytest
from support import broken_pair

from engine.cli import main as lens_main
from engine.samples import sample_path

ARGS = ["--function=main", "--input=2x16xf32=0.25"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    good, broken, _ = broken_pair(
        sample_path("mlp"), tmp_path_factory.mktemp("pair"), "main_dispatch_1", "arith.addf", "arith.subf"
    )
    return good, broken


def debug(capsys, tmp_path, module, commands: str) -> tuple[list[dict], str]:
    script = tmp_path / "commands.gdb"
    script.write_text(commands)
    status = lens_main(["debug", str(module), f"--commands={script}", "--json", *ARGS])
    out = capsys.readouterr()
    assert status == 0, out.err
    return [json.loads(line) for line in out.out.splitlines() if line.strip()], out.err


def test_reverse_continue_to_a_divergence_reports_what_diverged_and_that_it_stopped(capsys, tmp_path, pair):
    good, broken = pair
    forward, _ = debug(capsys, tmp_path, broken, f"break diverge {good}\ncontinue\n")
    assert forward[0]["dispatch"]["ordinal"] == 1 and forward[0]["divergence"]["mismatches"] > 0

    # Past the end, then a diverge breakpoint: reverse-continue judges the history and stops after #1; on to
    # the end again.
    lines, err = debug(capsys, tmp_path, broken, f"continue\nbreak diverge {good}\nreverse-continue\ncontinue\n")
    assert [line["reason"] for line in lines] == ["finished", "dispatch", "finished"]
    back = lines[1]
    assert back["dispatch"] == forward[0]["dispatch"]
    found, expected = back.get("divergence"), forward[0]["divergence"]
    assert found is not None, back
    for key in ("ordinal", "output", "max_abs_error", "max_rel_error", "mismatches", "first_mismatch"):
        assert found[key] == expected[key], key
    # It stopped there (going back): not said to be a breakpoint the program never stopped at.
    assert "without stopping at" not in err, err
