"""Dispatch time by source line (``iree-lens profile --by-source``): every dispatch's time goes to the input
program's lines it came from, the lines sum to the total dispatch time, and on real frontends' programs
(ONNX imports, PyTorch exports) at least 90 % of it lands on lines holding the frontend's ops (torch, ONNX; StableHLO
and TOSA too)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import SHARED_MODELS, compile_for, iree_compile, model_lens_sources

from engine.compiler.targets import target_flags
from engine.trace.by_source import SourceMap, SourceShare, place_shares, program_op
from engine.trace.source_ops import dispatch_source_ops, op_work

JAX_PROGRAM = Path(__file__).parent / "session_programs" / "jax_mlp.mlir"


def _profile_by_source(vmfb: Path, function: str, x: Path | None, tmp: Path, *extra: str) -> tuple[dict, dict]:
    """``x``: the one input (None: the inputs are among ``extra``)."""
    trace, attr = tmp / f"{vmfb.stem}.json", tmp / f"{vmfb.stem}_by_source.json"
    cmd = [sys.executable, "-m", "app.launcher", "profile", str(vmfb), f"--function={function}",
           *([f"--input=@{x}"] if x else []), f"--out={trace}", f"--by-source={attr}", *extra]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(trace.read_text()), json.loads(attr.read_text())


def _dispatch_time_ns(chrome: dict) -> int:
    # The Chrome trace's durations are microseconds with three decimals: whole nanoseconds.
    return sum(round(e["dur"] * 1000) for e in chrome["traceEvents"] if e.get("cat") == "dispatch")


def _line_text(loc: str) -> str:
    path, _, line = loc.rpartition(":")
    return Path(path).read_text().splitlines()[int(line) - 1]


def _torch_share(attr: dict) -> float:
    # Independently of the attribution's own op names: the time on lines whose text holds a torch op.
    on_torch = sum(
        r["time_ns"] for r in attr["by_source"] if ":" in r["loc"] and "torch." in _line_text(r["loc"])
    )
    return on_torch / attr["dispatch_time_ns"]


def _check(chrome: dict, attr: dict) -> None:
    total = _dispatch_time_ns(chrome)
    assert total > 0
    assert abs(attr["dispatch_time_ns"] - total) <= len(attr["by_source"])  # the JSON rounds to the ns
    assert sum(r["time_ns"] for r in attr["by_source"]) == attr["dispatch_time_ns"]
    dispatched = {e["name"] for e in chrome["traceEvents"] if e.get("cat") == "dispatch"}
    assert set().union(*(r["dispatches"] for r in attr["by_source"])) == dispatched
    assert [r["time_ns"] for r in attr["by_source"]] == sorted(
        (r["time_ns"] for r in attr["by_source"]), reverse=True
    )


def test_small_cnn_time_by_onnx_line_sums_to_the_total(tmp_path):
    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    vmfb = compile_for(source, tmp_path / "small_cnn.vmfb", "llvm-cpu")
    chrome, attr = _profile_by_source(
        vmfb, "small_cnn", SHARED_MODELS / "small_cnn_x.npy", tmp_path, "--repeat=3"
    )
    _check(chrome, attr)
    assert _torch_share(attr) >= 0.9
    rows = {r["loc"].rpartition(":")[2]: r for r in attr["by_source"]}
    # small_cnn.mlir: line 10 the first onnx.Conv, 11 its Relu (fused into the conv's dispatch), 13 the
    # second Conv, 17 the Gemm.
    assert (
        rows["10"]["op"] == 'torch.operator "onnx.Conv"' and rows["17"]["op"] == 'torch.operator "onnx.Gemm"'
    )
    assert rows["13"]["calls"] == 3
    conv = next(e for e in rows["10"]["dispatches"] if "conv" in e)
    assert conv in rows["11"]["dispatches"]
    # The fused dispatch splits by work: the conv's 8x16x16 outputs x 3x3x3 window against the ReLU's
    # 8x16x16 points. Its time in the trace, split so, is what lines 10 and 11 got of it.
    conv_ns = sum(round(e["dur"] * 1000) for e in chrome["traceEvents"] if e.get("name") == conv)
    relu_share = (8 * 16 * 16) / (8 * 16 * 16 * 27 + 8 * 16 * 16)
    assert abs(rows["11"]["time_ns"] - conv_ns * relu_share) <= 2


def test_attention_block_onnx_import_is_90_percent_on_torch_lines(tmp_path):
    source = SHARED_MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    vmfb = compile_for(source, tmp_path / "attention_block.vmfb", "llvm-cpu")
    chrome, attr = _profile_by_source(
        vmfb, "attention_block", SHARED_MODELS / "attention_block_x.npy", tmp_path
    )
    _check(chrome, attr)
    assert _torch_share(attr) >= 0.9
    assert attr["frontend_op_share"] >= 0.9
    # The q, k and v projections (lines 17, 18, 19) are one deduplicated executable dispatched three times:
    # each run's time is its own line's (all three went to line 17, whose ops' locations it kept).
    rows = {r["loc"].rpartition(":")[2]: r for r in attr["by_source"]}
    runs = sorted((e for e in chrome["traceEvents"] if e.get("cat") == "dispatch" and "dispatch_2_" in e["name"]),
                  key=lambda e: e["ts"])  # fmt: skip
    assert len(runs) == 3
    for line, run in zip(("17", "18", "19"), runs):
        assert rows[line]["calls"] == 1 and rows[line]["dispatches"] == [run["name"]], rows[line]
        assert rows[line]["op"] == 'torch.operator "onnx.MatMul"'
        assert abs(rows[line]["time_ns"] - round(run["dur"] * 1000)) <= 1
    assert any("several places" in n for n in attr["notes"])
    # The window's dispatch list knows only the line the module records (17) for all three runs: it says so.
    from app.views.dispatch_list_model import source_lines_job

    lines = source_lines_job(str(vmfb))
    (projection,) = [v for e, v in lines.items() if e == runs[0]["name"]]
    assert projection == 'attention_block.mlir:17 torch.operator "onnx.MatMul" (one of its 3 places)', projection
    assert sum("places)" in v for v in lines.values()) == 1, lines


def test_a_deduplicated_dispatchs_places_by_the_ops_their_lines_hold(tmp_path):
    """Another place's lines are the kept place's moved by the distance between the two, where each moved
    line holds the same op; where one does not, the whole run goes to the place's own line."""
    program = tmp_path / "p.mlir"
    program.write_text("\n".join([
        "  %1 = torch.aten.conv2d %0", "  %2 = torch.aten.relu %1",
        "  %3 = torch.aten.conv2d %2", "  %4 = torch.aten.relu %3",
        "  %5 = torch.aten.conv2d %4", "  %6 = torch.aten.sigmoid %5",
    ]) + "\n")  # fmt: skip
    shares = (SourceShare(f"{program}:1", 0.9), SourceShare(f"{program}:2", 0.1))
    places = place_shares(shares, (f"{program}:1", f"{program}:3", f"{program}:5"))
    assert places[0] == shares
    assert places[1] == (SourceShare(f"{program}:3", 0.9), SourceShare(f"{program}:4", 0.1))
    assert places[2] == (SourceShare(f"{program}:5", 1.0),)  # line 6 is no relu
    sources = SourceMap({"d": shares}, sites={"d": places})
    assert [sources.locations_of_run("d", k, 6)[0].loc for k in range(6)] == [f"{program}:{n}" for n in (1, 3, 5) * 2]
    assert sources.locations_of_run("d", 1, 4) == shares  # 4 runs of 3 places: which is which is not known


def test_module_alone_attributes_each_dispatch_to_its_export_location(tmp_path):
    # The input program moved away after the build: no flow phase, each dispatch by the location IREE
    # recorded for its export (the root op's line), still summing to the total.
    source = tmp_path / "small_cnn.mlir"
    source.write_text((SHARED_MODELS / "small_cnn.mlir").read_text())
    vmfb = compile_for(source, tmp_path / "moved.vmfb", "llvm-cpu")
    kept = source.read_text()
    source.unlink()
    chrome, attr = _profile_by_source(
        vmfb, "small_cnn", SHARED_MODELS / "small_cnn_x.npy", tmp_path, "--engine=debug"
    )
    _check(chrome, attr)
    assert any("not readable" in n for n in attr["notes"])
    assert all(r["op"] is None for r in attr["by_source"])  # the file is gone: no op is claimed
    lines = kept.splitlines()
    for r in attr["by_source"]:
        assert r["loc"].startswith(str(source)) and "onnx." in lines[int(r["loc"].rpartition(":")[2]) - 1]


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("model", ["squeezenet1_1", "efficientvit_m0"])
def test_pytorch_export_is_90_percent_on_torch_aten_lines(tmp_path, model):
    # A plain build (one that dumps its executables' sources has their locations instead of the program's):
    # the run's iree-lens sources build, which is one byte for byte, copied without its sources beside it.
    vmfb = Path(shutil.copyfile(model_lens_sources(model)[0], tmp_path / f"{model}.vmfb"))
    chrome, attr = _profile_by_source(vmfb, "main", SHARED_MODELS / f"{model}_x.npy", tmp_path)
    _check(chrome, attr)
    assert _torch_share(attr) >= 0.9
    assert any(r["op"] == "torch.aten.conv2d" for r in attr["by_source"][:3])


FLOW = """\
  flow.executable private @m$async_dispatch_0 {
    builtin.module {
      func.func @m$async_dispatch_0_matmul_4x8x16_f32(%arg0: !t loc(unknown)) {
        %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<4x8xf32>) -> tensor<4x8xf32> loc(#loc1)
        %4 = linalg.matmul ins(%0, %1 : tensor<4x16xf32>, tensor<16x8xf32>) outs(%3 : tensor<4x8xf32>) -> tensor<4x8xf32> loc(#loc2)
        %5 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%4, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%2 : tensor<4x8xf32>) {
        ^bb0(%in: f32 loc(unknown), %in_1: f32 loc(unknown), %out: f32 loc(unknown)):
          %6 = arith.addf %in, %in_1 : f32 loc(unknown)
          linalg.yield %6 : f32 loc(unknown)
        } -> tensor<4x8xf32> loc(#loc3)
        return loc(unknown)
      } loc(unknown)
    } loc(unknown)
  } loc(unknown)
#loc1 = loc("prog.mlir":5:3)
#loc2 = loc(callsite("model.py":41:0 at "prog.mlir":5:3))
#loc3 = loc(fused["prog.mlir":6:3, "prog.mlir":6:9])
"""


def test_flow_ops_with_aliased_and_python_locations():
    [(name, ops)] = dispatch_source_ops(FLOW).items()
    assert name == "m$async_dispatch_0_matmul_4x8x16_f32"
    # linalg.fill is skipped; the matmul is 4x8 points x 16, the bias add 4x8 points.
    assert [(o.loc, o.python, o.ir_op, o.work) for o in ops] == [
        ("prog.mlir:5", "model.py:41", "linalg.matmul", 4 * 8 * 16),
        ("prog.mlir:6", None, "linalg.generic", 4 * 8),
    ]


def test_op_work_of_a_convolution_from_its_maps():
    line = ("%4 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d3, d1 + d4, d2 + d5)>, "
            "affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3, d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2)>], "
            'iterator_types = ["parallel"]} ins(%0, %1 : tensor<3x18x18xf32>, tensor<8x3x3x3xf32>) '
            "outs(%3 : tensor<8x16x16xf32>) {")  # fmt: skip
    assert op_work("linalg.generic", line) == 8 * 16 * 16 * 3 * 3 * 3


def test_program_op_names_the_op_written_at_a_line(tmp_path):
    program = tmp_path / "p.mlir"
    program.write_text(
        '  %5 = torch.aten.conv2d %arg0, %0 : !t -> !t\n  %7 = torch.operator "onnx.Relu"(%6) : (!t) -> !t\n'
    )
    assert program_op(f"{program}:1") == "torch.aten.conv2d"
    assert program_op(f"{program}:2") == 'torch.operator "onnx.Relu"'
    assert program_op(f"{program}:9") is None
    assert program_op(f"{tmp_path}/absent.mlir:1") is None


def test_a_module_compiled_from_a_relative_path_finds_its_program_beside_it(tmp_path):
    # iree-compile small_cnn.mlir run in the program's folder records the relative name; profiled from
    # elsewhere, the program is found beside the module and the fused dispatches are still split.
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "small_cnn.mlir").write_text((SHARED_MODELS / "small_cnn.mlir").read_text())
    iree_compile(["small_cnn.mlir", *target_flags("llvm-cpu"), "-o", "m.vmfb"],
                   cwd=folder, check=True)  # fmt: skip
    chrome, attr = _profile_by_source(
        folder / "m.vmfb", "small_cnn", SHARED_MODELS / "small_cnn_x.npy", tmp_path
    )
    _check(chrome, attr)
    assert any("flow phase" in n for n in attr["notes"])
    assert _torch_share(attr) >= 0.9
    assert {r["loc"].rpartition(":")[2] for r in attr["by_source"]} >= {"10", "11"}  # the conv and its ReLU


def test_a_program_that_does_not_compile_falls_back_to_export_locations(tmp_path):
    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    vmfb = compile_for(source, tmp_path / "small_cnn.vmfb", "llvm-cpu")
    broken = tmp_path / "broken.mlir"
    broken.write_text("func.func @f( {\n")
    chrome, attr = _profile_by_source(
        vmfb, "small_cnn", SHARED_MODELS / "small_cnn_x.npy", tmp_path, f"--source={broken}"
    )
    _check(chrome, attr)
    assert any("failed" in n and "export's location" in n for n in attr["notes"]), attr["notes"]
    # Each dispatch whole on its export's line: the fused ReLU's line 11 gets nothing of its own.
    assert all(not r["loc"].endswith(":11") for r in attr["by_source"])
    assert _torch_share(attr) >= 0.9


def test_the_flow_phase_is_compiled_once_per_program_version(tmp_path):
    import os
    import time

    from engine.trace.source_ops import flow_with_locations

    program = tmp_path / "small_cnn.mlir"
    program.write_text((SHARED_MODELS / "small_cnn.mlir").read_text())
    flags = target_flags("llvm-cpu")
    first = flow_with_locations(program, flags)
    t = time.perf_counter()
    again = flow_with_locations(program, flags)
    assert again == first and time.perf_counter() - t < 0.5  # read back, not compiled
    assert f'"{program}":10:' in first  # the program as it was passed
    # An edited program (another modification time) is compiled again: its new line shows.
    program.write_text(
        program.read_text().replace("%none = torch.constant.none", "%none = torch.constant.none\n")
    )
    os.utime(program, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert (
        f'"{program}":11:' in flow_with_locations(program, flags)
        and flow_with_locations(program, flags) != first
    )


@pytest.mark.parametrize("program", ["se_resnet", "depthwise_cnn"])
def test_held_out_torch_cnns_are_90_percent_on_torch_aten_lines(tmp_path, program):
    # The held-out programs (tests/heldout_programs: written in the torch dialect as iree-turbine exports
    # PyTorch): a CNN's dispatch time on the lines of its torch.aten ops, summing to the total.
    folder = Path(__file__).parent / "heldout_programs"
    vmfb = compile_for(folder / f"{program}.mlir", tmp_path / f"{program}.vmfb", "llvm-cpu")
    inputs = [folder / f"{program}_x.npy"] + (
        [folder / "depthwise_cnn_temperature.npy"] if program == "depthwise_cnn" else []
    )
    extra = [f"--input=@{p}" for p in inputs[1:]]
    chrome, attr = _profile_by_source(vmfb, "main", inputs[0], tmp_path, *extra)
    _check(chrome, attr)
    assert _torch_share(attr) >= 0.9
    assert any(r["op"] == "torch.aten.conv2d" for r in attr["by_source"])


def test_a_dynamic_shape_has_no_work_and_its_dispatch_is_shared_equally(tmp_path):
    line = ("%2 = linalg.matmul ins(%0, %1 : tensor<?x16xf32>, tensor<16x8xf32>) outs(%e : tensor<?x8xf32>) "
            "-> tensor<?x8xf32>")  # fmt: skip
    assert op_work("linalg.matmul", line) is None  # the batch is the run's: never a guessed size
    folder = Path(__file__).parent / "heldout_programs"
    vmfb = compile_for(folder / "dynamic_mlp.mlir", tmp_path / "dynamic_mlp.vmfb", "llvm-cpu")
    chrome, attr = _profile_by_source(vmfb, "main", folder / "dynamic_mlp_x.npy", tmp_path)
    _check(chrome, attr)
    assert any("dynamic shapes" in n for n in attr["notes"])
    assert _torch_share(attr) >= 0.9


def _jax_inputs(tmp: Path) -> list[str]:
    rng = np.random.default_rng(0)
    out = []
    for k, shape in enumerate(((4, 16), (16, 32), (32,))):
        np.save(tmp / f"a{k}.npy", rng.standard_normal(shape).astype(np.float32))
        out.append(f"--input=@{tmp / f'a{k}.npy'}")
    return out


def test_a_jax_export_is_attributed_to_its_python_lines_by_its_op_names(tmp_path):
    # IREE inlines a StableHLO program's function into a wrapper, so every op's location becomes
    # callsite(JAX's located name at the function's line): the function's line is no op's; the Python lines are.
    program = tmp_path / JAX_PROGRAM.name
    shutil.copy(JAX_PROGRAM, program)
    # Compiled by its relative name in its folder (the module records "jax_mlp.mlir"), read from elsewhere.
    iree_compile([program.name, *target_flags("llvm-cpu"), "-o", "jax_mlp.vmfb"], cwd=tmp_path, check=True)
    vmfb = tmp_path / "jax_mlp.vmfb"
    chrome, attr = _profile_by_source(vmfb, "main", None, tmp_path, *_jax_inputs(tmp_path))
    _check(chrome, attr)
    # Independently: the names and Python lines the program's location aliases declare.
    text = program.read_text()
    declared = {
        f"/home/user/jaxmodel.py:{line}": name
        for name, alias in re.findall(r'^#l\d = loc\("([^"]+)"\((#loc\d)\)\)$', text, re.M)
        for line in re.findall(rf'^{alias} = loc\("/home/user/jaxmodel.py":(\d+):0\)$', text, re.M)
    }
    assert len(declared) == 5
    rows = {r["loc"]: r for r in attr["by_source"]}
    assert set(rows) <= set(declared) and len(rows) >= 4  # the bias add fuses into the ReLU's op (line 12)
    assert all(r["name"] == declared[loc] and r["op"] is None for loc, r in rows.items())
    assert attr["frontend_op_share"] == 1.0
    from app.views.dispatch_list_model import source_lines_job

    # The module's own export locations are the function's line: the dispatch list says so.
    assert {v.partition(" ")[2] for v in source_lines_job(str(vmfb)).values()} == {"(its function's line)"}


def test_a_stablehlo_program_without_locations_is_on_its_stablehlo_lines(tmp_path):
    program = tmp_path / "hlo.mlir"
    stripped = re.sub(r" loc\(#l\d\)", "", JAX_PROGRAM.read_text())
    program.write_text("\n".join(line for line in stripped.splitlines() if not line.startswith("#l")))
    vmfb = compile_for(program, tmp_path / "hlo.vmfb", "llvm-cpu")
    chrome, attr = _profile_by_source(vmfb, "main", None, tmp_path, *_jax_inputs(tmp_path))
    _check(chrome, attr)
    on_stablehlo = sum(r["time_ns"] for r in attr["by_source"] if "stablehlo." in _line_text(r["loc"]))
    assert on_stablehlo == attr["dispatch_time_ns"]
    assert attr["frontend_op_share"] == 1.0
    assert {r["op"] for r in attr["by_source"]} >= {"stablehlo.dot_general", "stablehlo.reduce"}


def test_stablehlo_ops_in_the_generic_form_and_a_copy_dispatch_are_on_their_lines(tmp_path):
    # "stablehlo.sort"(...) is an op as much as stablehlo.add is; the conv's padding (a dispatch of copies, no
    # compute op) is the conv's line, where it was dispatched from, not the function's line IREE's export
    # table records for it.
    program = Path(__file__).parent / "session_programs" / "jax_ops.mlir"
    vmfb = compile_for(program, tmp_path / "jax_ops.vmfb", "llvm-cpu")
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((1, 8, 8, 3)), rng.standard_normal((3, 3, 3, 4)), rng.standard_normal(16),
              np.array([[3], [0], [3], [15]], np.int32), rng.standard_normal(4), rng.integers(0, 2, 16).astype(bool)]  # fmt: skip
    inputs = []
    for k, a in enumerate(arrays):
        np.save(tmp_path / f"x{k}.npy", a.astype(np.float32) if a.dtype == np.float64 else a)
        inputs.append(f"--input=@{tmp_path / f'x{k}.npy'}")
    chrome, attr = _profile_by_source(vmfb, "main", None, tmp_path, *inputs)
    _check(chrome, attr)
    lines = program.read_text().splitlines()
    for row in attr["by_source"]:
        text = _line_text(row["loc"])
        assert "stablehlo." in text and "func.func" not in text, row
        assert row["op"] in text and row["op"].startswith("stablehlo."), row
    conv_line = next(i for i, t in enumerate(lines, 1) if "stablehlo.convolution" in t)
    padding = next(r for r in attr["by_source"] if any("slow_memcpy" in d for d in r["dispatches"]))
    assert padding["loc"] == f"{program}:{conv_line}"
    assert {r["op"] for r in attr["by_source"]} >= {"stablehlo.sort", "stablehlo.scatter", "stablehlo.reduce_window"}
    assert attr["frontend_op_share"] == 1.0


def test_notes_count_only_the_exports_a_run_dispatched():
    """A module's dynamic-shape, deduplicated and unmatched exports are said of a run only where it ran them
    (was: module-wide, so compare-builds of one function named dispatches that function never ran)."""
    sources = SourceMap(notes=["source ops from the flow phase of p.mlir"], dynamic={"d1", "d2"}, unmatched={"u"},
                        exported=5, sites={"s": ((SourceShare("p.mlir:1", 1.0),), (SourceShare("p.mlir:2", 1.0),))})  # fmt: skip
    whole = sources.notes_for()
    assert whole[0] == "source ops from the flow phase of p.mlir" and len(whole) == 4
    assert any(n.startswith("2 dispatches with dynamic shapes") for n in whole)
    assert any(n.startswith("1 of 5 exports not in the flow phase") for n in whole)
    ran = sources.notes_for({"d1", "x"})
    assert ran == ["source ops from the flow phase of p.mlir",
                   "1 dispatches with dynamic shapes: their time shared equally by their ops"]  # fmt: skip
    assert sources.notes_for(set()) == ["source ops from the flow phase of p.mlir"]
    assert sources.notes_for({"u"})[1].startswith("1 exports the run dispatched not in the flow phase")


def test_a_flow_compile_is_killed_when_cancelled(tmp_path):
    """The dispatch list reads the flow phase on a thread of its own; another module opened, or the window
    closed, kills that compile (EfficientViT's takes seconds) instead of leaving it to run."""
    import threading
    import time

    from support import shared_model

    from engine.compiler.task import TaskState
    from engine.errors import CompileCancelled
    from engine.trace.source_ops import flow_with_locations

    program = tmp_path / "efficientvit_m0.mlir"  # a path of its own: not read back from the cache
    shutil.copy(shared_model("efficientvit_m0"), program)
    task = TaskState()
    threading.Timer(0.5, task.cancel).start()
    started = time.monotonic()
    with pytest.raises(CompileCancelled, match="cancelled"):
        flow_with_locations(program, target_flags("llvm-cpu"), task=task)
    assert time.monotonic() - started < 3.0
