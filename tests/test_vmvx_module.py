"""The `vmvx` microkernel module (engine/runtime/vm/vmvx_module.py): programs compiled for VMVX with
--iree-vmvx-enable-microkernels give bit-identical results on the debug engine and on IREE's runtime."""

from __future__ import annotations

import numpy as np
import pytest
from support import iree_compile, lens_run

from engine.runtime.debug_runner import DebugRunner
from engine.runtime.function_io import Tensor
from engine.runtime.reference import ReferenceRunner
from engine.runtime.vm.vmvx_module import VmvxModule

FLAGS = (
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=vmvx",
    "--iree-vmvx-enable-microkernels",
    # Data tiling turns the matmul into pack + mmt4d + unpack (without it no vmvx.mmt4d is emitted).
    "--iree-dispatch-creation-data-tiling",
)

PROGRAM = """
func.func @f32_binary(%a: tensor<5x7xf32>, %b: tensor<5x7xf32>) -> (tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>) {
  %s = arith.addf %a, %b : tensor<5x7xf32>
  %m = arith.mulf %a, %b : tensor<5x7xf32>
  %d = arith.subf %a, %b : tensor<5x7xf32>
  %q = arith.divf %a, %b : tensor<5x7xf32>
  return %s, %m, %d, %q : tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>
}

func.func @f32_unary(%a: tensor<6x9xf32>) -> (tensor<6x9xf32>, tensor<6x9xf32>, tensor<6x9xf32>, tensor<6x9xf32>, tensor<6x9xf32>, tensor<6x9xf32>) {
  %e = math.exp %a : tensor<6x9xf32>
  %abs = math.absf %a : tensor<6x9xf32>
  %l = math.log %abs : tensor<6x9xf32>
  %r = math.rsqrt %abs : tensor<6x9xf32>
  %c = math.ceil %a : tensor<6x9xf32>
  %f = math.floor %a : tensor<6x9xf32>
  return %e, %l, %r, %c, %f, %abs : tensor<6x9xf32>, tensor<6x9xf32>, tensor<6x9xf32>, tensor<6x9xf32>, tensor<6x9xf32>, tensor<6x9xf32>
}

func.func @i32_binary(%a: tensor<4x6xi32>, %b: tensor<4x6xi32>, %sh: tensor<4x6xi32>) -> (tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>) {
  %s = arith.addi %a, %b : tensor<4x6xi32>
  %m = arith.muli %a, %b : tensor<4x6xi32>
  %d = arith.divsi %a, %b : tensor<4x6xi32>
  %u = arith.divui %a, %b : tensor<4x6xi32>
  %o = arith.ori %a, %b : tensor<4x6xi32>
  %l = arith.shli %a, %sh : tensor<4x6xi32>
  %r = arith.shrsi %a, %sh : tensor<4x6xi32>
  %z = arith.shrui %a, %sh : tensor<4x6xi32>
  return %s, %m, %d, %u, %o, %l, %r, %z : tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>, tensor<4x6xi32>
}

func.func @matmul(%a: tensor<13x37xf32>, %b: tensor<37x21xf32>) -> tensor<13x21xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x21xf32>
  %c = linalg.fill ins(%z : f32) outs(%e : tensor<13x21xf32>) -> tensor<13x21xf32>
  %r = linalg.matmul ins(%a, %b : tensor<13x37xf32>, tensor<37x21xf32>) outs(%c : tensor<13x21xf32>) -> tensor<13x21xf32>
  return %r : tensor<13x21xf32>
}

func.func @pack_unpack(%a: tensor<7x10xf32>) -> (tensor<4x2x3x4xf32>, tensor<7x10xf32>) {
  %pad = arith.constant -1.5 : f32
  %init = tensor.empty() : tensor<4x2x3x4xf32>
  %p = linalg.pack %a padding_value(%pad : f32) outer_dims_perm = [1, 0] inner_dims_pos = [1, 0] inner_tiles = [3, 4] into %init
      : tensor<7x10xf32> -> tensor<4x2x3x4xf32>
  %b = util.optimization_barrier %p : tensor<4x2x3x4xf32>
  %init2 = tensor.empty() : tensor<7x10xf32>
  %u = linalg.unpack %b outer_dims_perm = [1, 0] inner_dims_pos = [1, 0] inner_tiles = [3, 4] into %init2
      : tensor<4x2x3x4xf32> -> tensor<7x10xf32>
  return %p, %u : tensor<4x2x3x4xf32>, tensor<7x10xf32>
}
"""

RNG = np.random.default_rng(7)


def _f32(*shape):
    return (RNG.standard_normal(shape) * 3).astype(np.float32)


def _i32(lo, hi, *shape):
    return RNG.integers(lo, hi, shape).astype(np.int32)


CALLS = {
    "f32_binary": [_f32(5, 7), _f32(5, 7)],
    "f32_unary": [_f32(6, 9)],
    "i32_binary": [_i32(-(2**31), 2**31 - 1, 4, 6), _i32(1, 1000, 4, 6), _i32(0, 32, 4, 6)],
    "matmul": [_f32(13, 37), _f32(37, 21)],
    "pack_unpack": [_f32(7, 10)],
}


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("vmvx_module")
    src = d / "vmvx_module.mlir"
    src.write_text(PROGRAM)
    out = d / "vmvx_module.vmfb"
    iree_compile([*FLAGS, str(src), "-o", str(out)], check=True)
    return out


def test_module_exports_match_iree_signatures():
    # Calling conventions from IREE's exports.inl (3.13); a mismatch fails linking of every executable.
    funcs = {name: f.cconv for name, f in VmvxModule().functions.items()}
    binary = "0rIIIrIIIrIIIII_v"
    unary = "0rIIIrIIIII_v"
    for op in ("add", "sub", "mul", "div"):
        assert funcs[f"{op}.2d.f32"] == binary
    for op in ("add", "sub", "mul", "divs", "divu", "and", "or", "xor", "shl", "shrs", "shru"):
        assert funcs[f"{op}.2d.i32"] == binary
    for op in ("abs", "ceil", "floor", "exp", "log", "neg", "rsqrt"):
        assert funcs[f"{op}.2d.f32"] == unary
    assert funcs["ctlz.2d.i32"] == unary
    for bits in (8, 16, 32, 64):
        assert funcs[f"copy.2d.x{bits}"] == unary
    assert funcs["fill.2d.x32"] == "0irIIII_v"
    assert funcs["mmt4d"] == "0rIIrIIrIIIIIiiii_v"
    assert funcs["pack"] == "0rIIIrIIIIIIIIIIi_v"
    assert funcs["unpack"] == "0rIIIrIIIIIIIIIi_v"
    assert funcs["query_tile_sizes.2d"] == "0IIi_II"
    assert VmvxModule.name == "vmvx" and VmvxModule.version == 0


def test_program_imports_the_microkernels(program):
    # The nested executables are stored uncompressed: their import names are in the file.
    data = program.read_bytes()
    for name in (b"vmvx.add.2d.f32", b"vmvx.exp.2d.f32", b"vmvx.mmt4d", b"vmvx.pack", b"vmvx.unpack"):
        assert name in data, name


@pytest.mark.parametrize("function", list(CALLS))
def test_debug_engine_matches_iree_bit_for_bit(program, function):
    args = [Tensor.from_numpy(a) for a in CALLS[function]]
    expected = ReferenceRunner(program).invoke(function, args)
    got = DebugRunner(program).invoke(function, args)
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g.shape == e.shape, (function, k)
        assert g.array.dtype == e.array.dtype
        assert g.array.tobytes() == e.array.tobytes(), (function, k, g.array, e.array)


def test_matmul_and_pack_are_right(program):
    # Independent of either engine: numpy's values (the matmul to rounding, the pack exactly).
    a, b = CALLS["matmul"]
    (got,) = DebugRunner(program).invoke("matmul", [Tensor.from_numpy(a), Tensor.from_numpy(b)])
    np.testing.assert_allclose(got.array, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
    (x,) = CALLS["pack_unpack"]
    packed, unpacked = DebugRunner(program).invoke("pack_unpack", [Tensor.from_numpy(x)])
    padded = np.full((8, 12), -1.5, np.float32)
    padded[:7, :10] = x
    # inner_dims_pos [1, 0] with tiles [3, 4]: tile (3 of dim 1) x (4 of dim 0); outer dims transposed.
    want = padded.reshape(2, 4, 4, 3).transpose(2, 0, 3, 1)  # (o1, o0, t_dim1, t_dim0)
    assert packed.array.tobytes() == np.ascontiguousarray(want).tobytes()
    assert unpacked.array.tobytes() == x.tobytes()


def test_launcher_run_prints_the_same_on_both_engines(program, tmp_path):
    a, b = CALLS["f32_binary"]
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    inputs = [f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"]
    reference = lens_run(program, "f32_binary", inputs, "reference")
    debug = lens_run(program, "f32_binary", inputs, "debug")
    assert reference.returncode == 0, reference.stderr
    assert debug.returncode == 0, debug.stderr
    assert debug.stdout == reference.stdout
    unary = ["6x9xf32=" + " ".join(str(float(v)) for v in CALLS["f32_unary"][0].reshape(-1))]
    reference = lens_run(program, "f32_unary", unary, "reference")
    debug = lens_run(program, "f32_unary", unary, "debug")
    assert reference.returncode == 0, reference.stderr
    assert debug.returncode == debug.returncode == 0, debug.stderr
    assert debug.stdout == reference.stdout
