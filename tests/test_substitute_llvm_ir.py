"""The LLVM 24 -> 22 normaliser and the llvmlite + iree-lld route, on literal forms IREE 3.13 writes."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from engine.substitute.llvm_ir import build_from_llvm_ir, normalize_llvm24, parse_llvm_ir


def _double_bits(x: float) -> str:
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


def _float_widened(bits: int) -> str:
    # A float's bits as the double LLVM 22 prints for it (numpy widens a quiet NaN keeping its payload).
    wide = np.array([bits], "<u4").view("<f4").astype("<f8").view("<u8")[0]
    return "0x%016X" % int(wide)


@pytest.mark.parametrize(
    "source,expected",
    [
        ("splat (float f0x40FFF644)", f"splat (float {_double_bits(float(np.frombuffer(bytes.fromhex('44F6FF40'), '<f4')[0]))})"),
        ("double f0x4000000000000000", "double 0x4000000000000000"),
        ("half f0x3C00", "half 0xH3C00"),
        ("bfloat f0x3F80", "bfloat 0xR3F80"),
        ("float -qnan", "float 0xFFF8000000000000"),
        ("float inf", "float 0x7FF0000000000000"),
        ("half -inf", "half 0xHFC00"),
        ("float -8.780000e+01", f"float {_double_bits(float(np.float32(-87.8)))}"),
        ("float 1.500000e+00", "float 1.500000e+00"),  # exact: unchanged
        ("memory(readwrite, target_mem: none)", "memory(readwrite, target_mem0: none, target_mem1: none)"),
        ("%ninf = fadd ninf float %x, %inf", "%ninf = fadd ninf float %x, %inf"),  # names and flags untouched
        # LLVM 24's signed special values and NaN payloads (quiet: `nan(P)`, signalling: `snan(P)`).
        ("splat (float +inf)", "splat (float 0x7FF0000000000000)"),
        ("float +qnan", "float 0x7FF8000000000000"),
        ("float +nan(0x1)", f"float {_float_widened(0x7FC00001)}"),
        ("float +snan(0x1)", "float 0x7FF0000020000000"),
        ("float -snan(0x2)", "float 0xFFF0000040000000"),
        ("half +inf", "half 0xH7C00"),
        ("half +nan(0x1)", "half 0xH7E01"),
        ("half +snan(0x1)", "half 0xH7C01"),
        ("bfloat -qnan", "bfloat 0xRFFC0"),
        ("bfloat +nan(0x1)", "bfloat 0xR7FC1"),
        ("double +nan(0x1)", "double 0x7FF8000000000001"),
        ("double -inf", "double 0xFFF0000000000000"),
        ("[2 x float] [float +inf, float -qnan]", "[2 x float] [float 0x7FF0000000000000, float 0xFFF8000000000000]"),
    ],
)
def test_literals(source, expected):
    assert normalize_llvm24(source) == expected


def test_normalised_module_parses_and_keeps_its_lines():
    text = (
        "define float @f(float %x) {\n"
        "  %a = fadd float %x, f0x3F800000\n"
        "  %b = fmul float %a, -8.780000e+01\n"
        "  %c = fcmp oeq float %b, -qnan\n"
        "  ret float %b\n"
        "}\n"
    )
    out = normalize_llvm24(text)
    assert out.count("\n") == text.count("\n")
    parse_llvm_ir(text, "f.ll")


def test_a_library_without_a_query_function_is_refused():
    from engine.substitute.errors import SubstitutionError

    with pytest.raises(SubstitutionError, match="iree_hal_executable_library_query"):
        build_from_llvm_ir("define void @f() {\n  ret void\n}\n", "f.ll")


def test_runtime_functions_kept_when_code_generation_calls_them():
    """Unused functions are dropped before code generation, but a libcall (memset here) brings them back."""
    from engine.substitute.interface import binary_kind

    text = (
        "@buf = internal global [4096 x i8] zeroinitializer\n"
        "define internal ptr @memset(ptr %d, i32 %c, i64 %n) {\n  ret ptr %d\n}\n"
        "define dso_local ptr @iree_hal_executable_library_query(i32 %v, ptr %e) {\n"
        "  %n = zext i32 %v to i64\n"
        "  call void @llvm.memset.p0.i64(ptr @buf, i8 0, i64 %n, i1 false)\n"
        "  ret ptr null\n}\n"
        "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)\n"
    )
    built = build_from_llvm_ir(text, "x.optimized.ll")
    assert binary_kind(built.library) == "elf"
