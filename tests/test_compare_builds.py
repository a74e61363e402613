"""``iree-lens compare-builds``: two builds of one program matched by source line. A build with one
dispatch's kernel slowed on purpose shows that line's time grow and no other line change beyond noise."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import SHARED_MODELS, broken_pair, compile_for, lens_in_process, slowed_build

from engine.samples import sample_path
from engine.trace.build_compare import LineTimes, change_of


def _compare(a, b, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "app.launcher", "compare-builds", str(a), str(b), "--function=small_cnn",
           f"--input=@{SHARED_MODELS / 'small_cnn_x.npy'}", "--json", *extra]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_a_slowed_kernel_shows_on_its_line_alone(tmp_path):
    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    a = compile_for(source, tmp_path / "a.vmfb", "llvm-cpu")
    # small_cnn.mlir line 13 is the second onnx.Conv: its dispatch (small_cnn$async_dispatch_3) is slowed.
    b = slowed_build(source, tmp_path, "small_cnn$async_dispatch_3")
    result = _compare(a, b)
    lines = {r["loc"].rpartition(":")[2]: r for r in result["lines"]}
    assert set(lines) == {"10", "11", "12", "13", "15", "17"}
    slowed = lines["13"]
    assert slowed["op"] == 'torch.operator "onnx.Conv"'
    assert slowed["change"] == "slower", slowed
    assert slowed["b"]["time_ns"] > 3 * slowed["a"]["time_ns"]
    assert (
        slowed["a"]["dispatches"]
        == slowed["b"]["dispatches"]
        == ["small_cnn$async_dispatch_3_conv_16x8x8x8x3x3_f32"]
    )
    assert slowed["a"]["code_bytes"] != slowed["b"]["code_bytes"]  # another kernel
    others = [r for key, r in lines.items() if key != "13"]
    assert all(r["change"] == "same" for r in others), [(r["loc"], r["a"], r["b"]) for r in others]
    # Same arithmetic in smaller tiles: every line's outputs agree, the slowed one within rounding at worst.
    assert all(r["outputs"] in ("exact", "within_rounding") for r in result["lines"])
    assert result["outputs"] in ("exact", "within_rounding")


def test_the_same_build_twice_changes_nothing(tmp_path):
    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    a = compile_for(source, tmp_path / "a.vmfb", "llvm-cpu")
    result = _compare(a, a, "--no-outputs")
    assert result["lines"] and all(r["change"] == "same" for r in result["lines"])
    assert all(r["a"]["dispatch_count"] == r["b"]["dispatch_count"] for r in result["lines"])


def test_change_rule():
    a = LineTimes(("d",), 100, (10_000.0, 10_100.0, 9_900.0, 10_050.0))
    assert change_of(a, LineTimes(("d",), 100, (30_000.0, 31_000.0, 29_000.0, 30_500.0))) == "slower"
    assert change_of(a, LineTimes(("d",), 100, (10_500.0, 10_400.0, 10_600.0, 10_450.0))) == "same"  # < 10 %
    noisy = LineTimes(("d",), 100, (5_000.0, 20_000.0, 9_000.0, 16_000.0))
    assert change_of(a, noisy) == "same"  # within twice its spread
    assert change_of(None, a) == "only in B" and change_of(a, None) == "only in A"


def test_exit_status_says_whether_outputs_diverge_and_options_stand_anywhere(tmp_path):
    """As diff and cmp: 0 when the outputs agree, 1 when a build's outputs diverge, 2 for trouble; the
    options may stand between the two modules. A build with one dispatch's addf made a subf diverges."""
    a, b, _ = broken_pair(sample_path("mlp"), tmp_path, "main_dispatch_1", "arith.addf", "arith.subf")
    quick = ("--repeat=1", "--rounds=1")
    broken = lens_in_process("compare-builds", a, "--function=main", "--input=2x16xf32=0.25", b, *quick, "--json")
    assert broken.returncode == 1, broken.stderr[-2000:]
    result = json.loads(broken.stdout)
    assert result["outputs"] == "diverged" or any(r["outputs"] == "diverged" for r in result["lines"]), result
    same = lens_in_process("compare-builds", a, "--input=2x16xf32=0.25", a, "--function=main", *quick)
    assert same.returncode == 0, same.stderr[-2000:]
    unjudged = lens_in_process("compare-builds", a, b, "--function=main", "--input=2x16xf32=0.25", *quick, "--no-outputs")
    assert unjudged.returncode == 0, unjudged.stderr[-2000:]  # times alone are never a status
    missing = lens_in_process("compare-builds", a, "--function=main", tmp_path / "absent.vmfb")
    assert missing.returncode == 2 and f"no such file: {tmp_path / 'absent.vmfb'}" in missing.stderr
    helped = lens_in_process("compare-builds", "--help")
    assert "Exit status (as diff and cmp): 0 when nothing diverges, 1 when" in " ".join(helped.stdout.split())
