"""IREE's llvm-cpu executables loaded and dispatched with ``engine.runtime.hal.cpu_library``.

The program below is compiled once with the real ``iree-compile`` (to a ``.vmfb`` and to the ``hal``
phase, whose ``hal.command_buffer.dispatch`` ops give each dispatch's workgroup count, constants and
bindings). Results are checked against numpy and, bit for bit, against IREE's own runtime
(``iree.runtime`` on local-sync, each dispatch's tensors captured by ``HalModuleDebugSink``).
"""

from __future__ import annotations

import ctypes
import io
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile
from support import iree_compile, iree_tool

from engine.compiler.targets import target_flags
from engine.errors import DispatchError, ExecutableLoadError, HalError
from engine.runtime.hal import machine_code
from engine.runtime.hal.cpu_abi import processor_data
from engine.runtime.hal.cpu_library import CpuExecutableLibrary, aligned_copy, aligned_empty
from engine.runtime.vmfb.module import open_vmfb
from engine.samples import sample_path

PROGRAM = """
func.func @ew(%a: tensor<64x1024xf32>, %b: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %init = tensor.empty() : tensor<64x1024xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<64x1024xf32>, tensor<64x1024xf32>) outs(%init : tensor<64x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %m = arith.mulf %x, %y : f32
    %abs = math.absf %x : f32
    %s = arith.addf %m, %abs : f32
    linalg.yield %s : f32
  } -> tensor<64x1024xf32>
  return %r : tensor<64x1024xf32>
}
func.func @matmul_tanh(%lhs: tensor<64x128xf32>, %rhs: tensor<128x96xf32>) -> tensor<64x96xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<64x96xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<64x96xf32>) -> tensor<64x96xf32>
  %mm = linalg.matmul ins(%lhs, %rhs : tensor<64x128xf32>, tensor<128x96xf32>)
                      outs(%acc : tensor<64x96xf32>) -> tensor<64x96xf32>
  %t = math.tanh %mm : tensor<64x96xf32>
  return %t : tensor<64x96xf32>
}
func.func @softmax(%x: tensor<32x256xf32>) -> tensor<32x256xf32> {
  %empty = tensor.empty() : tensor<32x256xf32>
  %r = linalg.softmax dimension(1) ins(%x : tensor<32x256xf32>) outs(%empty : tensor<32x256xf32>) -> tensor<32x256xf32>
  return %r : tensor<32x256xf32>
}
func.func @row_sum(%x: tensor<64x512xf32>) -> tensor<64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<64xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<64xf32>) -> tensor<64xf32>
  %r = linalg.reduce ins(%x : tensor<64x512xf32>) outs(%acc : tensor<64xf32>) dimensions = [1]
    (%in: f32, %out: f32) {
      %s = arith.addf %in, %out : f32
      linalg.yield %s : f32
    }
  return %r : tensor<64xf32>
}
func.func @column_max(%x: tensor<64x512xf32>) -> tensor<512xf32> {
  %lowest = arith.constant -3.40282347E+38 : f32
  %empty = tensor.empty() : tensor<512xf32>
  %acc = linalg.fill ins(%lowest : f32) outs(%empty : tensor<512xf32>) -> tensor<512xf32>
  %r = linalg.reduce ins(%x : tensor<64x512xf32>) outs(%acc : tensor<512xf32>) dimensions = [0]
    (%in: f32, %out: f32) {
      %m = arith.maximumf %in, %out : f32
      linalg.yield %m : f32
    }
  return %r : tensor<512xf32>
}
func.func @i8_ops(%a: tensor<4096xi8>, %b: tensor<4096xi8>) -> tensor<4096xi8> {
  %s = arith.addi %a, %b : tensor<4096xi8>
  %x = arith.xori %s, %a : tensor<4096xi8>
  return %x : tensor<4096xi8>
}
func.func @i32_ops(%a: tensor<4096xi32>, %b: tensor<4096xi32>) -> tensor<4096xi32> {
  %m = arith.muli %a, %b : tensor<4096xi32>
  %c3 = arith.constant dense<3> : tensor<4096xi32>
  %sh = arith.shrsi %m, %c3 : tensor<4096xi32>
  %mx = arith.maxsi %sh, %a : tensor<4096xi32>
  return %mx : tensor<4096xi32>
}
func.func @widen_sum(%a: tensor<64x256xi8>) -> tensor<64xi32> {
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<64xi32>
  %acc = linalg.fill ins(%zero : i32) outs(%e : tensor<64xi32>) -> tensor<64xi32>
  %r = linalg.reduce ins(%a : tensor<64x256xi8>) outs(%acc : tensor<64xi32>) dimensions = [1]
    (%in: i8, %out: i32) {
      %w = arith.extsi %in : i8 to i32
      %s = arith.addi %w, %out : i32
      linalg.yield %s : i32
    }
  return %r : tensor<64xi32>
}
func.func @scale_dyn(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %empty = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {
      indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : tensor<?xf32>) outs(%empty : tensor<?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %two = arith.constant 2.0 : f32
    %one = arith.constant 1.0 : f32
    %m = arith.mulf %v, %two : f32
    %a = arith.addf %m, %one : f32
    linalg.yield %a : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""

DYN_N = 10000  # scale_dyn's length: not a multiple of its 4096-element workgroup tile


@dataclass
class HalDispatch:
    """One ``hal.command_buffer.dispatch`` of the hal phase: its export and what the program passes it."""

    export: str
    workgroups: tuple[str, str, str]  # SSA values, resolved when constant
    constants: list[str]
    binding_count: int

    def static_workgroups(self, values: dict[str, int]) -> tuple[int, int, int] | None:
        if all(w in values for w in self.workgroups):
            return tuple(values[w] for w in self.workgroups)
        return None


@dataclass
class Program:
    vmfb: Path
    elf: bytes
    elf_name: str
    dispatches: dict[str, HalDispatch]  # by export name
    constants: dict[str, int]  # SSA name -> value of the hal phase's integer constants


def _parse_hal(text: str) -> tuple[dict[str, HalDispatch], dict[str, int]]:
    values = {
        m[1]: int(m[2]) for m in re.finditer(r"(%[\w-]+) = arith\.constant (-?\d+) : (?:index|i32|i64)", text)
    }
    dispatches = {}
    pending = {}
    for line_no, line in enumerate(text.splitlines()):
        m = re.search(r"(%[\w-]+) = hal\.executable\.lookup\.function .*::@(\w+)\) : i64", line)
        if m:
            pending[m[1]] = m[2]
            continue
        m = re.search(
            r"hal\.command_buffer\.dispatch<.*\)\[(%[\w-]+)\] workgroups\(\[([^\]]*)\]\)(.*)$", line
        )
        if m:
            export = pending[m[1]]
            wg = tuple(s.strip() for s in m[2].split(","))
            consts = re.search(r"constants\(\[([^\]]*)\]\)", m[3])
            rest = text.splitlines()[line_no:]
            block = "\n".join(rest[: next(i for i, r in enumerate(rest) if "flags(" in r) + 1])
            dispatches[export] = HalDispatch(
                export,
                wg,
                [c.strip() for c in consts[1].split(",")] if consts else [],
                len(re.findall(r"\(%[\w-]+ : (?:index|!hal\.buffer)\)\[", block)),
            )
    return dispatches, values


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Program:
    root = tmp_path_factory.mktemp("cpu_library")
    src = root / "prog.mlir"
    src.write_text(PROGRAM)
    flags = [
        *target_flags("llvm-cpu"),
        "--iree-flow-trace-dispatch-tensors",
        "--mlir-print-op-on-diagnostic=false",
    ]
    vmfb, hal = root / "prog.vmfb", root / "prog.hal.mlir"
    for extra, out in (([], vmfb), (["--compile-to=hal"], hal)):
        proc = iree_compile(
            [str(src), *flags, *extra, "-o", str(out)],
            text=True,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    dispatches, values = _parse_hal(hal.read_text())
    elfs = [x for x in open_vmfb(vmfb).executables if x.format.startswith("embedded-elf")]
    assert len(elfs) == 1, [x.format for x in elfs]  # linked: every dispatch is an export of one library
    return Program(vmfb, bytes(elfs[0].data), elfs[0].name, dispatches, values)


@pytest.fixture(scope="module")
def library(program) -> CpuExecutableLibrary:
    lib = CpuExecutableLibrary.load(program.elf, program.elf_name)
    yield lib
    lib.close()


def _export_for(lib: CpuExecutableLibrary, function: str) -> str:
    names = [e.name for e in lib.exports if e.name.startswith(f"{function}_dispatch_")]
    assert len(names) == 1, names
    return names[0]


def _workgroups(program: Program, export: str, n: int = DYN_N) -> tuple[tuple[int, int, int], list[int]]:
    """A dispatch's workgroup count and constants: read from the hal phase, or for scale_dyn its formula there."""
    d = program.dispatches[export]
    static = d.static_workgroups(program.constants)
    if static is not None:
        return static, [program.constants[c] for c in d.constants]
    # scale_dyn: workgroups ceil(n / 4096), constants (n low 32 bits, n high 32 bits), as the hal phase computes.
    assert "scale_dyn" in export and program.constants.get("%c4096") == 4096
    return ((n + 4095) // 4096, 1, 1), [n & 0xFFFFFFFF, n >> 32]


# --- metadata ---


def test_library_lists_the_exports_the_compiler_declared(program, library):
    assert library.library_name == program.elf_name
    # The hal phase names each export it dispatches (hal.executable.lookup.function); one per function here.
    assert sorted(e.name for e in library.exports) == sorted(program.dispatches)
    assert [e.ordinal for e in library.exports] == list(range(len(CASES)))
    assert library.imports == () and library.constant_count == 0
    for e in library.exports:
        d = program.dispatches[e.name]
        assert e.attributes.binding_count == d.binding_count
        assert e.attributes.constant_count == len(d.constants)
        assert e.attributes.workgroup_size == (1, 1, 1)
        assert e.source_location is not None and e.source_location.path.endswith("prog.mlir")
    assert library.export(library.exports[2].name) is library.exports[2]
    assert "exports" in repr(library)


def test_processor_data_matches_iree_cpuinfo():
    # Bit positions of runtime/src/iree/schemas/cpu_feature_bits.inl, by the names iree-cpuinfo prints.
    names = ["sse3", "ssse3", "sse4.1", "sse4.2", "sse4a"] + [None] * 5
    names += ["avx", "fma", "fma4", "xop", "f16c", "avx2"] + [None] * 4
    names += ["avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw", "avx512ifma", "avx512vbmi"]
    names += ["avx512vpopcntdq", "avx512vnni", "avx512vbmi2", "avx512bitalg", "avx512bf16", "avx512fp16"]
    names += [None] * 17 + ["amx-tile", "amx-int8", "amx-bf16"]
    out = subprocess.run([iree_tool("iree-cpuinfo")], capture_output=True, text=True, check=True).stdout
    reported = {k: int(v) for k, v in (line.split() for line in out.splitlines() if line.strip())}
    expected = sum(1 << bit for bit, name in enumerate(names) if name and reported.get(name))
    assert processor_data()[0] == expected
    assert processor_data()[1:] == (0,) * 7


# --- results against numpy ---


def _rng():
    return np.random.default_rng(1234)


def _cases():
    r = _rng()
    f32 = np.float32
    a, b = r.standard_normal((64, 1024), f32), r.standard_normal((64, 1024), f32)
    lhs, rhs = r.standard_normal((64, 128), f32) * 0.2, r.standard_normal((128, 96), f32) * 0.2
    sm = r.standard_normal((32, 256), f32) * 3
    red = r.standard_normal((64, 512), f32)
    i8a, i8b = r.integers(-128, 128, 4096, dtype=np.int8), r.integers(-128, 128, 4096, dtype=np.int8)
    i32a = r.integers(-(2**31), 2**31, 4096, dtype=np.int64).astype(np.int32)
    i32b = r.integers(-(2**31), 2**31, 4096, dtype=np.int64).astype(np.int32)
    w8 = r.integers(-128, 128, (64, 256), dtype=np.int8)
    dyn = r.standard_normal(DYN_N, f32)

    def softmax(x):
        e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    with np.errstate(over="ignore"):
        i32_expected = np.maximum((i32a * i32b) >> 3, i32a)
    # name: (inputs, output template, expected, exact?)
    return {
        # Whether the kernel fuses a*b+|a| into one FMA depends on the host CPU: not bit for bit.
        "ew": ([a, b], np.float32, (a.astype(np.float64) * b + np.abs(a)).astype(f32), False),
        "matmul_tanh": ([lhs, rhs], np.float32, np.tanh(lhs.astype(np.float64) @ rhs), False),
        "softmax": ([sm], np.float32, softmax(sm), False),
        "row_sum": ([red], np.float32, red.astype(np.float64).sum(axis=1), False),
        "column_max": ([red], np.float32, red.max(axis=0), True),
        "i8_ops": ([i8a, i8b], np.int8, (i8a + i8b) ^ i8a, True),
        "i32_ops": ([i32a, i32b], np.int32, i32_expected, True),
        "widen_sum": ([w8], np.int32, w8.astype(np.int32).sum(axis=1), True),
        "scale_dyn": ([dyn], np.float32, dyn * f32(2) + f32(1), True),
    }


CASES = _cases()


@pytest.mark.parametrize("native_loop", [True, False], ids=["native-loop", "python-loop"])
@pytest.mark.parametrize("function", list(CASES))
def test_dispatch_matches_numpy(program, library, function, native_loop):
    inputs, dtype, expected, exact = CASES[function]
    export = _export_for(library, function)
    count, constants = _workgroups(program, export)
    out = aligned_empty(expected.shape, dtype)
    out.fill(0)
    library.dispatch(
        export, count, constants, [aligned_copy(x) for x in inputs] + [out], native_loop=native_loop
    )
    if exact:
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-6)


def test_workgroups_run_one_by_one_give_the_same_result(program, library):
    inputs, dtype, reference, _ = CASES["ew"]
    export = _export_for(library, "ew")
    count, constants = _workgroups(program, export)
    assert count[0] > 1  # the point is several workgroups
    # The whole dispatch at once is the expectation (numpy may round differently from the kernel's FMA).
    expected = aligned_empty(reference.shape, dtype)
    library.dispatch(export, count, constants, [aligned_copy(x) for x in inputs] + [expected])
    np.testing.assert_allclose(expected, reference, rtol=2e-5, atol=2e-6)
    out = aligned_empty(expected.shape, dtype)
    out.fill(0)
    prepared = library.prepare_dispatch(export, count, constants, [aligned_copy(x) for x in inputs] + [out])
    order = []
    prepared.run(native_loop=False, on_workgroup=lambda x, y, z: order.append((x, y, z)))
    assert order == [(x, y, z) for z in range(count[2]) for y in range(count[1]) for x in range(count[0])]
    np.testing.assert_array_equal(out, expected)
    out.fill(0)
    for x, y, z in reversed(order):  # workgroups are independent: any order covers the output
        prepared.run_workgroup(x, y, z)
    np.testing.assert_array_equal(out, expected)
    out.fill(0)
    prepared.run_workgroup(0, 0, 0)  # one workgroup writes only its own tile
    rows = out.size // count[0]
    assert (
        np.array_equal(out.reshape(-1)[:rows], expected.reshape(-1)[:rows])
        and not out.reshape(-1)[rows:].any()
    )


def test_dynamic_dispatch_writes_exactly_its_length(program, library):
    export = _export_for(library, "scale_dyn")
    n = 4096 + 7
    count, constants = _workgroups(program, export, n)
    x = aligned_copy(np.arange(n, dtype=np.float32))
    out = aligned_empty(n + 64, np.float32)
    out.fill(-5.0)
    library.dispatch(export, count, constants, [x, out[:n]])
    np.testing.assert_array_equal(out[:n], x * 2 + 1)
    assert (out[n:] == -5.0).all()  # nothing past the binding was touched


def test_denormals_are_flushed_and_mxcsr_restored(program, library):
    export = _export_for(library, "ew")
    count, _ = _workgroups(program, export)
    a = aligned_empty((64, 1024), np.float32)
    a.fill(np.float32(1e-40))  # a denormal: with DAZ it reads as 0, so a*b+|a| = 0
    b = aligned_copy(np.ones((64, 1024), np.float32))
    before = machine_code.get_mxcsr()
    for native_loop in (True, False):
        out = aligned_empty((64, 1024), np.float32)
        out.fill(7.0)
        library.dispatch(export, count, [], [a, b, out], native_loop=native_loop)
        assert not out.any()
        assert machine_code.get_mxcsr() == before
    assert (a * b + np.abs(a))[0, 0] > 0  # and Python's own arithmetic is back to IEEE (no flush)


# --- against IREE's runtime ---


def test_every_dispatch_matches_iree_runtime_bit_for_bit(program, library):
    import iree.runtime as rt

    events: list[tuple[str, list[np.ndarray]]] = []

    def sink(key: str, views) -> None:
        arrays = []
        for bv in views:
            dt = rt.HalElementType.map_to_dtype(bv.element_type)
            arrays.append(np.array(bv.map().asarray(bv.shape, dt), copy=True))
        events.append((key, arrays))

    instance = rt.VmInstance()
    device = rt.get_device("local-sync")
    hal = rt.create_hal_module(instance, device, debug_sink=rt.HalModuleDebugSink(sink))
    module = rt.VmModule.mmap(instance, str(program.vmfb))
    context = rt.VmContext(instance, [hal, module])
    results = {}
    for function, (inputs, *_rest) in CASES.items():
        invoker = rt.FunctionInvoker(context, device, module.lookup_function(function))
        results[function] = np.asarray(invoker(*inputs).to_host())

    inputs_by_export = {
        k.rsplit("::", 1)[1][: -len(" inputs")]: v for k, v in events if k.endswith(" inputs")
    }
    outputs_by_export = {
        k.rsplit("::", 1)[1][: -len(" outputs")]: v for k, v in events if k.endswith(" outputs")
    }
    assert set(inputs_by_export) == {e.name for e in library.exports}
    for export in library.exports:
        ins, outs = inputs_by_export[export.name], outputs_by_export[export.name]
        assert export.attributes.binding_count == len(ins) + len(outs), export.name
        n = ins[0].shape[0] if "scale_dyn" in export.name else DYN_N
        count, constants = _workgroups(program, export.name, n)
        mine = [aligned_empty(o.shape, o.dtype) for o in outs]
        for m in mine:
            m.fill(0)
        library.dispatch(export.ordinal, count, constants, [aligned_copy(i) for i in ins] + mine)
        for got, want in zip(mine, outs, strict=True):
            assert got.tobytes() == want.tobytes(), export.name
    # And IREE's own outputs agree with the traced ones (the trace saw the dispatches that produced them).
    for function in CASES:
        want = outputs_by_export[_export_for(library, function)][-1]
        assert results[function].tobytes() == want.tobytes()


# --- errors ---


def _function_file_offset(elf: bytes, library: CpuExecutableLibrary, address: int) -> int:
    """Where in the ELF file the code at a runtime address lies."""
    return next(ELFFile(io.BytesIO(elf)).address_offsets(address - library.load_base))


def _patched(elf: bytes, offset: int, code: bytes) -> bytes:
    return elf[:offset] + code + elf[offset + len(code) :]


@pytest.mark.parametrize("native_loop", [True, False], ids=["native-loop", "python-loop"])
def test_kernel_returning_nonzero_gives_dispatch_error(program, library, native_loop):
    export = _export_for(library, "ew")
    offset = _function_file_offset(program.elf, library, library.export_address(export))
    # return workgroup_state->workgroup_id_x == 2 ? 5 : 0
    # mov eax,[rdx]; xor ecx,ecx; cmp eax,2; mov eax,5; cmovne eax,ecx; ret
    code = bytes.fromhex("8b0231c983f802b8050000000f45c1c3")
    count, _ = _workgroups(program, export)
    bad = CpuExecutableLibrary.load(_patched(program.elf, offset, code), "patched")
    try:
        bindings = [aligned_empty(64 * 1024 * 4) for _ in range(3)]
        with pytest.raises(DispatchError) as info:
            bad.dispatch(export, count, [], bindings, native_loop=native_loop)
        err = info.value
        assert (err.export, err.workgroup, err.code, err.executable) == (export, (2, 0, 0), 5, "patched")
        assert export in str(err) and "(2, 0, 0)" in str(err)
        with pytest.raises(DispatchError):
            bad.prepare_dispatch(export, count, [], bindings).run_workgroup(2, 0, 0)
        bad.prepare_dispatch(export, count, [], bindings).run_workgroup(1, 0, 0)  # returns 0: fine
    finally:
        bad.close()


def test_bad_dispatch_arguments_give_hal_errors(program, library):
    export = _export_for(library, "ew")
    count, _ = _workgroups(program, export)
    good = [aligned_empty(64 * 1024 * 4) for _ in range(3)]
    with pytest.raises(HalError, match="binding count mismatch, expected 3 but was provided 2"):
        library.dispatch(export, count, [], good[:2])
    with pytest.raises(HalError, match="constant count mismatch"):
        library.dispatch(export, count, [1], good)
    misaligned = aligned_empty(64 * 1024 * 4 + 64)[4 : 4 + 64 * 1024 * 4]
    with pytest.raises(HalError, match="64-byte"):
        library.dispatch(export, count, [], [misaligned, good[1], good[2]])
    readonly = aligned_empty(64 * 1024 * 4)
    readonly.flags.writeable = False
    with pytest.raises(HalError, match="read-only"):
        library.dispatch(export, count, [], [readonly, good[1], good[2]])
    with pytest.raises(HalError, match="C-contiguous"):
        library.dispatch(export, count, [], [aligned_empty((64, 2048))[:, ::2], good[1], good[2]])
    with pytest.raises(HalError, match="workgroup count"):
        library.dispatch(export, (1, 1), [], good)
    with pytest.raises(HalError, match="no export named"):
        library.dispatch("nope", count, [], good)
    with pytest.raises(HalError, match="out of range"):
        library.dispatch(len(library.exports), count, [], good)
    with pytest.raises(HalError, match="outside"):
        library.prepare_dispatch(export, count, [], good).run_workgroup(count[0], 0, 0)


def test_closed_library_refuses_to_dispatch(program):
    lib = CpuExecutableLibrary.load(program.elf, "short-lived")
    export = lib.exports[0]
    prepared = lib.prepare_dispatch(
        export.ordinal,
        (0, 0, 0),
        [0] * export.attributes.constant_count,
        [aligned_empty(64)] * export.attributes.binding_count,
    )
    prepared.run()  # zero workgroups: nothing runs
    lib.close()
    assert lib.closed
    with pytest.raises(HalError, match="closed"):
        prepared.run()


def test_bad_elf_files_give_load_errors(program, library):
    elf = program.elf
    with pytest.raises(ExecutableLoadError, match="not an ELF"):
        CpuExecutableLibrary.load(b"PK\x03\x04" + bytes(100), "zip")
    with pytest.raises(ExecutableLoadError, match="not an ELF"):
        CpuExecutableLibrary.load(b"", "empty")
    with pytest.raises(ExecutableLoadError, match="x86-64"):
        CpuExecutableLibrary.load(elf[:18] + (183).to_bytes(2, "little") + elf[20:], "aarch64")
    with pytest.raises(ExecutableLoadError, match="cannot be loaded"):
        CpuExecutableLibrary.load(elf[:200], "truncated")
    renamed = elf.replace(b"iree_hal_executable_library_query", b"iree_hal_executable_library_querx")
    with pytest.raises(ExecutableLoadError, match="no iree_hal_executable_library_query"):
        CpuExecutableLibrary.load(renamed, "renamed")
    # The query answers only for version 6 (`cmp edi, 6`): make it ask for 7 instead.
    offset = _function_file_offset(elf, library, library.query_address)
    window = elf[offset : offset + 64]
    at = window.find(bytes.fromhex("83ff06"))
    assert at >= 0, window.hex()
    with pytest.raises(ExecutableLoadError, match="version 6"):
        CpuExecutableLibrary.load(_patched(elf, offset + at, bytes.fromhex("83ff07")), "v7")


def test_import_thunk_forwards_arguments_and_result():
    # IREE's generated code calls thunk(fn, params, context, reserved); the thunk must call fn(params, context, reserved).
    seen = []

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    def target(params, context, reserved):
        seen.append((params, context, reserved))
        return 42

    thunk = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
    )(machine_code.machine_code().import_thunk_address)
    assert thunk(ctypes.cast(target, ctypes.c_void_p).value, 0x1000, 0x2000, 0) == 42
    assert seen == [(0x1000, 0x2000, None)]


def test_flush_denormals_context_restores_mxcsr():
    before = machine_code.get_mxcsr()
    with machine_code.FlushDenormals():
        assert machine_code.get_mxcsr() == before | machine_code.MXCSR_FLUSH_DENORMALS
        assert np.float32(1e-40) * np.float32(1) == 0
    assert machine_code.get_mxcsr() == before
    assert np.float32(1e-40) * np.float32(1) != 0


@pytest.mark.parametrize(
    "sample", ["elementwise", "matmul", "mlp", "softmax", "int_types", "dynamic", "conv"]
)
def test_bundled_samples_load_and_list_their_exports(compiled, sample):
    path = compiled.path(sample, "llvm-cpu")
    elfs = [x for x in open_vmfb(path).executables if x.format.startswith("embedded-elf")]
    assert elfs
    for x in elfs:
        with CpuExecutableLibrary.load(x.data, x.name) as lib:
            assert lib.library_name == x.name
            assert lib.imports == () and lib.constant_count == 0 and lib.sanitizer == 0
            names = [e.name for e in lib.exports]
            assert names and len(set(names)) == len(names)
            assert all(n.startswith(tuple(f"{f}_dispatch_" for f in _function_names(sample))) for n in names)
            assert all(e.attributes.binding_count >= 1 for e in lib.exports)
        assert lib.closed


def _function_names(sample: str) -> list[str]:
    return re.findall(r"func\.func @(\w+)", sample_path(sample).read_text())
