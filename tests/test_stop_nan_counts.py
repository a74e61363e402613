"""What ``break nan`` reports a dispatch wrote, counted against IREE's own run of the program.

The program: four matmuls whose tensors IREE packs into one 2048-byte slab (two 16x16 halves), the second with
a log fused (NaN where its sum is negative). The third matmul multiplies the logs and so writes NaN across the
half that held the first matmul's result. With ``x`` the identity and ``y`` entries of +-1.0000001 (bits
``0x3f800001``/``0xbf800001``), the old values and the NaN (``0x7fc00000``) share their second byte: each
element's changed bytes are two runs, and a count by byte runs counted every element twice (512 NaN in a
256-element tensor). Untyped (no sources beside the module, none asked for the stop), the rule judges each
binding on the elements it changed.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import iree_compile

from engine.cli import main as lens_main
from engine.compiler.targets import TARGETS

PROGRAM = """
func.func @main(%x: tensor<16x16xf32>, %y: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %e = tensor.empty() : tensor<16x16xf32>
  %z = arith.constant 0.0 : f32
  %init = linalg.fill ins(%z : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %a = linalg.matmul ins(%x, %y : tensor<16x16xf32>, tensor<16x16xf32>) outs(%init : tensor<16x16xf32>) -> tensor<16x16xf32>
  %b = linalg.matmul ins(%a, %y : tensor<16x16xf32>, tensor<16x16xf32>) outs(%init : tensor<16x16xf32>) -> tensor<16x16xf32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]} ins(%b : tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %lg = math.log %in : f32
    linalg.yield %lg : f32
  } -> tensor<16x16xf32>
  %c = linalg.matmul ins(%l, %y : tensor<16x16xf32>, tensor<16x16xf32>) outs(%init : tensor<16x16xf32>) -> tensor<16x16xf32>
  %d = linalg.matmul ins(%c, %x : tensor<16x16xf32>, tensor<16x16xf32>) outs(%init : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %d : tensor<16x16xf32>
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    root = tmp_path_factory.mktemp("nan_counts")
    source = root / "slab_nan.mlir"
    source.write_text(PROGRAM)
    module = root / "slab_nan.vmfb"
    iree_compile([str(source), *TARGETS["llvm-cpu"].flags, "-o", str(module)], check=True)
    source.unlink()  # no program to rebuild sources from: the stops are judged untyped
    x = np.eye(16, dtype=np.float32)
    signs = np.random.default_rng(1).random((16, 16)) < 0.5
    y = np.where(signs, np.float32(1.0000001), np.float32(-1.0000001)).astype(np.float32)
    np.save(root / "x.npy", x)
    np.save(root / "y.npy", y)
    return module, x, y


def test_break_nan_counts_each_element_a_dispatch_wrote_once(capsys, tmp_path, program):
    import iree.runtime as rt

    module, x, y = program
    script = tmp_path / "commands.gdb"
    script.write_text("break nan\ncontinue\ncontinue\n")
    inputs = [f"--input=@{module.parent / 'x.npy'}", f"--input=@{module.parent / 'y.npy'}"]
    status = lens_main(["debug", str(module), "--function=main", *inputs, f"--commands={script}", "--json"])
    out = capsys.readouterr()
    assert status == 0, out.err
    lines = [json.loads(line) for line in out.out.splitlines() if line.strip()]
    log_stop, matmul_stop = lines[0], lines[1]
    assert [log_stop["dispatch"]["ordinal"], matmul_stop["dispatch"]["ordinal"]] == [1, 2]

    # IREE's run: with x the identity the result is the third matmul's output, c, itself.
    config = rt.Config("local-sync")
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.copy_buffer(config.vm_instance, module.read_bytes()))
    c = np.asarray(ctx.modules.module["main"](x, y))
    assert c.shape == (16, 16) and int(np.count_nonzero(~np.isfinite(c))) == 256

    for f in matmul_stop["nonfinite"]:  # the slab is bound twice (read and write): each says the same
        assert f["count"] == 256, matmul_stop["nonfinite"]
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log((x @ y) @ y)
    for f in log_stop["nonfinite"]:
        assert f["count"] == int(np.count_nonzero(~np.isfinite(logs))), log_stop["nonfinite"]


# A max pool's -inf padding: IREE fills the padded tensor with -inf and the elementwise producer writes its
# interior in place, so the producer's output at its trace point holds the border's -inf it never wrote.
PADDED_POOL = """
func.func @main(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %e = tensor.empty() : tensor<1x4x8x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (n, c, h, w)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
                       ins(%x : tensor<1x4x8x8xf32>) outs(%e : tensor<1x4x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.mulf %in, %in : f32
    linalg.yield %t : f32
  } -> tensor<1x4x8x8xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %p = tensor.pad %r low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %ninf : f32
  } : tensor<1x4x8x8xf32> to tensor<1x4x10x10xf32>
  %w = tensor.empty() : tensor<3x3xf32>
  %oe = tensor.empty() : tensor<1x4x4x4xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%oe : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %m = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
       ins(%p, %w : tensor<1x4x10x10xf32>, tensor<3x3xf32>) outs(%init : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %m : tensor<1x4x4x4xf32>
}
"""


@pytest.fixture(scope="module")
def padded_pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("padded_pool")
    source = root / "padded_pool.mlir"
    source.write_text(PADDED_POOL)
    modules = {}
    for engine, flags in (("debug", ()), ("reference", ("--iree-flow-trace-dispatch-tensors",))):
        modules[engine] = root / f"padded_pool.{engine}.vmfb"
        iree_compile([str(source), *TARGETS["llvm-cpu"].flags, *flags, "-o", str(modules[engine])], check=True)
    clean = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    one_nan = clean.copy()
    one_nan[0, 2, 3, 5] = np.nan
    np.save(root / "clean.npy", clean)
    np.save(root / "one_nan.npy", one_nan)
    return root, modules, clean


def test_the_producer_of_a_padded_tensor_wrote_none_of_its_inf_border(padded_pool):
    """IREE's own trace (no engine code): the producer's output holds the -inf border, its inputs the whole
    padded tensor already -inf."""
    from support import iree_traced_tensors

    root, modules, clean = padded_pool
    traced = iree_traced_tensors(modules["reference"], "main", [clean])
    (inputs_key, inputs), (outputs_key, outputs) = traced[0], traced[1]
    assert inputs_key.endswith(" inputs") and outputs_key.endswith(" outputs") and "elementwise" in inputs_key
    assert [int(np.count_nonzero(np.isneginf(a))) for a in inputs] == [0, 4 * 10 * 10]
    assert [int(np.count_nonzero(np.isneginf(a))) for a in outputs] == [4 * (10 * 10 - 8 * 8)]


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_break_nan_does_not_stop_at_a_tensor_padded_in_place(capsys, tmp_path, padded_pool, engine):
    """Both engines: the clean input runs to the end; one NaN input element stops after the producer, which
    wrote that one NaN (x*x), not the border's 144 -inf as well."""
    root, modules, _ = padded_pool
    script = tmp_path / "commands.gdb"
    script.write_text("break nan\ncontinue\n")
    args = ["debug", str(modules[engine]), "--function=main", f"--commands={script}", "--json", f"--engine={engine}"]
    assert lens_main([*args, f"--input=@{root / 'clean.npy'}"]) == 0
    out = capsys.readouterr()
    assert [json.loads(line)["reason"] for line in out.out.splitlines()] == ["finished"], out.out
    assert lens_main([*args, f"--input=@{root / 'one_nan.npy'}"]) == 0
    stop = json.loads(capsys.readouterr().out.splitlines()[0])
    assert stop["dispatch"]["ordinal"] == 0 and "elementwise" in stop["dispatch"]["name"]
    assert [(f["count"], f["nan"]) for f in stop["nonfinite"]] == [(1, 1)]
