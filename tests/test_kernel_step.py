"""``iree-lens kernel``: one workgroup of one dispatch, statement by statement, on real programs compiled by
iree-compile for llvm-cpu and VMVX. Recorded stores are judged against IREE's own runtime (the function's
output is the dispatch's) or the bytes the module's real kernel wrote; run-to-NaN must name the math.log."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import compile_for
from support.session import PROGRAMS

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"

LOG_PROGRAM = """func.func @main(%x: tensor<64x96xf32>) -> tensor<64x96xf32> {
  %e = tensor.empty() : tensor<64x96xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x96xf32>) outs(%e : tensor<64x96xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    %l = math.log %a : f32
    %t = arith.addf %l, %s : f32
    linalg.yield %t : f32
  } -> tensor<64x96xf32>
  return %r : tensor<64x96xf32>
}
"""


def _input() -> np.ndarray:
    x = np.random.default_rng(31).uniform(0.5, 4.0, (64, 96)).astype(np.float32)
    x[0, 5] = -2.0  # log of a negative value: NaN in workgroup (0, 0, 0)
    return x


@pytest.fixture(scope="module")
def log_builds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kernel_log")
    source = tmp / "logneg.mlir"
    source.write_text(LOG_PROGRAM)
    x = tmp / "x.npy"
    np.save(x, _input())
    return {t: compile_for(source, tmp / f"logneg_{t}.vmfb", t) for t in ("llvm-cpu", "vmvx")}, x


def kernel(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "app.launcher", "kernel", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _records(proc) -> list[dict]:
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _iree_output(vmfb: Path, function: str, x: np.ndarray) -> np.ndarray:
    import iree.runtime as rt

    config = rt.Config("local-sync")
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb.read_bytes()))
    result = ctx.modules.module[function](x)
    return np.array(result.to_host(), copy=True)  # a copy: the host view dies with the context


def _assert_stores_equal(records: list[dict], expected: np.ndarray, binding: int) -> int:
    """Every store to ``binding`` holds the bytes ``expected`` has at its offset; returns how many."""
    flat = expected.reshape(-1)
    count = 0
    for r in records:
        store = r.get("store")
        if store is None or store["binding"] != binding:
            continue
        values = store["value"] if isinstance(store["value"], list) else [store["value"]]
        got = np.array([float(v) for v in values], dtype=np.float32)
        start = store["offset"] // flat.itemsize
        np.testing.assert_array_equal(got, flat[start : start + got.size], err_msg=f"step {r['step']}")
        count += got.size
    return count


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
def test_until_nan_stops_at_math_log(log_builds, target):
    builds, x = log_builds
    proc = kernel(str(builds[target]), "--function=main", f"--input=@{x}", "--dispatch=0",
                  "--workgroup=0,0,0", "--until=nan", "--json")  # fmt: skip
    records = _records(proc)
    last = records[-1]
    assert last["op"] == "math.log", last
    assert "nan" in last["values"]
    file, line = last["loc"].rsplit(":", 1)
    # The location is the math.log's line in the executable's source (IREE's dump for a rebuild of the
    # program: the module compiled without it has LLVM locations "-":1 and VMVX ones in the program).
    text = Path(file).read_text()
    assert "math.log" in text.splitlines()[int(line) - 1] and "hal.executable" in text
    assert all("nan" not in r["values"] for r in records[:-1])
    assert [r["step"] for r in records] == list(range(len(records)))
    # --until=LINE stops at the first statement of that source line: here the math.log's, before the NaN
    # when the line runs earlier for other lanes or elements, never after it.
    at_line = _records(kernel(str(builds[target]), "--function=main", f"--input=@{x}", "--dispatch=0",
                              f"--until={line}", "--json"))  # fmt: skip
    assert at_line[-1]["loc"].endswith(f":{line}") and len(at_line) <= len(records)
    assert all(not r["loc"].endswith(f":{line}") for r in at_line[:-1])


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
def test_stores_equal_iree_output(log_builds, target):
    from engine.kernel.dispatch_run import run_to_dispatch
    from engine.kernel.stepper import record_captured

    builds, x = log_builds
    expected = _iree_output(builds[target], "main", np.load(x))
    captured = run_to_dispatch(builds[target], "main", [f"@{x}"], 0)
    count = captured.workgroup_count
    last = ",".join(str(c - 1) for c in count)  # another workgroup than the NaN's when there are several
    records = _records(kernel(str(builds[target]), "--function=main", f"--input=@{x}", "--dispatch=0",
                              f"--workgroup={last}", "--json"))  # fmt: skip
    assert _assert_stores_equal(records, expected, binding=1) > 0
    # Every workgroup's stores together write the whole output, each element once.
    written = []
    for wx in range(count[0]):
        trace = record_captured(builds[target], captured, (wx, 0, 0))
        records = [s.to_json() for s in trace.steps]
        assert _assert_stores_equal(records, expected, binding=1) > 0
        for s in trace.stores():
            n = len(s.store.value) if isinstance(s.store.value, list) else 1
            written += range(s.store.offset // 4, s.store.offset // 4 + n)
    assert count[1] == count[2] == 1
    assert sorted(written) == list(range(expected.size))


def test_step_back_returns_the_same_values(log_builds):
    from engine.kernel.cursor import KernelCursor
    from engine.kernel.stepper import record_workgroup

    builds, x = log_builds
    trace, _ = record_workgroup(builds["llvm-cpu"], "main", [f"@{x}"], 0, (0, 0, 0))
    cursor = KernelCursor(trace)
    forward = [cursor.current]
    for _ in range(40):
        forward.append(cursor.step())
    backward = [cursor.current]
    for _ in range(40):
        backward.append(cursor.step_back())
    assert [s.values for s in backward[::-1]] == [s.values for s in forward]
    assert cursor.position == 0
    nan = cursor.run_to_nan()
    assert nan is not None and nan.op == "math.log" and nan.index == trace.first_nonfinite()
    cursor.step_back()
    assert cursor.step().values == nan.values  # the same NaN again: the record, not a re-run


def test_refusals_are_one_line(log_builds, tmp_path):
    builds, x = log_builds
    common = ["--function=main", f"--input=@{x}"]
    for args, words in [
        ([str(builds["vmvx"]), *common, "--dispatch=7"], "no dispatch 7"),
        ([str(builds["vmvx"]), *common, "--dispatch=0", "--workgroup=9,9,9"], "no workgroup (9, 9, 9)"),
        ([str(builds["vmvx"]), *common, "--dispatch=0", "--until=soon"], "bad --until"),
    ]:
        proc = kernel(*args)
        assert proc.returncode == 1 and proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr, proc.stderr
    vulkan = compile_for(builds["vmvx"].parent / "logneg.mlir", tmp_path / "logneg_vulkan.vmfb", "vulkan-spirv")
    proc = kernel(str(vulkan), *common, "--dispatch=0")
    assert proc.returncode == 1 and "llvm-cpu or VMVX build" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_llvm_ir_without_locations_is_rebuilt_with_them(log_builds, tmp_path):
    """IREE keeps an LLVM kernel's MLIR locations only in a build that dumps the executable sources: the IR of
    a plain build names the file "-"; the IR the stepper finds for the module names the real lines."""
    import re

    from engine.kernel.llvm_recorder import find_llvm_ir, has_source_locations

    builds, _ = log_builds
    plain = tmp_path / "plain"
    compile_for(builds["vmvx"].parent / "logneg.mlir", tmp_path / "plain.vmfb", "llvm-cpu",
                f"--iree-hal-dump-executable-intermediates-to={plain}")  # fmt: skip
    [ir] = plain.glob("*.optimized.ll")
    assert 'DIFile(filename: "-"' in ir.read_text() and not has_source_locations(ir)
    export = re.search(r"^define internal [^@]*@(main_dispatch_0\w*)\(", ir.read_text(), re.M).group(1)
    found = find_llvm_ir(builds["llvm-cpu"], export)
    assert found is not None and has_source_locations(found)


def test_the_llvm_ir_is_compiled_from_the_executables_own_source_not_the_whole_program(tmp_path):
    """With the module's executable sources at hand (beside it, or the session's checked rebuild of its
    program), the stepper compiles that one executable (``--compile-mode=hal-executable``, under a second)
    instead of rebuilding the whole program (minutes on a large model); its IR names the source's lines,
    and the recorded workgroup's stores are the module's (the stepper checks them against its real output)."""
    from engine.dispatch.rebuild_sources import rebuild_sources
    from engine.kernel.llvm_recorder import find_llvm_ir, has_source_locations
    from engine.kernel.program_rebuild import program_and_cache_folder

    program = tmp_path / "prog" / "logneg.mlir"
    program.parent.mkdir()
    program.write_text(LOG_PROGRAM)
    module = compile_for(program, tmp_path / "prog" / "logneg.vmfb", "llvm-cpu")
    assert rebuild_sources(module).found  # what a session does at the first stop without sources
    export = next(n for n in rebuild_sources(module).interfaces if n.startswith("main_dispatch_0"))
    ir = find_llvm_ir(module, export)
    assert ir is not None and has_source_locations(ir) and "executable-" in str(ir), ir
    _, whole_program_rebuild = program_and_cache_folder(module)
    assert not whole_program_rebuild.exists()
    np.save(tmp_path / "x.npy", _input())
    records = _records(kernel(str(module), "--function=main", f"--input=@{tmp_path / 'x.npy'}", "--dispatch=0",
                              "--workgroup=0,0,0", "--json"))  # fmt: skip
    file = records[0]["loc"].rsplit(":", 1)[0]
    assert Path(file).resolve() == Path(rebuild_sources(module).files[export]).resolve(), file
    assert _assert_stores_equal(records, _iree_output(module, "main", _input()), 1) > 0


def test_a_kernel_from_a_rebuild_unlike_the_module_says_so(tmp_path):
    """The module was built with flags IREE Lens does not try (its executables differ from every checked
    rebuild): the tensors stay untyped, and the kernel stepped is IREE Lens's own rebuild of the program,
    which the trace says in its notes rather than passing it off as the module's."""
    from engine.dispatch.rebuild_sources import rebuild_sources

    program = tmp_path / "prog" / "logneg.mlir"
    program.parent.mkdir()
    program.write_text(LOG_PROGRAM)
    module = compile_for(program, tmp_path / "prog" / "logneg.vmfb", "llvm-cpu",
                         "--iree-llvmcpu-target-vector-width-in-bytes=16")  # fmt: skip
    assert not rebuild_sources(module).found
    np.save(tmp_path / "x.npy", _input())
    proc = kernel(str(module), "--function=main", f"--input=@{tmp_path / 'x.npy'}", "--dispatch=0",
                  "--workgroup=0,0,0")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert "IREE Lens's llvm-cpu rebuild of logneg.mlir, not the module's own executable" in said
    # The check the note promises is reported (a pass as well as a failure): the stores of the rebuild of this
    # elementwise kernel, other vector width or not, hold what the module's dispatch wrote.
    assert re.search(r"checked: the \d+ places it stores to hold what the dispatch wrote there", said), said


@pytest.mark.skipif(not (MODELS / "small_cnn.mlir").exists(), reason="../shared/models is not here")
def test_a_program_compiled_by_the_window_is_stepped_in_its_executables_source(tmp_path):
    """IREE Lens's compile folder keeps LLVM IR located in the program itself: small_cnn's ONNX import puts
    a whole convolution on one line (every statement at small_cnn.mlir:10). The executable's own source is
    beside it, so the stepper compiles that and steps the kernel's ops line by line."""
    from engine.compiler.job import compile_program
    from engine.compiler.request import CompileRequest
    from engine.kernel.llvm_recorder import find_llvm_ir

    program = MODELS / "small_cnn.mlir"
    compilation = compile_program(CompileRequest.from_file(program), out_dir=tmp_path / "compiled")
    assert compilation.ok, compilation
    module = compilation.vmfb_path
    [beside] = (module.parent / "executables" / "intermediates").glob("*.optimized.ll")
    assert 'filename: "small_cnn.mlir"' in beside.read_text()
    export = re.search(r'^define internal [^@]*@"(small_cnn\$async_dispatch_1\w*)"\(', beside.read_text(), re.M)[1]
    ir = find_llvm_ir(module, export)
    assert ir is not None and ir != beside and "executable-" in str(ir), ir
    records = _records(kernel(str(module), "--function=small_cnn", f"--input=@{MODELS / 'small_cnn_x.npy'}",
                              "--dispatch=1", "--workgroup=3,0,0", "--json"))  # fmt: skip
    files = {r["loc"].rsplit(":", 1)[0] for r in records} - {"unknown"}  # (a phi has no location)
    assert files and all("hal.executable" in Path(f).read_text() for f in files), files
    assert len({r["loc"] for r in records}) > 3  # the kernel's ops, line by line


@pytest.mark.slow
@pytest.mark.skipif(not (MODELS / "small_cnn.mlir").exists(), reason="../shared/models is not here")
@pytest.mark.parametrize("target,dispatch,workgroup", [("llvm-cpu", 1, "3,0,0"), ("vmvx", 4, "0,0,0")])
def test_convolution_stores_equal_the_real_dispatch(tmp_path, target, dispatch, workgroup):
    """small_cnn's first convolution (llvm-cpu) and its pooling reduction (VMVX: its convolutions take
    ~10^6 interpreted statements a workgroup): the stores equal what the module's own kernel wrote."""
    from engine.kernel.stepper import record_workgroup, store_mismatches

    vmfb = compile_for(MODELS / "small_cnn.mlir", tmp_path / f"small_cnn_{target}.vmfb", target)
    wg = tuple(int(v) for v in workgroup.split(","))
    trace, captured = record_workgroup(vmfb, "small_cnn", [f"@{MODELS / 'small_cnn_x.npy'}"], dispatch, wg)
    assert "conv" in captured.export_name or target == "vmvx"
    stores = [s for s in trace.stores() if s.store.binding == len(captured.after) - 1]
    assert stores
    out = captured.after[-1].view(np.float32)
    for s in stores:
        values = np.array(s.store.value if isinstance(s.store.value, list) else [s.store.value], np.float32)
        start = s.store.offset // 4
        np.testing.assert_array_equal(values, out[start : start + values.size])
    assert store_mismatches(trace, captured) == 0
    assert all(s.location is not None for s in stores)


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
def test_the_workgroup_that_wrote_an_element_stores_it(log_builds, target):
    """The element a user clicks is followed to its writer: the workgroup found by rerunning the real kernel
    one workgroup at a time records a store of exactly that element's value."""
    from engine.kernel.cursor import KernelCursor
    from engine.kernel.dispatch_run import executable_data, run_to_dispatch
    from engine.kernel.stepper import record_captured
    from engine.kernel.writer import workgroup_that_wrote

    builds, x = log_builds
    captured = run_to_dispatch(builds[target], "main", [f"@{x}"], 0)
    expected = _iree_output(builds[target], "main", np.load(x)).reshape(-1)
    element = expected.size - 3  # in the last workgroup when there are several
    wg = workgroup_that_wrote(captured, executable_data(builds[target], captured), 1, element * 4, 4)
    assert wg is not None and wg[0] == captured.workgroup_count[0] - 1
    cursor = KernelCursor(record_captured(builds[target], captured, wg))
    step = cursor.store_that_wrote(1, element * 4)
    assert step is not None and cursor.position == step.index
    values = step.store.value if isinstance(step.store.value, list) else [step.store.value]
    lane = (element * 4 - step.store.offset) // 4
    assert np.float32(values[lane]) == expected[element]


TORCH_PROGRAM = """module @module {
  func.func @main(%arg0: !torch.vtensor<[16,32],f32>, %arg1: !torch.vtensor<[32,8],f32>) -> !torch.vtensor<[16,8],f32> {
    %0 = torch.aten.mm %arg0, %arg1 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[32,8],f32> -> !torch.vtensor<[16,8],f32>
    %1 = torch.aten.tanh %0 : !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
    %int1 = torch.constant.int 1
    %float = torch.constant.float 5.000000e-01
    %2 = torch.aten.sub.Scalar %1, %float, %int1 : !torch.vtensor<[16,8],f32>, !torch.float, !torch.int -> !torch.vtensor<[16,8],f32>
    %3 = torch.aten.log %2 : !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
    return %3 : !torch.vtensor<[16,8],f32>
  }
}
"""


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
def test_a_frontend_program_is_stepped_in_its_executable_source(tmp_path, target):
    """A torch-dialect program (as iree-turbine exports one): the log fused after a matmul is named by the
    executable source's math.log, not the program's torch.aten.log; its stores equal IREE's output."""
    source = tmp_path / "tlog.mlir"
    source.write_text(TORCH_PROGRAM)
    vmfb = compile_for(source, tmp_path / f"tlog_{target}.vmfb", target)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    common = [str(vmfb), "--function=main", f"--input=@{tmp_path / 'a.npy'}", f"--input=@{tmp_path / 'b.npy'}",
              "--dispatch=0", "--json"]  # fmt: skip
    last = _records(kernel(*common, "--until=nan"))[-1]
    assert last["op"] == "math.log" and "nan" in last["values"], last
    proc = kernel(*common)
    assert "differ" not in proc.stderr
    import iree.runtime as rt

    ctx = rt.SystemContext(config=rt.Config("local-sync"))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb.read_bytes()))
    expected = np.array(ctx.modules.module["main"](a, b).to_host(), copy=True)
    assert _assert_stores_equal(_records(proc), expected, binding=2) > 0  # a, b, then the output


@pytest.mark.parametrize("target", ["llvm-cpu", "vmvx"])
def test_recording_stops_at_the_statement_asked_for(log_builds, target):
    """--until ends the recording there (the rest of the workgroup is not interpreted or decoded): the record
    is the whole one's prefix up to its first NaN."""
    from engine.kernel.dispatch_run import run_to_dispatch
    from engine.kernel.stepper import record_captured

    builds, x = log_builds
    captured = run_to_dispatch(builds[target], "main", [f"@{x}"], 0)
    whole = record_captured(builds[target], captured, (0, 0, 0))
    stopped = record_captured(builds[target], captured, (0, 0, 0), stop_at=lambda s: s.nonfinite)
    assert whole.complete and not stopped.complete
    first = whole.first_nonfinite()
    assert first is not None and len(stopped.steps) == first + 1
    assert [repr(s.values) for s in stopped.steps] == [repr(s.values) for s in whole.steps[: first + 1]]  # NaN too




def test_a_bf16_product_is_shown_as_the_float_it_is_and_bits_say_their_type(tmp_path):
    """IREE's llvm-cpu code computes bf16 through f32 and integer bit operations: the f32 product (no add uses
    it, so it cannot be contracted) is recorded, every value says its LLVM type (so 16400 reads as the bits of
    bf16 2.25, not a product), and the stores hold IREE's own result bits."""
    vmfb = compile_for(PROGRAMS / "bf16_square.mlir", tmp_path / "bf16.vmfb", "llvm-cpu")
    records = _records(kernel(str(vmfb), "--function=main", "--input=6x7xbf16=1.5", "--dispatch=0", "--json"))
    squares = [r for r in records if r["op"] == "arith.mulf"]
    assert any(r["type"].endswith("float>") and set(r["values"]) == {2.25} for r in squares), squares
    assert all("type" in r for r in records)
    stores = [r for r in records if "store" in r]
    assert stores and all(set(r["store"]["value"]) == {0x4010} and r["type"].endswith("i16>") for r in stores)
    text = kernel(str(vmfb), "--function=main", "--input=6x7xbf16=1.5", "--dispatch=0").stdout
    assert re.search(r"arith\.mulf\s+\[16400, .*\] : <\d+ x i16>", text), text
