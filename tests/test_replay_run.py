"""Replays on the debug engine, checked against IREE's own tools.

* ``iree-lens capture RUN.ireereplay`` of a replay ``iree-run-module`` recorded from a traced module lists
  IREE's dispatches in execution order (IREE's export names) with IREE's traced tensors (a
  ``HalModuleDebugSink`` on the same module and input), byte for byte;
* the debug engine's replay leaves the same bytes in the buffers the host read as ``iree-run-replay``
  (read back by appending ``device.queue_write`` records to a copy of the replay: IREE's replay writes
  them to a file), also with an executable substituted as ``--replay_executable_substitution`` does;
* a plain module's replay captures the same dispatches and tensors as the module's own debug capture.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import (
    compile_with_dumps,
    edited_source,
    iree_compile,
    iree_dump_replay_rows,
    iree_run_replay_reading,
    iree_tool,
    iree_traced_tensors,
    record_replay,
)

from engine.compiler.targets import target_flags
from engine.dispatch.bundle import Bundle
from engine.dispatch.capture import capture_debug
from engine.replay.execute import ReplayExecutor, Substitution
from engine.replay.model import describe_replay
from engine.replay.reader import open_replay
from engine.replay.trace_capture import host_reads
from engine.replay.writer import readback_records, rewrite_replay
from engine.runtime.hal.devices import create_device

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
TRACE = "--iree-flow-trace-dispatch-tensors"


def _compile(source: Path, out: Path, *flags: str, target: str = "llvm-cpu") -> Path:
    proc = iree_compile(
        [str(source), *target_flags(target), *flags, "-o", str(out)],
        text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def _lens(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.launcher", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _check_capture_against_iree(bundle: Bundle, traced: list[tuple[str, list]]) -> None:
    outputs = [(k, a) for k, a in traced if k.endswith(" outputs")]
    inputs = [(k, a) for k, a in traced if k.endswith(" inputs")]
    assert [d.name for d in bundle.dispatches] == [k.split("::")[1].rsplit(" ", 1)[0] for k, _ in outputs]
    assert [d.ordinal for d in bundle.dispatches] == list(range(len(outputs)))
    for d, (_, want_out), (_, want_in) in zip(bundle.dispatches, outputs, inputs):
        assert d.tensors_from == "trace"
        got_out, got_in = bundle.dispatch_tensors(d, "outputs"), bundle.dispatch_tensors(d, "inputs")
        assert [np.asarray(g).tobytes() for g in got_out] == [w.tobytes() for w in want_out], d.name
        assert [np.asarray(g).tobytes() for g in got_in] == [w.tobytes() for w in want_in], d.name


def _traced_case(source: Path, function: str, x: np.ndarray, root: Path):
    vmfb = _compile(source, root / "traced.vmfb", TRACE)
    np.save(root / "x.npy", x)
    replay = record_replay(vmfb, function, [f"@{root / 'x.npy'}"], root / "run.ireereplay")
    return vmfb, replay


@pytest.mark.parametrize("model", ["small_cnn", "attention_block"])
def test_capture_of_a_traced_model_replay_equals_iree_traced_tensors(model, tmp_path):
    source = MODELS / f"{model}.mlir"
    if not source.exists():
        pytest.skip(f"{source} is not here (the shared models)")
    x = np.load(MODELS / f"{model}_x.npy")
    vmfb, replay = _traced_case(source, model, x, tmp_path)
    proc = _lens("capture", replay, "--device=local-sync", f"--out={tmp_path / 'bundle'}")
    assert proc.returncode == 0, proc.stderr
    bundle = Bundle(tmp_path / "bundle")
    assert len(bundle.dispatches) >= 5
    _check_capture_against_iree(bundle, iree_traced_tensors(vmfb, model, [x]))
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["engine"] == "debug-replay" and manifest["replay"] == str(replay.resolve())


def test_capture_of_a_traced_sample_replay_equals_iree_traced_tensors(tmp_path):
    from engine.samples import sample_path

    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(2, 16)
    vmfb, replay = _traced_case(sample_path("mlp"), "main", x, tmp_path)
    proc = _lens("capture", replay, f"--out={tmp_path / 'bundle'}")
    assert proc.returncode == 0, proc.stderr
    _check_capture_against_iree(Bundle(tmp_path / "bundle"), iree_traced_tensors(vmfb, "main", [x]))


def test_plain_replay_captures_what_the_module_capture_does(tmp_path):
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is not here (the shared models)")
    vmfb = _compile(source, tmp_path / "plain.vmfb")
    x = f"@{MODELS / 'small_cnn_x.npy'}"
    replay = record_replay(vmfb, "small_cnn", [x], tmp_path / "plain.ireereplay")
    assert _lens("capture", replay, f"--out={tmp_path / 'from_replay'}").returncode == 0
    capture_debug(vmfb, "small_cnn", [x], tmp_path / "from_module")
    a, b = Bundle(tmp_path / "from_replay"), Bundle(tmp_path / "from_module")
    assert [d.name for d in a.dispatches] == [d.name for d in b.dispatches] and len(a.dispatches) == 6
    for da, db in zip(a.dispatches, b.dispatches):
        for which in ("inputs", "outputs"):
            assert [np.asarray(t).tobytes() for t in a.dispatch_tensors(da, which)] == [
                np.asarray(t).tobytes() for t in b.dispatch_tensors(db, which)
            ], (da.name, which)
    # The program's result: the bytes the host read at the end, as IREE's run printed them.
    assert (
        np.asarray(a.program_tensors("outputs")[0]).tobytes()
        == np.asarray(b.program_tensors("outputs")[0]).tobytes()
    )
    # Those bytes are untyped (a replay keeps no signature): the manifest says so in the word its untyped
    # dispatch tensors use (u8), not as IREE's typed ui8.
    manifest = json.loads((tmp_path / "from_replay" / "manifest.json").read_text())
    assert manifest["output_types"] == ["40xu8"] and all(t.endswith("xu8") for t in manifest["input_types"])
    # its capture is no golden for `run` (no function, raw bytes): said so, with what to run instead
    golden = _lens("run", f"--golden={tmp_path / 'from_replay'}")
    assert golden.returncode != 0 and f"iree-lens run {replay}" in golden.stderr, golden.stderr
    # --type for a dispatch the replay does not have is said, not dropped
    typed = _lens("capture", replay, f"--out={tmp_path / 'typed'}", "--type=9:output:0=10xf32",
                  "--type=5:output:0=10xf32")  # fmt: skip
    assert typed.returncode == 0 and "no dispatch 9 with an output 0" in typed.stderr, typed.stderr
    assert Bundle(tmp_path / "typed").dispatches[5].output_types == ["10xf32"]


# -- against iree-run-replay


def _final_ranges(path: Path) -> list[tuple[int, int, int]]:
    seen: list[tuple[int, int, int]] = []
    for _, buffer, offset, length in host_reads(open_replay(path)):
        if (buffer, offset, length) not in seen:
            seen.append((buffer, offset, length))
    return seen


def _ours(path: Path, device: str, substitutions=()) -> list[bytes]:
    executor = ReplayExecutor(open_replay(path), create_device(device), substitutions=list(substitutions))
    state = executor.run()
    return [
        bytes(state.buffers[b].allocated_buffer.read_view(offset, length))
        for b, offset, length in _final_ranges(path)
    ]


def _iree_run_replay(path: Path, device: str, tmp_path: Path, *flags: str) -> list[bytes]:
    ranges = _final_ranges(path)
    replay = open_replay(path)
    out = tmp_path / f"readback-{len(list(tmp_path.iterdir()))}.bin"
    records, total = readback_records(replay, ranges, out)
    out.write_bytes(bytes(total))
    readback = rewrite_replay(replay, tmp_path / "readback.ireereplay", append=records)
    # The copy lists as the capture did, plus the appended records.
    rows = iree_dump_replay_rows(readback)
    assert rows[2 : 2 + len(iree_dump_replay_rows(path)) - 2] == iree_dump_replay_rows(path)[2:]
    proc = subprocess.run(
        [iree_tool("iree-run-replay"), f"--device={device}", *flags, str(readback)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if proc.returncode != 0 and not (device.startswith("vulkan") and proc.returncode == 245):
        raise AssertionError(proc.stderr[-2000:])  # (lavapipe teardown crashes after the run: see support)
    data = out.read_bytes()
    result, at = [], 0
    for _, _, length in ranges:
        result.append(data[at : at + length])
        at += length
    return result


RUNS = {
    "matmul": ("matmul", "llvm-cpu", "main", ["4x8xf32=0.25", "8x16xf32=-0.5"]),
    "dynamic-vmvx": ("dynamic", "vmvx", "matmul_rows", ["3x8xf32=1.5", "8x4xf32=2"]),
    "reductions": ("reductions", "llvm-cpu", "row_sum", ["8x32xf32=0.125"]),
    "int_types": (
        "int_types",
        "llvm-cpu",
        "i8_ops",
        ["16xi8=100 -1 2 3 4 5 6 7 8 9 10 11 12 13 14 127", "16xi8=3"],
    ),
}


@pytest.mark.parametrize("case", sorted(RUNS))
def test_debug_replay_leaves_the_bytes_iree_run_replay_does(compiled, case, tmp_path):
    sample, target, function, inputs = RUNS[case]
    path = record_replay(compiled.path(sample, target), function, inputs, tmp_path / "run.ireereplay")
    ours = _ours(path, "local-sync")
    assert ours and any(any(b) for b in ours)
    assert ours == _iree_run_replay(path, "local-sync", tmp_path)


def test_model_replay_on_the_debug_engine_equals_iree_run_replay(tmp_path):
    source = MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"{source} is not here (the shared models)")
    vmfb = _compile(source, tmp_path / "ab.vmfb")
    path = record_replay(
        vmfb, "attention_block", [f"@{MODELS / 'attention_block_x.npy'}"], tmp_path / "ab.ireereplay"
    )
    assert _ours(path, "local-sync") == _iree_run_replay(path, "local-sync", tmp_path)


@pytest.mark.vulkan
def test_vulkan_replay_on_the_debug_engine_gives_the_recorded_runs_result(compiled, tmp_path):
    # IREE's Vulkan driver cannot write buffers to a file (no proactor-backed file handles), so the replay's
    # result is checked against the run it recorded: iree-run-module's own output on the same device.
    vmfb = compiled.path("softmax", "vulkan-spirv")
    path = record_replay(vmfb, "main", ["4x16xf32=0.25"], tmp_path / "vk.ireereplay", "vulkan")
    proc = subprocess.run(
        [iree_tool("iree-run-module"), "--device=vulkan", f"--module={vmfb}", "--function=main",
         "--input=4x16xf32=0.25", f"--output=@{tmp_path / 'out.npy'}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert (tmp_path / "out.npy").exists(), proc.stderr
    (ours,) = _ours(path, "vulkan")
    assert np.frombuffer(ours, np.float32).tobytes() == np.load(tmp_path / "out.npy").tobytes()


def test_substituted_executable_gives_what_iree_run_replay_substitution_gives(tmp_path):
    from engine.substitute.build import compile_executable_source

    vmfb = compile_with_dumps("elementwise", "cpu", tmp_path / "cpu")
    path = record_replay(vmfb, "main", ["4x8xf32=1.5", "4x8xf32=0.5"], tmp_path / "run.ireereplay")
    binary = tmp_path / "edited.so"
    binary.write_bytes(
        compile_executable_source(edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir"))
    )
    (executable,) = describe_replay(open_replay(path)).executables
    substitution = Substitution.parse(f"{executable.object_id}={binary}")
    ours = _ours(path, "local-sync", [substitution])
    assert ours != _ours(path, "local-sync")  # the edit changes the result
    flag = substitution.to_flag()
    assert flag == f"--replay_executable_substitution={executable.object_id}={binary}"
    assert ours == _iree_run_replay(path, "local-sync", tmp_path, flag)
    # A replay written with the substitution applied runs the same on IREE's replay tool.
    written = rewrite_replay(
        open_replay(path),
        tmp_path / "substituted.ireereplay",
        substitutions={executable.object_id: (binary.read_bytes(), None)},
    )
    assert _ours(written, "local-sync") == ours == _iree_run_replay(written, "local-sync", tmp_path)


# -- the command line: run, profile, debug


def test_run_profile_and_debug_commands_on_a_replay(tmp_path):
    vmfb = compile_with_dumps("elementwise", "cpu", tmp_path / "cpu")
    path = record_replay(vmfb, "main", ["4x8xf32=1.5", "4x8xf32=0.5"], tmp_path / "run.ireereplay")
    (executable,) = describe_replay(open_replay(path)).executables

    plain = _lens("run", path, f"--output=@{tmp_path / 'plain.npy'}")
    assert plain.returncode == 0, plain.stderr
    assert "1 dispatches on local-sync" in plain.stdout
    assert np.load(tmp_path / "plain.npy").tobytes() == _iree_run_replay(path, "local-sync", tmp_path)[0]

    # An edited executable source: built, run, and the same substitution handed to IREE's replay.
    edit = edited_source(tmp_path / "cpu" / "sources", tmp_path / "edit.mlir")
    proc = _lens("run", path, f"--substitute=main_dispatch_0={edit}", f"--output=@{tmp_path / 'edited.npy'}")
    assert proc.returncode == 0, proc.stderr
    flag = next(w for w in proc.stdout.split() if w.startswith("--replay_executable_substitution="))
    assert flag.startswith(f"--replay_executable_substitution={executable.object_id}=")
    assert not (tmp_path / "edit.bin").exists()  # the build is kept in the temporary directory, not beside
    edited = np.load(tmp_path / "edited.npy").tobytes()
    assert edited != np.load(tmp_path / "plain.npy").tobytes()
    assert edited == _iree_run_replay(path, "local-sync", tmp_path, flag)[0]
    # The run as it ran (the edit applied) written as a replay: IREE's replay tool computes the same.
    written = tmp_path / "as_run.ireereplay"
    proc = _lens("run", path, f"--substitute=main_dispatch_0={edit}", f"--write-replay={written}")
    assert proc.returncode == 0 and written.is_file(), proc.stderr
    assert _iree_run_replay(written, "local-sync", tmp_path)[0] == edited

    trace = tmp_path / "trace.json"
    proc = _lens("profile", path, f"--out={trace}")
    assert proc.returncode == 0 and proc.stdout.startswith("1 dispatches"), proc.stderr
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert [e["name"] for e in events if e.get("cat") == "dispatch"] == executable.functions
    assert {"execute", "device.queue_execute"} <= {e["name"] for e in events}

    commands = tmp_path / "cmds.txt"
    commands.write_text(
        f"break dispatch main_dispatch_0 after\ncontinue\nsave-tensors {tmp_path / 'saved'}\ncontinue\n"
    )
    proc = _lens("debug", path, f"--commands={commands}", "--json")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines[0]["reason"] == "breakpoint" and lines[0]["dispatch"]["name"] == executable.functions[0]
    assert lines[0]["dispatch"]["when"] == "after" and lines[0]["scope"] == "execute"
    assert lines[-1] == {"reason": "finished", "dispatches": 1}
    saved = sorted((tmp_path / "saved").iterdir())
    assert len(saved) == 3 and np.load(saved[-1]).tobytes() == np.load(tmp_path / "plain.npy").tobytes()
    bad = tmp_path / "bad.txt"
    bad.write_text("break function main\ncontinue\n")
    assert _lens("debug", path, f"--commands={bad}").returncode == 2


def test_a_substitution_without_the_captured_functions_is_refused_like_iree_does(compiled, tmp_path):
    from engine.replay.execute import ReplayExecutionError

    path = record_replay(
        compiled.path("matmul", "llvm-cpu"), "main", ["4x8xf32=1", "8x16xf32=2"], tmp_path / "m.ireereplay"
    )
    other = describe_replay(open_replay(record_replay(
        compiled.path("softmax", "llvm-cpu"), "main", ["4x16xf32=1"], tmp_path / "s.ireereplay"
    )))  # fmt: skip
    binary = tmp_path / "softmax.so"
    binary.write_bytes(bytes(open_replay(tmp_path / "s.ireereplay").range_bytes(other.executables[0].data)))
    substitution = Substitution.parse(f"all={binary}")
    with pytest.raises(ReplayExecutionError, match="no function named"):
        _ours(path, "local-sync", [substitution])
    proc = subprocess.run(
        [iree_tool("iree-run-replay"), "--device=local-sync", substitution.to_flag(), str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0


# -- a debug run written as a replay


def _record_debug_run(vmfb: Path, function: str, inputs: list[str], out: Path):
    from engine.replay.record_run import start_recording
    from engine.runtime.debug_runner import DebugRunner
    from engine.runtime.function_io import parse_inputs, split_cconv
    from engine.runtime.hal.module import HalModule

    device = create_device("local-sync")
    recorder = start_recording(device, out)
    runner = DebugRunner(str(vmfb), "local-sync", hal_module=HalModule(device))
    kinds, _ = split_cconv(runner.cconv(function))
    results = runner.invoke(function, parse_inputs(inputs, kinds))
    ranges = recorder.computed_ranges()
    ours = [recorder.allocation_bytes(r[0]) for r in ranges]
    recorder.close()
    return results, ranges, ours


@pytest.mark.parametrize("model", ["small_cnn", "attention_block"])
def test_a_debug_run_written_as_a_replay_runs_the_same_on_iree_run_replay(model, tmp_path):
    source = MODELS / f"{model}.mlir"
    if not source.exists():
        pytest.skip(f"{source} is not here (the shared models)")
    vmfb = _compile(source, tmp_path / f"{model}.vmfb")
    path = tmp_path / "debug_run.ireereplay"
    results, ranges, ours = _record_debug_run(vmfb, model, [f"@{MODELS / f'{model}_x.npy'}"], path)
    assert ranges and iree_run_replay_reading(path, ranges, tmp_path) == ours
    assert any(np.asarray(results[0].array).tobytes() in b for b in ours)  # the result is among them
    rows = iree_dump_replay_rows(path)
    assert [r for r in rows if r.get("operation") == "command_buffer.dispatch"]
    assert describe_replay(open_replay(path)).dispatches[0].name.startswith(f"{model}$async_dispatch_0")


def test_run_write_replay_of_a_module_and_refusals(compiled, tmp_path):
    out = tmp_path / "run.ireereplay"
    proc = _lens(
        "run",
        compiled.path("mlp", "llvm-cpu"),
        "--function=main",
        "--input=2x16xf32=0.5",
        f"--write-replay={out}",
        f"--output=@{tmp_path / 'module.npy'}",
    )
    assert proc.returncode == 0 and out.is_file(), proc.stderr
    assert (
        subprocess.run(
            [iree_tool("iree-run-replay"), "--device=local-sync", str(out)], capture_output=True
        ).returncode
        == 0
    )
    assert len(describe_replay(open_replay(out)).dispatches) == 2
    # The host's read of its result is in the replay: --output writes the module run's result, bit for bit.
    rerun = _lens("run", out, f"--output=@{tmp_path / 'result.npy'}")
    assert rerun.returncode == 0, rerun.stderr
    assert np.load(tmp_path / "result.npy").tobytes() == np.load(tmp_path / "module.npy").tobytes()
    vmvx = _lens(
        "run",
        compiled.path("mlp", "vmvx"),
        "--function=main",
        "--input=2x16xf32=0.5",
        f"--write-replay={tmp_path / 'v.ireereplay'}",
    )
    assert vmvx.returncode == 1 and "not supported yet" in vmvx.stderr
    ref = _lens(
        "run",
        compiled.path("mlp", "llvm-cpu"),
        "--function=main",
        "--engine=reference",
        f"--write-replay={out}",
    )
    assert ref.returncode == 2


def test_plain_replay_captured_with_executable_sources_equals_iree_traced_tensors(tmp_path):
    # A replay of a plain build (IREE packs tensors in shared bindings): the executables' dumped sources
    # say where each tensor lies, as for a module capture, so the capture equals IREE's traced tensors.
    source = MODELS / "attention_block.mlir"
    if not source.exists():
        pytest.skip(f"{source} is not here (the shared models)")
    sources = tmp_path / "sources"
    plain = _compile(source, tmp_path / "plain.vmfb", f"--iree-hal-dump-executable-sources-to={sources}")
    traced = _compile(source, tmp_path / "traced.vmfb", TRACE)
    x = MODELS / "attention_block_x.npy"
    replay = record_replay(plain, "attention_block", [f"@{x}"], tmp_path / "plain.ireereplay")
    proc = _lens("capture", replay, f"--sources={sources}", f"--out={tmp_path / 'bundle'}")
    assert proc.returncode == 0, proc.stderr
    bundle = Bundle(tmp_path / "bundle")
    assert {d.tensors_from for d in bundle.dispatches} == {"interface"}
    traced_tensors = iree_traced_tensors(traced, "attention_block", [np.load(x)])
    outputs = [a for k, a in traced_tensors if k.endswith(" outputs")]
    assert len(bundle.dispatches) == len(outputs)
    for d, want in zip(bundle.dispatches, outputs):
        got = bundle.dispatch_tensors(d, "outputs")
        assert [g.shape for g in got] == [w.shape for w in want]
        assert [np.asarray(g).tobytes() for g in got] == [w.tobytes() for w in want], d.name


def test_replay_debugger_goes_back_to_an_earlier_stop(compiled, tmp_path):
    path = record_replay(
        compiled.path("mlp", "llvm-cpu"), "main", ["2x16xf32=0.5"], tmp_path / "mlp.ireereplay"
    )
    commands = tmp_path / "cmds.txt"
    commands.write_text(
        f"break dispatch * after\ncontinue\nsave-tensors {tmp_path / 'first'}\ncontinue\nreverse-continue\n"
        f"save-tensors {tmp_path / 'again'}\nreverse-step 1\ncontinue\ncontinue\ncontinue\n"
    )
    proc = _lens("debug", path, f"--commands={commands}", "--json")
    assert proc.returncode == 0, proc.stderr
    stops = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    saved = [s for s in stops if "saved" in s]  # save-tensors answers in JSON too
    stops = [s for s in stops if "saved" not in s]
    assert len(saved) == 2 and all(p.endswith(".npy") for s in saved for p in s["saved"])
    assert [(s["reason"], (s.get("dispatch") or {}).get("ordinal")) for s in stops] == [
        ("breakpoint", 0), ("breakpoint", 1), ("reverse", 0), ("reverse", None), ("breakpoint", 0),
        ("breakpoint", 1), ("finished", None),
    ]  # fmt: skip
    first, again = sorted((tmp_path / "first").iterdir()), sorted((tmp_path / "again").iterdir())
    assert [p.name for p in first] == [p.name for p in again] and len(first) >= 2
    assert all(np.load(a).tobytes() == np.load(b).tobytes() for a, b in zip(first, again))


def test_write_replay_of_a_substituted_run_is_refused_before_it_runs(tmp_path):
    # It was refused from inside the run, as a VM trap ("INTERNAL; HalError: ... while calling import
    # 'hal.executable.create' at: vm.call import#20"), with a replay file begun; now before anything runs.
    source = MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is not here (the shared models)")
    dump = tmp_path / "sources"
    vmfb = _compile(source, tmp_path / "plain.vmfb", f"--iree-hal-dump-executable-sources-to={dump}")
    edited = tmp_path / "d5.mlir"
    text = (dump / "module_small_cnn$async_dispatch_5.mlir").read_text()
    assert "-1.573880e-01" in text  # a bias
    edited.write_text(text.replace("-1.573880e-01", "8.426120e-01", 1))
    out = tmp_path / "sub.ireereplay"
    proc = _lens("run", vmfb, f"--input=@{MODELS / 'small_cnn_x.npy'}", f"--substitute=small_cnn$async_dispatch_5={edited}",
                 f"--write-replay={out}")  # fmt: skip
    assert proc.returncode != 0 and not out.exists()
    assert "substituted executables" in proc.stderr and "INTERNAL" not in proc.stderr and "vm.call" not in proc.stderr
