"""Inputs parsed and results printed exactly as IREE's own iree-run-module does (differential)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import RUN_CASES, iree_tool, lens_run

from engine.runtime.function_io import (
    InputError,
    Scalar,
    Tensor,
    format_results,
    parse_inputs,
    parse_tensor,
    write_outputs,
)
from engine.runtime.reference import ReferenceRunError, ReferenceRunner


def iree_run_module(vmfb, function, inputs, device="local-sync"):
    cmd = [iree_tool("iree-run-module"), f"--module={vmfb}", f"--device={device}", f"--function={function}"]
    cmd += [f"--input={i}" for i in inputs]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.parametrize("sample,function,inputs", RUN_CASES, ids=[f"{c[0]}.{c[1]}" for c in RUN_CASES])
def test_reference_run_prints_like_iree_run_module(compiled, sample, function, inputs):
    vmfb = compiled.path(sample, "llvm-cpu")
    expected = iree_run_module(vmfb, function, inputs)
    assert expected.returncode == 0, expected.stderr
    cli = lens_run(vmfb, function, inputs, "reference")
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == expected.stdout


def test_bad_input_shape_fails_with_iree_status(compiled):
    runner = ReferenceRunner(compiled.path("matmul", "llvm-cpu"))
    with pytest.raises(ReferenceRunError) as e:
        runner.invoke("main", parse_inputs(["4x7xf32=1", "8x16xf32=1"], "rr"))
    assert e.value.status == "INVALID_ARGUMENT"
    assert "input0 shape dimension 1 mismatch" in str(e.value)


def test_parse_tensor_forms():
    t = parse_tensor("2x3xf32=[1 2 3][4 5 6]")
    assert t.element_type.name == "f32" and t.array.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert parse_tensor("2x2xi32=7").array.tolist() == [[7, 7], [7, 7]]
    assert parse_tensor("3xi8=-1 255 128").array.tolist() == [-1, -1, -128]  # wraps like C
    assert parse_tensor("f32=2.5").shape == ()
    assert parse_tensor("4xf32").array.tolist() == [0, 0, 0, 0]
    with pytest.raises(InputError, match="underflow"):
        parse_tensor("4xf32=1 2")
    with pytest.raises(InputError, match="overflow"):
        parse_tensor("2xf32=1 2 3")
    with pytest.raises(InputError, match="element type"):
        parse_tensor("2xq7=1")


def test_numpy_files_round_trip(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, -2], dtype=np.int64)
    np.save(tmp_path / "a.npy", a)
    np.savez(tmp_path / "ab.npz", a=a, b=b)
    values = parse_inputs([f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'ab.npz'}", "7"], "rrrI")
    assert [type(v) for v in values] == [Tensor, Tensor, Tensor, Scalar]
    assert np.array_equal(values[2].array, b) and values[2].element_type.name == "i64"
    out = tmp_path / "out.npy"
    printed = write_outputs([f"@{out}", f"+{out}", "-"], [values[0], values[2], values[3]])
    with open(out, "rb") as f:
        assert np.array_equal(np.load(f), a) and np.array_equal(np.load(f), b)
    assert printed == "result[2]: i64=7\n"
    with pytest.raises(InputError, match="does not exist"):
        parse_inputs(["@/nonexistent/x.npy"], "r")


def test_format_truncates_after_1024_elements():
    text = format_results([parse_tensor("2x1000xi32=1")])
    # IREE's budget is shared across rows: 1000 in the first row, 24 then "..." in the second.
    first, second = text.split("=", 1)[1].strip().split("][")
    assert first.count("1") == 1000 and not first.endswith("...")
    assert second.count("1") == 24 and second.endswith("...]")


PACKED_I4 = Path(__file__).parent / "e2e_programs" / "packed_i4.mlir"


def test_packed_i4_results_print_their_values_and_i4_inputs_are_refused(tmp_path):
    """A 4xi4 result is 2 bytes (IREE packs two a byte, low nibble first). Was: the reference engine crashed
    ("cannot reshape array of size 2 into shape (4,)"), the debug engine said the buffer was too short, and an
    i4 input was parsed one a byte on both engines, so the program read other values than the user gave
    (``--input=4xi4=1 2 -3 4`` gave 4xi8=1 0 2 0; iree-run-module refuses it)."""
    import iree.runtime as rt
    from support import compile_for, lens_in_process

    vmfb = compile_for(PACKED_I4, tmp_path / "i4.vmfb", "llvm-cpu")
    # IREE's runtime: the packed bytes, decoded here by hand.
    ctx = rt.SystemContext(config=rt.Config("local-sync"))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb.read_bytes()))
    results = rt.VmVariantList(1)
    ctx.vm_context.invoke(ctx.modules.module["ret4"].vm_function, rt.VmVariantList(0), results)
    view = results.get_as_object(0, rt.HalBufferView)
    packed = np.array(view.map().asarray([int(view.byte_length)], np.dtype(np.uint8)), copy=True)
    assert packed.size == 2
    nibbles = [(int(b) >> shift) & 0xF for b in packed for shift in (0, 4)]
    want = " ".join(str(n - 16 if n >= 8 else n) for n in nibbles)
    assert want == "2 3 4 3"  # 1+1, 2+1, 3+1, 4-1
    for engine in ("reference", "debug"):
        proc = lens_in_process("run", str(vmfb), "--function=ret4", f"--engine={engine}")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1] == f"4xi4={want}", engine
        proc = lens_in_process("run", str(vmfb), "--function=widen", "--input=4xi4=1 2 -3 4", f"--engine={engine}")
        assert proc.returncode != 0 and "packed several to a byte" in proc.stderr, (engine, proc.stdout)


def test_unpack_follows_iree_packing_low_bits_first():
    from engine.runtime import element_types as et

    assert et.unpack(np.array([0x21, 0xF3], np.uint8), et.make(et.INTEGER, 4), (4,)).tolist() == [1, 2, 3, -1]
    assert et.unpack(np.array([0x21, 0xF3], np.uint8), et.make(et.UINT, 4), (2, 2)).tolist() == [[1, 2], [3, 15]]
    assert et.unpack(np.array([0b10101010], np.uint8), et.make(et.BOOLEAN, 1), (8,)).tolist() == [0, 1] * 4
    # i3 straddles bytes: bits 101|001|11 1 -> 5, 4, 7 as signed 3-bit: -3, -4, -1.
    assert et.unpack(np.array([0b11100101, 0b1], np.uint8), et.make(et.SINT, 3), (3,)).tolist() == [-3, -4, -1]
    with pytest.raises(ValueError):
        et.unpack(np.array([0x21], np.uint8), et.make(et.INTEGER, 4), (4,))


NARROW_TYPES = Path(__file__).parent / "e2e_programs" / "narrow_types.mlir"


def test_f8_and_i1_print_and_parse_as_iree_run_module_does(tmp_path):
    """Was: an f8 result printed as its bits (``3xf8E4M3FN=60 170 121`` for 1.5 -0.3125 288), an f8 input was
    parsed into uint8 (1.5 became the bits 1: another value; 300 was refused), and i1 printed ``1 0 1`` where
    iree-run-module prints ``01 00 01``."""
    from support import compile_for, lens_in_process

    vmfb = compile_for(NARROW_TYPES, tmp_path / "narrow.vmfb", "llvm-cpu")
    cases = [("f8", ["3xf32=1.5 -0.3 300"]), ("widen", ["3xf8E4M3FN=1.5 -0.3 300"]),
             ("widen", ["3xf8E4M3FN=1000 -70000 0.0625"]),
             # i1 in IREE's own form (hex bytes, 10 is 16), f16 overflowing to INF (no numpy warning on stderr)
             ("id", ["4xi1=01 00 10 ff", "3xbf16=0.1 -65504 1e38", "3xf16=0.1 70000 -1e-8", "2xi8=-128 255",
                     "2xui32=4294967295 -1"])]  # fmt: skip
    for function, inputs in cases:
        iree = iree_run_module(vmfb, function, inputs)
        assert iree.returncode == 0, iree.stderr
        want = [line for line in iree.stdout.splitlines() if "=" in line]
        for engine in ("reference", "debug"):
            proc = lens_in_process("run", str(vmfb), f"--function={function}", *[f"--input={i}" for i in inputs],
                                   f"--engine={engine}")  # fmt: skip
            assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr
            assert [line for line in proc.stdout.splitlines() if "=" in line] == want, (function, engine)
    assert "3xf8E4M3FN=1.5 -0.3125 288" in iree_run_module(vmfb, "f8", cases[0][1]).stdout  # what was wrong
    # .npy has no f8 or bf16 (iree-run-module refuses to write them): their bits, and a note that says so.
    outs = [f"--output=@{tmp_path / f'r{k}.npy'}" for k in range(4)]
    proc = lens_in_process("run", str(vmfb), "--function=f8", *[f"--input={i}" for i in cases[0][1]], *outs)
    assert proc.returncode == 0, proc.stderr
    assert f"result[0] (3xf8E4M3FN) is in {tmp_path / 'r0.npy'} as its bits (uint8)" in proc.stderr
    assert "result[1] (3xbf16)" in proc.stderr and "result[2]" not in proc.stderr
    import ml_dtypes

    assert np.load(tmp_path / "r0.npy").view(ml_dtypes.float8_e4m3fn).astype(np.float32).tolist() == [1.5, -0.3125, 288]


RANK0_SCALE = """
func.func @scale(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %b = linalg.broadcast ins(%s : tensor<f32>) outs(%e : tensor<4xf32>) dimensions = [0]
  %r = arith.mulf %x, %b : tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_a_rank0_argument_is_written_and_read_as_iree_run_module_does(tmp_path):
    """A rank-0 tensor (JAX's loop bounds, ONNX's scalars) is ``f32=3``. Was: the window's inputs line offered
    ``xf32=0``, which IREE's parser reads as rank 0 but ours refused ("invalid shape and element type `xf32`"),
    so running a function with a rank-0 argument failed until its inputs were retyped."""
    from support import compile_for, lens_in_process

    from app.input_defaults import default_inputs
    from engine.runtime.vmfb.module import open_vmfb

    source = tmp_path / "rank0.mlir"
    source.write_text(RANK0_SCALE)
    vmfb = compile_for(source, tmp_path / "rank0.vmfb", "llvm-cpu")
    defaults = default_inputs(open_vmfb(vmfb), "scale", "ones")
    assert defaults == ("4xf32=1", "f32=1")
    for inputs in (["4xf32=1 2 3 4", "f32=3"], ["4xf32=1 2 3 4", "xf32=3"]):
        expected = iree_run_module(vmfb, "scale", inputs)
        assert expected.returncode == 0, expected.stderr
        assert expected.stdout.strip().endswith("4xf32=3 6 9 12")
        for engine in ("reference", "debug"):
            args = [f"--input={i}" for i in inputs]
            proc = lens_in_process("run", str(vmfb), "--function=scale", f"--engine={engine}", *args)
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout == expected.stdout, (engine, inputs)
    assert parse_tensor("xi32=7").shape == () and parse_tensor("xi32=7").array.tolist() == 7


EMPTY_CONCAT = """func.func @main(%x: tensor<0x4xf32>, %y: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<0x4xf32>) {
  %b = arith.mulf %x, %x : tensor<0x4xf32>
  %c = tensor.concat dim(0) %x, %y : (tensor<0x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return %c, %b : tensor<3x4xf32>, tensor<0x4xf32>
}
"""


@pytest.mark.parametrize("fill", ["zeros", "ones", "random"])
def test_a_tensor_with_no_elements_gets_an_input_iree_run_module_takes(tmp_path, fill):
    """A zero-size argument (an empty batch, a concatenation's empty half) is ``0x4xf32`` with no value. Was:
    the window offered ``0x4xf32=0``, which IREE's parser refuses ("output data overflow:
    element_capacity=0"), so the first Run of such a function failed."""
    from support import compile_for, lens_in_process

    from app.input_defaults import default_inputs
    from engine.runtime.vmfb.module import open_vmfb

    source = tmp_path / "empty.mlir"
    source.write_text(EMPTY_CONCAT)
    vmfb = compile_for(source, tmp_path / "empty.vmfb", "llvm-cpu")
    defaults = default_inputs(open_vmfb(vmfb), "main", fill, folder=tmp_path)
    assert defaults is not None and defaults[0] == "0x4xf32"
    expected = iree_run_module(vmfb, "main", list(defaults))
    assert expected.returncode == 0, expected.stderr
    for engine in ("reference", "debug"):
        proc = lens_in_process("run", str(vmfb), "--function=main", f"--engine={engine}",
                               *[f"--input={i}" for i in defaults])  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == expected.stdout, engine


COMPLEX_PRODUCT = """
func.func @main(%a: tensor<8xcomplex<f32>>, %b: tensor<8xcomplex<f32>>) -> (tensor<8xcomplex<f32>>, tensor<8xf32>) {
  %0 = stablehlo.multiply %a, %b : tensor<8xcomplex<f32>>
  %1 = stablehlo.abs %0 : (tensor<8xcomplex<f32>>) -> tensor<8xf32>
  return %0, %1 : tensor<8xcomplex<f32>>, tensor<8xf32>
}
"""


def test_complex_results_print_as_iree_run_module_does_and_defaults_run(tmp_path):
    """Was: ``iree-lens run`` of a function returning complex<f32> (JAX's FFTs) died formatting it ("must be
    real number, not complex"), in both engines; the window's default inputs died reading the declaration
    ``tensor<8xcomplex<f32>>`` (its ``>`` ended the type early)."""
    from support import compile_for, lens_in_process

    from app.input_defaults import default_inputs
    from engine.runtime.vmfb.module import open_vmfb

    source = tmp_path / "complex.mlir"
    source.write_text(COMPLEX_PRODUCT)
    vmfb = compile_for(source, tmp_path / "complex.vmfb", "llvm-cpu")
    rng = np.random.default_rng(1)
    a, b = ((rng.standard_normal(8) + 1j * rng.standard_normal(8)).astype(np.complex64) for _ in range(2))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    inputs = [f"@{tmp_path / 'a.npy'}", f"@{tmp_path / 'b.npy'}"]
    expected = iree_run_module(vmfb, "main", inputs)
    assert expected.returncode == 0, expected.stderr
    assert "8xcf64=" in expected.stdout  # IREE prints complex as each element's bytes in hex
    for engine in ("reference", "debug"):
        args = [f"--engine={engine}", *[f"--input={i}" for i in inputs]]
        proc = lens_in_process("run", str(vmfb), *args)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == expected.stdout, engine
        out = tmp_path / f"{engine}.npy"
        assert lens_in_process("run", str(vmfb), *args, f"--output=@{out}").returncode == 0
        np.testing.assert_allclose(np.load(out), a * b, rtol=1e-6)
    defaults = default_inputs(open_vmfb(vmfb), "main", "random")
    assert defaults is not None and all(d.startswith("8xcf64=") for d in defaults)
    proc = lens_in_process("run", str(vmfb), *[f"--input={d}" for d in defaults])
    assert proc.returncode == 0, proc.stderr
    real = [np.array(d.partition("=")[2].split(), np.float32) for d in defaults]  # their imaginary parts are 0
    assert proc.stdout.strip().endswith(format_results_line(np.abs(real[0] * real[1])))


def format_results_line(values: np.ndarray) -> str:
    return "8xf32=" + " ".join("%G" % v for v in values.astype(np.float32).tolist())
