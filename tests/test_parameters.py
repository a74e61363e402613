"""Programs compiled with external parameters (``#flow.parameter.named``: iree-turbine's externalized
weights) run with the archives given as iree-run-module takes them, ``--parameters=[SCOPE=]FILE``: on the
debug engine (our ``io_parameters``: load, gather) and on IREE's runtime, equal to iree-run-module's own run
with the same archive, in every command that runs a program. Given none, the archive beside the program that
holds every key it loads is taken (and said); a missing archive is said by scope."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import SHARED_MODELS, compile_for, iree_tool, lens_in_process, shared_model
from support.parameters import BIAS, PROGRAM, SCALE, WEIGHT, externalize, write_archive

from engine.dispatch.bundle import Bundle
from engine.runtime.parameters import ParameterArchives, ParameterError, ParameterSpec, archives_beside
from engine.runtime.vmfb.module import open_vmfb


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("parameters")
    write_archive(root / "model.irpa")
    (root / "gather").mkdir()
    return {
        # IREE loads each constant parameter into its own buffer (io_parameters.load) on a unified memory
        # model, and gathers them into one allocation (io_parameters.gather) on a discrete one.
        "load": compile_for(PROGRAM, root / "load.vmfb", "llvm-cpu"),
        # In a folder of its own: its sources dump beside the load build would be taken for that build's.
        "gather": compile_for(PROGRAM, root / "gather" / "gather.vmfb", "llvm-cpu",
                              "--iree-stream-resource-memory-model=discrete",
                              f"--iree-hal-dump-executable-sources-to={root / 'gather' / 'sources'}"),
        "archive": root / "model.irpa",
        "root": root,
    }


X = "2x4xf32=1 2 3 4 -1 0 0.5 2"


def _iree_run_module(vmfb: Path, archive: Path) -> str:
    return _iree_run_module_with(vmfb, [f"--parameters=model={archive}"])


def _iree_run_module_with(vmfb: Path, flags: list[str]) -> str:
    proc = subprocess.run([iree_tool("iree-run-module"), f"--module={vmfb}", "--function=main", f"--input={X}",
                           *flags], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("variant", ["load", "gather"])
def test_both_engines_run_with_the_archive_as_iree_run_module_does(built, variant):
    vmfb = built[variant]
    assert f"io_parameters.{variant}" in lens_in_process("inspect", str(vmfb)).stdout
    want = _iree_run_module(vmfb, built["archive"])
    x = np.array([[1, 2, 3, 4], [-1, 0, 0.5, 2]], np.float32)
    assert want == "2x4xf32=" + "".join("[" + " ".join(f"{v:g}" for v in row) + "]" for row in (x @ WEIGHT + BIAS) * SCALE)
    for engine in ("debug", "reference"):
        proc = lens_in_process("run", str(vmfb), "--function=main", f"--input={X}",
                               f"--parameters=model={built['archive']}", f"--engine={engine}")  # fmt: skip
        assert proc.returncode == 0, (engine, proc.stderr)
        assert proc.stdout.strip().splitlines()[-1] == want, engine


def test_without_the_archive_each_engine_says_which_scope_it_wants(built, tmp_path):
    alone = shutil.copy(built["load"], tmp_path / "load.vmfb")  # no archive beside it
    debug = lens_in_process("run", str(alone), "--function=main", f"--input={X}")
    assert debug.returncode != 0 and 'parameter "model"::"weight"' in debug.stderr
    assert "--parameters=model=FILE" in debug.stderr
    reference = lens_in_process("run", str(alone), "--function=main", f"--input={X}", "--engine=reference")
    assert reference.returncode != 0 and "'model'" in reference.stderr  # IREE's own: no provider for the scope
    wrong = lens_in_process("run", str(built["load"]), "--function=main", f"--input={X}",
                            f"--parameters=other={built['archive']}")  # fmt: skip
    assert wrong.returncode != 0 and f"the archives given: other={built['archive']}" in wrong.stderr
    with pytest.raises(ParameterError, match="no such file"):
        ParameterArchives.open([f"model={built['root'] / 'absent.irpa'}"])
    with pytest.raises(ParameterError, match="cannot read"):
        ParameterArchives.open([f"model={PROGRAM}"])


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_given_none_the_archive_beside_that_holds_its_weights_is_taken_and_said(built, tmp_path, engine):
    want = _iree_run_module(built["load"], built["archive"])
    proc = lens_in_process("run", str(built["load"]), "--function=main", f"--input={X}", f"--engine={engine}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == want
    assert f"parameters of scope 'model' from {built['archive']}" in proc.stderr
    # IREE's profiler (the reference engine's profile) is given it too.
    proc = lens_in_process("profile", str(built["load"]), "--function=main", f"--input={X}", f"--engine={engine}",
                           f"--out={tmp_path / 'profile.json'}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # Two archives beside it that both hold its keys: neither is taken (which one is meant is not known).
    folder = tmp_path / "two"
    folder.mkdir()
    vmfb = shutil.copy(built["load"], folder / "load.vmfb")
    for name in ("a.irpa", "b.irpa"):
        write_archive(folder / name)
    assert archives_beside(vmfb, open_vmfb(vmfb)) == ()
    # One that lacks a key it loads is not its archive either.
    (folder / "b.irpa").unlink()
    import iree.runtime as rt

    index = rt.ParameterIndex()
    index.add_buffer("weight", WEIGHT.tobytes())
    index.create_archive_file(str(folder / "b.irpa"))
    assert archives_beside(vmfb, open_vmfb(vmfb)) == (ParameterSpec("model", str(folder / "a.irpa")),)


def test_archives_read_a_splat_and_name_a_missing_key(built):
    archives = ParameterArchives.open([f"model={built['archive']}"])
    assert archives.bytes_of("model", "weight", 16, 16).view(np.float32).tolist() == WEIGHT[1].tolist()
    assert archives.bytes_of("model", "scale", 0, 16).view(np.float32).tolist() == [SCALE] * 4
    assert archives.bytes_of("model", "scale", 2, 4).tobytes() == np.array([SCALE, SCALE], np.float32).tobytes()[2:6]
    with pytest.raises(ParameterError, match="no parameter 'nope' in scope 'model'.*its keys: bias, scale, weight"):
        archives.bytes_of("model", "nope", 0, 4)


def test_capture_and_the_debugger_see_the_weights_as_loaded(built, tmp_path):
    out = tmp_path / "bundle"
    sources = f"--sources={built['root'] / 'gather' / 'sources'}"  # (a rebuild without its memory model differs)
    proc = lens_in_process("capture", str(built["gather"]), "--function=main", f"--input={X}",
                           f"--parameters=model={built['archive']}", f"--out={out}", sources)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    bundle = Bundle(out)
    inputs = [np.asarray(a) for d in bundle.dispatches for a in bundle.dispatch_tensors(d, "inputs")]
    assert any(a.shape == (4, 4) and np.array_equal(a, WEIGHT) for a in inputs)
    commands = tmp_path / "stop.cmd"
    commands.write_text("break dispatch 0\ncontinue\ncontinue\n")
    proc = lens_in_process("debug", str(built["gather"]), "--function=main", f"--input={X}",
                           f"--parameters=model={built['archive']}", f"--commands={commands}", sources)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Stopped" in proc.stdout and _iree_run_module(built["gather"], built["archive"]) in proc.stdout


def test_diverge_and_break_diverge_run_both_builds_on_the_archive(built, tmp_path):
    # The load build against the gather build: the same weights, so no dispatch diverges.
    archive = f"--parameters=model={built['archive']}"
    proc = lens_in_process("diverge", str(built["load"]), str(built["gather"]), "--function=main", f"--input={X}",
                           archive)  # fmt: skip
    assert proc.returncode == 0 and "no divergence" in proc.stdout, (proc.stdout, proc.stderr)
    commands = tmp_path / "diverge.cmd"
    commands.write_text(f"break diverge {built['gather']}\ncontinue\n")
    proc = lens_in_process("debug", str(built["load"]), "--function=main", f"--input={X}", archive,
                           f"--commands={commands}")  # fmt: skip
    assert proc.returncode == 0 and "Finished main" in proc.stdout, (proc.stdout, proc.stderr)


def test_a_workgroup_of_a_parameterized_program_is_stepped(built):
    # iree-lens kernel runs the program again to the dispatch: the archive must come along.
    proc = lens_in_process("kernel", str(built["load"]), "--function=main", f"--input={X}", "--dispatch=0",
                           "--workgroup=0,0,0", f"--parameters=model={built['archive']}", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    stores = [line for line in proc.stdout.splitlines() if '"store"' in line]
    assert stores, proc.stdout[-2000:]


def test_a_vs_code_launch_passes_the_archives(built):
    # The DAP adapter's launch takes "parameters" as iree-run-module's flags: the module opens (its
    # initializer loads the weights), which it cannot without them.
    from support.dap import launch_reply

    # (The gather build has no archive beside it, which a launch given none would take.)
    for program, given, opens in ((built["load"], [f"model={built['archive']}"], True), (built["gather"], [], False)):
        reply = launch_reply({"program": str(program), "function": "main", "inputs": [X], "parameters": given}, opens)
        assert reply["success"] is opens, reply
        if not opens:
            assert 'parameter "model"::"weight"' in reply["message"]


@pytest.mark.slow
def test_squeezenet_with_its_weights_in_an_archive_runs_as_pytorch_did(tmp_path):
    """A real model as iree-turbine externalizes it: SqueezeNet's weight globals moved to an .irpa (23 of
    them, 4.9 MB; the module shrinks from 5.3 MB to 0.4 MB). Both engines equal iree-run-module with the
    archive bit for bit, and PyTorch's output within rounding."""
    source = shared_model("squeezenet1_1")
    moved = externalize(source, tmp_path / "sq.mlir", tmp_path / "sq.irpa")
    assert moved >= 20
    vmfb = compile_for(tmp_path / "sq.mlir", tmp_path / "sq.vmfb", "llvm-cpu")
    x = SHARED_MODELS / "squeezenet1_1_x.npy"
    outputs = {}
    for engine in ("reference", "debug"):
        out = tmp_path / f"{engine}.npy"
        proc = lens_in_process("run", str(vmfb), "--function=main", f"--input=@{x}", f"--engine={engine}",
                               f"--parameters=model={tmp_path / 'sq.irpa'}", f"--output=@{out}")  # fmt: skip
        assert proc.returncode == 0, (engine, proc.stderr)
        outputs[engine] = np.load(out)
    iree_out = tmp_path / "iree.npy"
    proc = subprocess.run([iree_tool("iree-run-module"), f"--module={vmfb}", "--function=main", f"--input=@{x}",
                           f"--parameters=model={tmp_path / 'sq.irpa'}", f"--output=@{iree_out}"],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    want = np.load(iree_out)
    for engine, got in outputs.items():
        assert got.tobytes() == want.tobytes(), engine
    torch = np.load(SHARED_MODELS / "squeezenet1_1_torch_y.npy")
    assert np.allclose(want, torch, atol=1e-5, rtol=1e-4)


def test_benchmark_and_compare_builds_load_the_archive(built):
    archive = f"--parameters=model={built['archive']}"
    proc = lens_in_process("benchmark", str(built["load"]), "--function=main", f"--input={X}", "--dispatch=0",
                           "--no-iree", archive)  # fmt: skip
    assert proc.returncode == 0 and "IREE Lens" in proc.stdout, proc.stderr
    proc = lens_in_process("compare-builds", str(built["load"]), str(built["gather"]), "--function=main",
                           f"--input={X}", "--repeat=2", "--rounds=1", archive)  # fmt: skip
    assert proc.returncode == 0 and "function results, B against A: exact" in proc.stdout, (proc.stdout, proc.stderr)


def test_split_traces_a_parameterized_program_into_tests_that_hold_their_weights(tmp_path):
    # The run that traces the dispatches loads the archive; each test then holds its inputs (the weights
    # among them) and passes --check with no archive at all.
    archive = write_archive(tmp_path / "model.irpa")
    out = tmp_path / "tests"
    proc = lens_in_process("split", str(PROGRAM), "--function=main", f"--input={X}", f"--out={out}",
                           f"--parameters=model={archive}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    archive.unlink()
    proc = lens_in_process("split", "--check", str(out))
    assert proc.returncode == 0 and ", 0 diverged or failed" in proc.stdout, (proc.stdout, proc.stderr)


def test_a_safetensors_file_serves_as_the_archive(built, tmp_path):
    # Hugging Face's format, written here by hand (8-byte header length, JSON header, data): IREE's index
    # reads it, and each engine runs as iree-run-module does with it.
    import json
    import struct

    scale = np.full(4, SCALE, np.float32)
    tensors = {"weight": WEIGHT, "bias": BIAS, "scale": scale}
    header, offset = {}, 0
    for key, array in tensors.items():
        header[key] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(a.tobytes() for a in tensors.values()))
    want = _iree_run_module(built["load"], path)
    assert want == _iree_run_module(built["load"], built["archive"])  # the same weights as the .irpa
    for engine in ("debug", "reference"):
        proc = lens_in_process("run", str(built["load"]), "--function=main", f"--input={X}",
                               f"--parameters=model={path}", f"--engine={engine}")  # fmt: skip
        assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == want, (engine, proc.stderr)


def test_inspect_lists_the_parameters_each_scope_needs(built, tmp_path):
    # Read from the host code's io_parameters calls (their rodata key tables and spans), before any run.
    for variant in ("load", "gather"):
        proc = lens_in_process("inspect", str(built[variant]), "--output=parameters")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0] == "scope 'model' (--parameters=model=FILE): 3 parameters, 96 bytes", (variant, lines)
        assert sorted(lines[1:]) == ["  bias: 16 bytes", "  scale: 16 bytes", "  weight: 64 bytes"]
    # The anonymous scope (#flow.parameter.named<"key">): --parameters=FILE, no scope.
    anonymous = tmp_path / "anonymous.mlir"
    anonymous.write_text(PROGRAM.read_text().replace('"model"::', ""))
    vmfb = compile_for(anonymous, tmp_path / "anonymous.vmfb", "llvm-cpu")
    proc = lens_in_process("inspect", str(vmfb), "--output=parameters")
    assert proc.stdout.splitlines()[0] == "the anonymous scope (--parameters=FILE): 3 parameters, 96 bytes"
    want = _iree_run_module_with(vmfb, [f"--parameters={built['archive']}"])
    for engine in ("debug", "reference"):
        proc = lens_in_process("run", str(vmfb), "--function=main", f"--input={X}",
                               f"--parameters={built['archive']}", f"--engine={engine}")  # fmt: skip
        assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == want, (engine, proc.stderr)


def test_a_module_without_parameters_says_so(tmp_path):
    vmfb = compile_for(PROGRAM.parent / "packed_i4.mlir", tmp_path / "plain.vmfb", "llvm-cpu")
    proc = lens_in_process("inspect", str(vmfb), "--output=parameters")
    assert proc.returncode == 0 and proc.stdout.startswith("the module loads no parameters"), proc.stdout


def test_span_tables_read_as_iree_reads_them_and_bad_ones_are_said():
    from engine.runtime.parameters import SpanTableError, named_spans

    table = np.array([(0, 6), (6, 4)], dtype=[("o", "<u4"), ("n", "<u4")]).tobytes()
    spans = np.array([(8, 0, 64), (0, 64, 16)], dtype=[("p", "<u8"), ("b", "<u8"), ("n", "<u8")]).tobytes()
    assert named_spans(table, b"weightbias", spans) == [("weight", 8, 0, 64), ("bias", 0, 64, 16)]
    with pytest.raises(SpanTableError, match="aligned") as e:
        named_spans(table, b"weightbias", spans[:-1])
    assert not e.value.out_of_range
    with pytest.raises(SpanTableError, match="enough data"):
        named_spans(table[:8], b"weightbias", spans)
    with pytest.raises(SpanTableError, match="outside of the valid buffer range") as e:
        named_spans(table, b"weightbia", spans)
    assert e.value.out_of_range
