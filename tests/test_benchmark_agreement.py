"""``iree-lens benchmark`` times a dispatch the way ``iree-benchmark-executable`` does and agrees with it
(medians within 10 %, the two alternating in the same minute) on a convolution; it reports its noise and
places the dispatch on the machine's roofline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import SHARED_MODELS, compile_for, slowed_build

CONV = Path(__file__).parent / "bench_programs" / "conv.mlir"


def _benchmark(vmfb: Path, tmp: Path, *extra: str) -> dict:
    rng = np.random.default_rng(0)
    x, w = tmp / "x.npy", tmp / "w.npy"
    np.save(x, rng.standard_normal((1, 16, 34, 34)).astype(np.float32))
    np.save(w, rng.standard_normal((32, 16, 3, 3)).astype(np.float32))
    cmd = [sys.executable, "-m", "app.launcher", "benchmark", str(vmfb), "--function=conv", f"--input=@{x}",
           f"--input=@{w}", "--dispatch=#0", "--json", *extra]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_convolution_median_agrees_with_iree_benchmark_executable(tmp_path):
    vmfb = compile_for(CONV, tmp_path / "conv.vmfb", "llvm-cpu")
    report = _benchmark(vmfb, tmp_path, "--repetitions=7", "--source", str(CONV))
    assert "conv" in report["dispatch"]
    ours, iree = report["original"], report["iree_original"]
    assert ours["samples"] == iree["samples"] == 7
    assert 0 < ours["p10_s"] <= ours["median_s"] <= ours["p90_s"]
    assert 0.9 <= ours["median_s"] / iree["median_s"] <= 1.1, (ours, iree)
    assert isinstance(ours["too_noisy"], bool) and ours["relative_spread"] >= 0
    roof = report["roofline"]
    # 32x32x32 outputs x 16x3x3 window, a multiply and an add each; bytes: the tensors its source declares
    # (the program is beside the module: its sources are rebuilt), not the bigger slabs IREE binds.
    assert roof["flops"] == 2 * 32 * 32 * 32 * 16 * 3 * 3
    assert roof["bytes_from"] == "tensors"
    assert roof["bytes"] == 4 * (16 * 34 * 34 + 32 * 16 * 3 * 3 + 32 * 32 * 32)
    assert roof["cache_resident"] is (roof["bytes"] <= 1 << 20)
    assert roof["machine_bandwidth_bytes_s"] > 1e8 and roof["machine_peak_flops_s"] > 1e8
    achieved = roof["flops"] / ours["median_s"]
    assert abs(roof["achieved_flops_s"] - achieved) <= 1e-6 * achieved
    assert roof["bound"] in ("memory", "compute") and 0 < roof["share_of_roof"]


def test_a_bundles_dispatch_against_another_build(tmp_path):
    # A capture bundle names the module, function and program inputs that reach the dispatch; --against
    # times the same dispatch of another build (its own kernel and workgroup count) beside it.
    from engine.dispatch.capture import capture_debug

    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    a = compile_for(source, tmp_path / "a.vmfb", "llvm-cpu")
    b = slowed_build(source, tmp_path, "small_cnn$async_dispatch_3")
    capture_debug(a, "small_cnn", [f"@{SHARED_MODELS / 'small_cnn_x.npy'}"], tmp_path / "bundle")
    cmd = [sys.executable, "-m", "app.launcher", "benchmark", f"--bundle={tmp_path / 'bundle'}", "--dispatch=#3",
           f"--against={b}", "--repetitions=3", "--min-time=0.05", "--no-roofline", "--no-iree", "--json"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert (
        report["dispatch"]
        == report["against"]["dispatch"]
        == "small_cnn$async_dispatch_3_conv_16x8x8x8x3x3_f32"
    )
    # B's tiles are one element: many more workgroups, and its kernel far slower on the same bytes.
    assert report["against"]["workgroup_count"] != report["workgroup_count"]
    assert report["against"]["ratio"] > 3


def test_dispatch_named_by_a_glob_and_a_name_that_matches_none_lists_the_run(tmp_path):
    vmfb = compile_for(CONV, tmp_path / "conv.vmfb", "llvm-cpu")
    report = _benchmark(vmfb, tmp_path, "--dispatch=*conv*", "--repetitions=1", "--min-time=0.02", "--no-iree",
                        "--no-roofline")  # fmt: skip
    assert "conv" in report["dispatch"] and "iree_original" not in report
    x, w = tmp_path / "x.npy", tmp_path / "w.npy"
    cmd = [sys.executable, "-m", "app.launcher", "benchmark", str(vmfb), "--function=conv", f"--input=@{x}",
           f"--input=@{w}", "--dispatch=*nomatch*", "--no-iree", "--no-roofline"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("iree-lens benchmark: no dispatch '*nomatch*' in a run of @conv") and "glob" in lines[0]
    assert lines[1].startswith("  #0 conv_dispatch_0_conv") and len(lines) == 2, proc.stderr


def test_dispatch_named_by_its_ordinal_alone_and_a_bad_ordinal_said_plainly(tmp_path):
    """``--dispatch=0`` is ``#0``, as ``kernel --dispatch=0`` counts; ``#x`` is one line naming the option (it
    was a ValueError raised inside the run, reported as a VM trap at hal.device.queue.execute)."""
    vmfb = compile_for(CONV, tmp_path / "conv.vmfb", "llvm-cpu")
    report = _benchmark(vmfb, tmp_path, "--dispatch=0", "--repetitions=1", "--min-time=0.02", "--no-iree",
                        "--no-roofline")  # fmt: skip
    assert report["dispatch"].startswith("conv_dispatch_0_conv")
    x, w = tmp_path / "x.npy", tmp_path / "w.npy"
    cmd = [sys.executable, "-m", "app.launcher", "benchmark", str(vmfb), "--function=conv", f"--input=@{x}",
           f"--input=@{w}", "--dispatch=#x", "--no-iree", "--no-roofline"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "iree-lens benchmark: bad --dispatch '#x': #K takes the dispatch's ordinal in the run, from 0 (#3)"
    ], proc.stderr
