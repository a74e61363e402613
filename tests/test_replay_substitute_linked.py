"""Substituting one dispatch of an IREE replay from its edited .mlir when IREE linked the module's CPU
dispatches into one library (issue 31's loose end: the one-kernel build replaced the whole library and the
replay's other dispatches were missing; the build was left beside the source as SOURCE.bin)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from support import compile_for, iree_tool, record_replay

PROGRAM = """func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %diff = arith.subf %a, %b : tensor<4x8xf32>
  %d = util.optimization_barrier %diff : tensor<4x8xf32>
  %log = math.log %d : tensor<4x8xf32>
  %l = util.optimization_barrier %log : tensor<4x8xf32>
  %sq = arith.mulf %l, %l : tensor<4x8xf32>
  return %sq : tensor<4x8xf32>
}
"""


def test_one_dispatch_of_a_linked_library_in_a_replay(tmp_path):
    source = tmp_path / "three.mlir"
    source.write_text(PROGRAM)
    dump = tmp_path / "sources"
    vmfb = compile_for(source, tmp_path / "three.vmfb", "llvm-cpu", f"--iree-hal-dump-executable-sources-to={dump}")
    a = np.arange(32, dtype=np.float32).reshape(4, 8) / 4 + 2
    b = np.full((4, 8), 0.5, np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    replay = record_replay(vmfb, "main", [f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"], tmp_path / "run.ireereplay")
    from engine.replay.model import describe_replay
    from engine.replay.reader import open_replay

    [library] = describe_replay(open_replay(replay)).executables
    assert len(library.functions) == 3  # one library, three functions
    [log_source] = [p for p in dump.glob("*.mlir") if "math.log" in p.read_text()]
    edited = tmp_path / "exp_instead.mlir"
    edited.write_text(log_source.read_text().replace("math.log", "math.exp"))
    out = tmp_path / "out.npy"
    name = log_source.stem.removeprefix("module_")  # main$async_dispatch_1 / main_dispatch_1
    proc = subprocess.run([sys.executable, "-m", "app.launcher", "run", str(replay), f"--substitute={name}={edited}",
                           f"--output=@{out}"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    expected = np.exp(a - b) ** 2
    np.testing.assert_allclose(np.load(out).view(np.float32)[: expected.size], expected.ravel(), rtol=1e-5)
    assert not edited.with_suffix(".bin").exists()  # nothing written beside the source
    # IREE's own replay tool takes the same substitution (the merged library has every function).
    flag = next(w for w in proc.stdout.split() if w.startswith("--replay_executable_substitution="))
    run = subprocess.run([iree_tool("iree-run-replay"), "--device=local-sync", flag, str(replay)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
