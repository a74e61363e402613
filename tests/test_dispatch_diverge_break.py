"""``break diverge``: the debug session stops after the first dispatch whose outputs differ from a reference
run (a capture bundle or another module) beyond a tolerance. The broken module is the mlp sample with one
executable's ``addf`` made a ``subf`` through ``--iree-hal-substitute-executable-source`` (as
test_dispatch_diverge.py builds it); the test names that dispatch."""

from __future__ import annotations

import json
import subprocess
import sys

from test_dispatch_diverge import _broken_build, _lens

from engine.samples import sample_path
from engine.session.script import ScriptError, parse_script

BROKEN = "main_dispatch_1"
INPUT = "--input=2x16xf32=0.25"


def _debug(module, commands: str, tmp_path, *extra: str) -> subprocess.CompletedProcess:
    script = tmp_path / "commands.txt"
    script.write_text(commands)
    return _lens("debug", module, "--function=main", INPUT, f"--commands={script}", "--json", *extra)


def _stops(proc: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_break_diverge_names_the_broken_dispatch_against_a_module_and_a_bundle(tmp_path):
    good, broken, _ = _broken_build(sample_path("mlp"), tmp_path, BROKEN, "arith.addf", "arith.subf")
    # Against the good module (run with the same inputs): the first divergent dispatch is the broken one.
    proc = _debug(broken, f"break diverge {good}\ncontinue\ncontinue\n", tmp_path)
    assert proc.returncode == 0, proc.stderr
    stops = _stops(proc)
    first = stops[0]
    assert first["reason"] == "dispatch" and first["dispatch"]["when"] == "after", first
    assert first["dispatch"]["ordinal"] == 1 and first["dispatch"]["name"].startswith(BROKEN + "_"), first
    assert first["divergence"]["mismatches"] > 0 and first["divergence"]["max_abs_error"] > 0
    # It fires once a call: the dispatches after it inherit the difference; the run then finishes.
    assert stops[-1]["reason"] == "finished", stops
    # Against a capture bundle of the good module: the same dispatch.
    bundle = tmp_path / "good_bundle"
    cap = _lens("capture", good, "--function=main", INPUT, f"--out={bundle}")
    assert cap.returncode == 0, cap.stderr
    proc = _debug(broken, f"break diverge {bundle} 1e-6 1e-6\ncontinue\n", tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = _stops(proc)[0]
    assert first["dispatch"]["ordinal"] == 1 and first["divergence"]["name"].startswith(BROKEN + "_")
    # The same module as its own reference never stops; a huge tolerance hides the broken one.
    for commands in (f"break diverge {bundle}\ncontinue\n", f"break diverge {good}\ncontinue\n"):
        same = _debug(good, commands, tmp_path)
        assert [s["reason"] for s in _stops(same)] == ["finished"], same.stdout + same.stderr
    loose = _debug(broken, f"break diverge {good} 100\ncontinue\n", tmp_path)
    assert [s["reason"] for s in _stops(loose)] == ["finished"], loose.stdout + loose.stderr


def test_break_diverge_bad_reference_and_script_errors(tmp_path):
    good, _, _ = _broken_build(sample_path("mlp"), tmp_path, BROKEN, "arith.addf", "arith.subf")
    missing = _debug(good, f"break diverge {tmp_path / 'nope'}\ncontinue\n", tmp_path)
    assert "nope does not exist" in missing.stdout + missing.stderr
    for bad in ("break diverge", "break diverge X abc", "break diverge X -1"):
        try:
            parse_script(bad)
        except ScriptError as e:
            assert "diverge" in str(e)
        else:
            raise AssertionError(f"{bad!r} was accepted")
    [command] = parse_script("break diverge ref.vmfb 1e-3 0.01")
    bp = command.breakpoint
    assert (bp.kind, bp.reference, bp.atol, bp.rtol, bp.when) == ("diverge", "ref.vmfb", 1e-3, 0.01, "after")
    helped = subprocess.run([sys.executable, "-m", "app.launcher", "debug", "--help"], capture_output=True, text=True)
    assert "break diverge BUNDLE_DIR|MODULE.vmfb [ATOL] [RTOL]" in " ".join(helped.stdout.split())
