"""``iree-lens compare-builds``: two builds of one program matched by source line. A build with one
dispatch's kernel slowed on purpose shows that line's time grow and no other line change beyond noise."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import SHARED_MODELS, broken_pair, compile_for, iree_compile, lens_in_process, slowed_build

from engine.cli.compare_builds import row_text
from engine.samples import sample_path
from engine.trace.build_compare import LineComparison, LineTimes, change_of, judge_change


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
    assert slowed["rounds"] == {"count": 3, "slower": 3, "faster": 0} and slowed["noise"] is None
    others = [r for key, r in lines.items() if key != "13"]
    assert all(r["change"] == "same" for r in others), [(r["loc"], r["a"], r["b"]) for r in others]
    # Same arithmetic in smaller tiles: every line's outputs agree, the slowed one within rounding at worst.
    assert all(r["outputs"] in ("exact", "within_rounding") for r in result["lines"])
    assert result["outputs"] in ("exact", "within_rounding")


# One matmul executable run from two lines (IREE deduplicates it): on integers the first is exact in any
# order of summation, the second, on random floats, rounds otherwise on another CPU's vector width.
TWICE = """func.func @main(%x: tensor<32x64xf32>, %w: tensor<64x64xf32>, %r: tensor<64x64xf32>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %z = arith.constant 0.0 : f32
  %init = linalg.fill ins(%z : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %a = linalg.matmul ins(%x, %w : tensor<32x64xf32>, tensor<64x64xf32>) outs(%init : tensor<32x64xf32>) -> tensor<32x64xf32>
  %b = linalg.matmul ins(%a, %r : tensor<32x64xf32>, tensor<64x64xf32>) outs(%init : tensor<32x64xf32>) -> tensor<32x64xf32>
  return %b : tensor<32x64xf32>
}
"""


def test_a_deduplicated_kernels_runs_are_judged_on_their_own_lines(tmp_path):
    """Each run's output verdict goes to the line it ran from; both lines read the worst of the two runs."""
    import numpy as np

    source = tmp_path / "twice.mlir"
    source.write_text(TWICE)
    a = compile_for(source, tmp_path / "a.vmfb", "llvm-cpu")
    b = compile_for(source, tmp_path / "b.vmfb", "llvm-cpu", "--iree-llvmcpu-target-cpu=generic")
    rng = np.random.default_rng(0)
    inputs = []
    for name, array in (("x", rng.integers(-3, 4, (32, 64))), ("w", rng.integers(-3, 4, (64, 64))),
                        ("r", rng.standard_normal((64, 64)))):  # fmt: skip
        np.save(tmp_path / f"{name}.npy", array.astype(np.float32))
        inputs.append(f"--input=@{tmp_path / f'{name}.npy'}")
    proc = lens_in_process("compare-builds", a, b, "--function=main", *inputs, "--json", "--rounds=1", "--repeat=2")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    by_line = {r["loc"].rpartition(":")[2]: r for r in result["lines"]}
    assert by_line["5"]["a"]["dispatches"] == by_line["6"]["a"]["dispatches"]  # the premise: one executable
    assert by_line["5"]["outputs"] == "exact"
    assert by_line["6"]["outputs"] == "within_rounding"
    assert result["outputs"] == "within_rounding"


def test_the_same_build_twice_changes_nothing(tmp_path):
    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    a = compile_for(source, tmp_path / "a.vmfb", "llvm-cpu")
    result = _compare(a, a, "--no-outputs", "--rounds=4")
    assert result["lines"] and all(r["change"] == "same" for r in result["lines"])
    assert all(r["a"]["dispatch_count"] == r["b"]["dispatch_count"] for r in result["lines"])
    # Every line was timed in each of the four rounds of both builds, each round judged on its own.
    assert all(r["rounds"]["count"] == 4 and r["a"]["calls"] == r["b"]["calls"] == 40 for r in result["lines"])


def test_change_rule():
    a = LineTimes(("d",), 100, (10_000.0, 10_100.0, 9_900.0, 10_050.0))
    assert change_of(a, LineTimes(("d",), 100, (30_000.0, 31_000.0, 29_000.0, 30_500.0))) == "slower"
    assert change_of(a, LineTimes(("d",), 100, (10_500.0, 10_400.0, 10_600.0, 10_450.0))) == "same"  # < 10 %
    noisy = LineTimes(("d",), 100, (5_000.0, 20_000.0, 9_000.0, 16_000.0))
    assert change_of(a, noisy) == "same"  # within twice its spread
    assert change_of(None, a) == "only in B" and change_of(a, None) == "only in A"


def _rounds(*medians_us: float, calls: int = 10) -> LineTimes:
    """A line's times: ``calls`` calls per round, each round's calls at its median (+/- 1 %)."""
    times, rounds = [], []
    for k, us in enumerate(medians_us):
        times += [us * 1e3 * (1 + 0.01 * ((c % 3) - 1)) for c in range(calls)]
        rounds += [k] * calls
    return LineTimes(("d",), 100, tuple(times), tuple(rounds))


def test_a_change_holds_in_every_round():
    """One build against itself on a loaded machine, each process of small_cnn's first convolution ran at
    about 2.7 us or 3.8 us per call, whichever core it got, for its whole life (measured: A 2.73, 2.73,
    3.78, 3.72, 3.88 us in five rounds). Three fast processes of A in four rounds put A's calls apart from
    B's, 1 us (38 %) below: the pooled rule called the same code slower. Per round, B was slower in three of
    four, faster in the fourth: within noise, and said so."""
    a, b = _rounds(2.73, 2.73, 2.74, 3.88), _rounds(3.82, 3.79, 3.80, 3.74)
    assert b.quartiles_ns[0] > a.quartiles_ns[1] and b.median_ns - a.median_ns > 1000  # pooled: apart
    judged = judge_change(a, b)
    assert (judged.change, judged.rounds, judged.rounds_slower, judged.rounds_faster) == ("same", 4, 3, 1)
    assert judged.noise == ("within noise: B +1.04 us (+38%) on the medians, but slower in only 3 of 4 rounds "
                            "(each round's median; a change holds in 4)"), judged.noise
    line = LineComparison("m.mlir:10", "conv", a, b, judged.change, None, judged.noise, judged.rounds_slower,
                          judged.rounds_faster, judged.rounds)
    assert row_text(line).split()[-2:] == ["noise", "-"]
    # The same rounds, B slower in each: a change, whatever the pooled median alone would say.
    judged = judge_change(_rounds(3.0, 3.1, 2.9), _rounds(9.0, 9.2, 8.8))
    assert (judged.change, judged.noise, judged.rounds_slower) == ("slower", None, 3)
    # Four rounds in five are enough from five rounds on; three in three are needed below.
    assert judge_change(_rounds(3, 3, 3, 3, 5), _rounds(9, 9, 9, 9, 4.9)).change == "slower"
    assert judge_change(_rounds(3, 3, 5), _rounds(9, 9, 4.9)).change == "same"


def _calls(*us: float) -> LineTimes:
    """A line's measured calls, three a round."""
    return LineTimes(("d",), 100, tuple(t * 1e3 for t in us), tuple(k // 3 for k in range(len(us))))


def test_a_change_is_apart_from_each_builds_own_rounds():
    """Measured: SqueezeNet against itself, 3 rounds of 3 calls beside two busy loops on the 2-core machine.
    Line 175's B was slower in every round by medians and by fastest calls, but B's lowest round median
    (461 us) was 13 us above A's highest (448 us), within what A's own rounds spread: within noise, where
    the per-round agreement alone called it slower. A kernel preempted in a round (5.6 to 21 ms for 1.5 ms)
    is left to the fastest calls."""
    a = _calls(448.0, 337.4, 451.3, 415.4, 333.3, 332.0, 354.7, 332.5, 331.9)
    b = _calls(577.7, 536.5, 648.1, 468.5, 507.6, 501.7, 4377.2, 382.7, 461.2)
    judged = judge_change(a, b)
    assert (judged.change, judged.rounds_slower) == ("same", 3)
    assert judged.noise == ("within noise: B +170.20 us (+50%) on the medians, but B's rounds are not apart from "
                            "A's by the bar (each round's median: A 332.50-448.00 us, B 461.20-577.70 us)"), judged.noise
    # The same calls with B's rounds all well above A's: a change.
    b = _calls(577.7, 536.5, 648.1, 568.5, 557.6, 551.7, 4377.2, 582.7, 561.2)
    assert judge_change(a, b).change == "slower"
    # A preempted call in every round of A (9.5 ms for a 1.6 ms kernel): its fastest calls are B's.
    a = _calls(9588.1, 1536.0, 9772.5, 9576.9, 1611.5, 9593.1, 1548.8, 9583.3, 9545.4)
    b = _calls(1560.5, 1590.1, 1605.1, 1581.2, 1510.1, 1509.7, 1617.1, 1537.1, 1569.7)
    judged = judge_change(a, b)
    assert judged.change == "same" and "fastest call" in judged.noise, judged


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


def test_a_damaged_module_or_a_missing_function_is_named_before_anything_runs(tmp_path):
    """Said with the build it concerns and our reader's words, not IREE's ('rodata[0] external reference out
    of range', 'no function `main` exported by module', from iree-benchmark-module, naming neither A nor B)."""
    a = compile_for(sample_path("mlp"), tmp_path / "a.vmfb", "llvm-cpu")
    data = a.read_bytes()
    truncated = tmp_path / "truncated.vmfb"
    truncated.write_bytes(data[: len(data) // 2])
    broken = lens_in_process("compare-builds", a, truncated, "--function=main", "--input=2x16xf32=0.25", "--no-outputs")
    assert broken.returncode == 2
    assert broken.stderr.startswith("iree-lens compare-builds: B: ") and "truncated.vmfb" in broken.stderr, broken.stderr
    assert "iree-benchmark-module" not in broken.stderr
    other = lens_in_process("compare-builds", a, a, "--function=nope", "--input=2x16xf32=0.25", "--no-outputs")
    assert other.returncode == 2
    assert other.stderr.startswith(f"iree-lens compare-builds: A: {a} exports no function 'nope' (it exports "), other.stderr


def test_outputs_are_typed_by_given_sources_and_no_rebuild_keeps_to_them(tmp_path):
    """Like debug, capture and diverge: --sources types the compared outputs, --no-rebuild keeps to given or
    found sources (a large model's first rebuild takes minutes) and says that the outputs were compared as
    bytes; by default the program A names is rebuilt, so nothing is said."""
    from engine.compiler.targets import target_flags

    a = compile_for(sample_path("mlp"), tmp_path / "a.vmfb", "llvm-cpu")
    dump = tmp_path / "other" / "dump"  # another build's dump, not beside A nor named by it: found only when given
    dump.parent.mkdir()
    proc = iree_compile([str(sample_path("mlp")), *target_flags("llvm-cpu"), "-o", str(tmp_path / "other" / "b.vmfb"),
                         f"--iree-hal-dump-executable-sources-to={dump}"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    quick = ("--function=main", "--input=2x16xf32=0.25", "--repeat=1", "--rounds=1", "--json")

    def notes(*extra) -> list[str]:
        run = lens_in_process("compare-builds", a, a, *quick, *extra)
        assert run.returncode == 0, run.stderr[-2000:]
        return [n for n in json.loads(run.stdout)["notes"] if "executable sources" in n]

    bare = notes("--no-rebuild")
    assert len(bare) == 1 and "--no-rebuild: the program A names was not rebuilt" in bare[0], bare
    assert notes("--no-rebuild", f"--sources={dump}") == []
    assert notes() == []  # the default: the checked rebuild types them
