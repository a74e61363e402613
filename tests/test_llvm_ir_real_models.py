"""Every ``.ll`` IREE 3.13 writes for real programs parses and verifies in llvmlite after the LLVM 24 -> 22
normaliser, and a library built from it computes what IREE's own library does, bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import TARGET_FLAGS, iree_compile, lens_run, model_cpu_build, shared_model

from engine.substitute.llvm_ir import parse_llvm_ir

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"

# Infinities, quiet NaNs with and without payload, signalling NaNs, inexact decimals: in f32, f16, bf16, f64.
SPECIAL_VALUES = """
#id = affine_map<(i) -> (i)>
func.func @main(%a: tensor<8xf32>, %h: tensor<8xf16>, %b: tensor<8xbf16>) -> (tensor<8xf32>, tensor<8xf16>, tensor<8xbf16>) {
  %c = arith.constant dense<[0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7FC00001, 0x7F800001, 0xFF800002, 0.1]> : tensor<8xf32>
  %ch = arith.constant dense<[0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7E01, 0x7C01, 0.1, 3.0e-5]> : tensor<8xf16>
  %cb = arith.constant dense<[0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7FC1, 0x7F81, 0.1, 3.0]> : tensor<8xbf16>
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%a, %c : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %inf = arith.constant 0x7F800000 : f32
    %m = arith.minimumf %s, %inf : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %eh = tensor.empty() : tensor<8xf16>
  %rh = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%h, %ch : tensor<8xf16>, tensor<8xf16>) outs(%eh : tensor<8xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %s = arith.addf %x, %y : f16
    %k = arith.constant 0xFC00 : f16
    %m = arith.maximumf %s, %k : f16
    linalg.yield %m : f16
  } -> tensor<8xf16>
  %eb = tensor.empty() : tensor<8xbf16>
  %rb = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%b, %cb : tensor<8xbf16>, tensor<8xbf16>) outs(%eb : tensor<8xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %o: bf16):
    %s = arith.addf %x, %y : bf16
    linalg.yield %s : bf16
  } -> tensor<8xbf16>
  return %r, %rh, %rb : tensor<8xf32>, tensor<8xf16>, tensor<8xbf16>
}
"""


def _dump_ll(program: Path, out: Path) -> tuple[Path, list[Path]]:
    vmfb = out / f"{program.stem}.vmfb"
    iree_compile(
        [str(program), *TARGET_FLAGS["cpu"], "-o", str(vmfb),
         f"--iree-hal-dump-executable-intermediates-to={out / 'intermediates'}"],
        check=True, timeout=900,
    )  # fmt: skip
    files = sorted((out / "intermediates").glob("*.ll"))
    assert {f.name.split(".")[-2] for f in files} == {"codegen", "linked", "optimized"}
    return vmfb, files


def _parse_all(files: list[Path]) -> None:
    for f in files:
        module = parse_llvm_ir(f.read_text(), str(f))  # raises EditCompileError with the line
        assert any(fn.name == "iree_hal_executable_library_query" for fn in module.functions) or "codegen" in f.name


def _model(name: str, tmp: Path) -> Path:
    return shared_model(name)


def test_special_values_parse_and_the_rebuilt_library_computes_the_same_bits(tmp_path):
    program = tmp_path / "special.mlir"
    program.write_text(SPECIAL_VALUES)
    vmfb, files = _dump_ll(program, tmp_path)
    text = "\n".join(f.read_text() for f in files)
    for form in ("+inf", "-inf", "+qnan", "-qnan", "+nan(0x1)", "+snan(0x1)", "-snan(0x2)"):
        assert form in text  # the forms this test is about are what IREE 3.13 writes
    _parse_all(files)
    inputs = ["8xf32=1,2,3,4,5,6,7,8", "8xf16=1,2,3,4,5,6,7,8", "8xbf16=1,2,3,4,5,6,7,8"]

    def run(engine: str, tag: str, *extra: str) -> bytes:
        outs = [tmp_path / f"{tag}_{i}.npy" for i in range(3)]
        proc = lens_run(vmfb, "main", inputs, engine, *extra, *[f"--output=@{o}" for o in outs], timeout=300)
        assert proc.returncode == 0, proc.stderr
        return b"".join(np.load(o).tobytes() for o in outs)

    plain = run("reference", "plain")
    for f in files:
        if "codegen" in f.name:
            continue  # not linked yet: no library query function
        for engine in ("reference", "debug"):
            assert run(engine, f"{engine}_{f.stem}", f"--substitute=special_linked={f}") == plain, (f.name, engine)


@pytest.mark.parametrize("name", ["small_cnn", "attention_block"])
def test_onnx_models_llvm_ir_parses_and_verifies(name, tmp_path):
    _parse_all(_dump_ll(_model(name, tmp_path), tmp_path)[1])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["squeezenet1_1", "efficientvit_m0"])
def test_pytorch_models_llvm_ir_parses_and_verifies(name, tmp_path):
    files = sorted(model_cpu_build(name, tmp_path / f"{name}.vmfb").intermediates.glob("*.ll"))
    assert {f.name.split(".")[-2] for f in files} == {"codegen", "linked", "optimized"}
    _parse_all(files)
