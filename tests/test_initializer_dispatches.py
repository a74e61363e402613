"""A module whose initializer runs dispatches before the call (a global computed from another that a function
mutates, so IREE cannot fold it): capture bundles (both engines), the divergence finder and its reproducer
number the call's dispatches from its first, as ``break dispatch N`` and the kernel stepper do, and say how
many the initializer ran, uncaptured and uncompared."""

from __future__ import annotations

import json

import pytest
from support import compile_for, lens_in_process

from engine.dispatch.bundle import Bundle
from engine.dispatch.capture import capture_debug, capture_reference
from engine.kernel.dispatch_run import run_to_dispatch

PROGRAM = """
util.global private mutable @a = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
util.global private @w : tensor<4xf32>
util.initializer {
  %c = util.global.load @a : tensor<4xf32>
  %e = math.exp %c : tensor<4xf32>
  util.global.store %e, @w : tensor<4xf32>
  util.return
}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = util.global.load @w : tensor<4xf32>
  %r = arith.addf %x, %w : tensor<4xf32>
  %s = math.sqrt %r : tensor<4xf32>
  return %s : tensor<4xf32>
}
func.func @bump(%x: tensor<4xf32>) {
  util.global.store %x, @a : tensor<4xf32>
  return
}
"""
INPUT = "4xf32=1 2 3 4"


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("initializer")
    a, b = tmp / "a.mlir", tmp / "b.mlir"
    a.write_text(PROGRAM)
    b.write_text(PROGRAM.replace("math.sqrt", "math.rsqrt"))
    return {
        "a": compile_for(a, tmp / "a.vmfb", "llvm-cpu"),
        "b": compile_for(b, tmp / "b.vmfb", "llvm-cpu"),
        "a_traced": compile_for(a, tmp / "a_traced.vmfb", "llvm-cpu", "--iree-flow-trace-dispatch-tensors"),
    }


def test_a_capture_numbers_the_calls_dispatches_from_its_first(builds, tmp_path):
    stepped = run_to_dispatch(builds["a"], "main", [INPUT], 0)  # the kernel stepper counts from the call
    assert stepped.export_name.startswith("main_dispatch_0")
    for capture, module, out in (
        (capture_debug, builds["a"], tmp_path / "debug"),
        (capture_reference, builds["a_traced"], tmp_path / "reference"),
    ):
        result = capture(module, "main", [INPUT], out)
        assert result.initializer_dispatches == 1
        bundle = Bundle(out)
        assert [(d.ordinal, d.name) for d in bundle.dispatches] == [(0, stepped.export_name)]
        assert json.loads((out / "manifest.json").read_text())["initializer_dispatches"] == 1
    said = lens_in_process("capture", builds["a"], "--function=main", f"--input={INPUT}", f"--out={tmp_path / 'cli'}")
    assert said.returncode == 0, said.stderr
    assert "captured 1 dispatch of @main" in said.stdout
    assert "the module's initializer ran 1 dispatch before the call, not captured" in said.stdout


def test_the_divergence_finder_and_its_reproducer_count_from_the_call(builds, tmp_path):
    found = lens_in_process("diverge", builds["a"], builds["b"], "--function=main", f"--input={INPUT}", "--json",
                            f"--repro={tmp_path / 'repro'}")  # fmt: skip
    assert found.returncode == 1, found.stderr  # a divergence named
    report = json.loads(found.stdout.strip().splitlines()[-1])
    first = report["first_divergence"]
    assert first["ordinal"] == 0 and first["name"].startswith("main_dispatch_0")
    assert any("initializers ran 1 dispatches in A and 1 in B before the call" in n for n in report["notes"])
    repro = json.loads((tmp_path / "repro" / "repro.json").read_text())
    assert repro["ordinal"] == 0
    replayed = lens_in_process("diverge", "--replay", tmp_path / "repro")
    assert replayed.returncode in (0, 1), replayed.stderr
    assert "dispatch 0" in replayed.stdout + replayed.stderr


def test_split_makes_tests_of_the_calls_dispatches(tmp_path):
    """The initializer's dispatch is a test of its own, marked ``initializer`` and numbered in the
    initializer's count; the call's first is ordinal 0 and ``dispatches`` counts the call's."""
    program = tmp_path / "a.mlir"
    program.write_text(PROGRAM)
    made = lens_in_process("split", program, "--function=main", f"--input={INPUT}", f"--out={tmp_path / 'tests'}",
                           "--json")  # fmt: skip
    assert made.returncode == 0, made.stderr
    result = json.loads(made.stdout.strip().splitlines()[-1])
    initializer, test = result["tests"]
    assert initializer["initializer"] is True and initializer["dispatch"].startswith("_initializer_0_dispatch_0")
    assert initializer["ordinal"] == 0 and result["initializer_dispatches"] == 1
    assert "initializer" not in test
    assert test["dispatch"].startswith("main_dispatch_0") and test["ordinal"] == 0 and result["dispatches"] == 1


def test_profile_zones_number_each_calls_dispatches_from_its_first(builds, tmp_path):
    """``iree-lens profile --engine=debug --repeat=2``: the module's load (its initializer's dispatch) and each
    call number their dispatches from their first, as break dispatch N counts."""
    out = tmp_path / "trace.json"
    made = lens_in_process("profile", builds["a"], "--function=main", f"--input={INPUT}", "--engine=debug",
                           "--repeat=2", f"--out={out}")  # fmt: skip
    assert made.returncode == 0, made.stderr
    events = json.loads(out.read_text())["traceEvents"]
    dispatches = [e for e in events if e.get("cat") == "dispatch" and e.get("ph") == "X"]
    found = [(e["name"].split("_dispatch_")[0], e["args"]["ordinal"]) for e in sorted(dispatches, key=lambda e: e["ts"])]
    assert found == [("_initializer_0", 0), ("main", 0), ("main", 0)]
