"""Trace sources against IREE's own tools: HAL profiles (local-task, Vulkan), debug-run recording,
compile timing, ``iree-lens profile``/``zones``, and the native ``.lenstrace`` format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import iree_compile, iree_dispatches, lens_in_process

from engine.cli.profile import profile_debug, profile_reference
from engine.compiler.timing import parse_timing
from engine.trace.compile_timing import load_compile_timing
from engine.trace.ireeprof import capture_ireeprof, load_ireeperf_jsonl, load_ireeprof
from engine.trace.model import TraceFormatError
from engine.trace.native import load_lenstrace, save_lenstrace
from engine.trace.open import load_trace
from engine.trace.stats import zone_statistics

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
CPU_FLAGS = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
]
MM_INPUTS = ["4x8xf32=" + " ".join(str(i / 10) for i in range(32)), "8x16xf32=0.3"]


def dispatches_of(trace) -> list[tuple]:
    cid = trace.categories.id_of("dispatch")
    idx = np.flatnonzero(trace.zones.category == cid)
    zones = sorted((trace.zone(int(i)) for i in idx), key=lambda z: z.args["ordinal"])
    return [(z.name, tuple(z.args["workgroup_count"])) for z in zones]


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    src = MODELS / "attention_block.mlir"
    if not src.exists():
        pytest.skip("shared models are absent")
    d = tmp_path_factory.mktemp("attention")
    out = {}
    for target, flags in (("cpu", CPU_FLAGS), ("vulkan", ["--iree-hal-target-device=vulkan"])):
        out[target] = d / f"attention_{target}.vmfb"
        iree_compile(
            [str(src), *flags, "-o", str(out[target])],
            check=True,
            )
    out["input"] = f"@{MODELS / 'attention_block_x.npy'}"
    return out


@pytest.mark.parametrize("device", ["local-task", "vulkan"])
def test_ireeprof_imports_every_dispatch(attention, tmp_path, device):
    vmfb = attention["vulkan" if device == "vulkan" else "cpu"]
    expected = iree_dispatches(vmfb, "attention_block", [attention["input"]], device, tmp_path)
    assert len(expected) == 12
    prof = tmp_path / "x.ireeprof"
    capture_ireeprof(vmfb, "attention_block", [attention["input"]], prof, device=device)
    trace = load_ireeprof(prof)
    assert dispatches_of(trace) == expected
    assert trace.metadata["dispatch_time"] == ("device" if device == "vulkan" else "host")
    # One time axis: the dispatches lie inside the queue's execute operations that ran them.
    z = trace.zones
    exec_id = trace.names.id_of("execute")
    disp = np.flatnonzero(z.category == trace.categories.id_of("dispatch"))
    execs = np.flatnonzero(z.name == exec_id)
    assert execs.size
    lo, hi = z.start[execs].min(), z.end[execs].max()
    assert np.all(z.start[disp] >= lo) and np.all(z.end[disp] <= hi)
    # Below the execute operation that ran them; local-task may run independent dispatches at the same time on
    # its workers, and a zone overlapping a sibling goes one lane deeper, so only on Vulkan's queue is each
    # exactly one below its execute. (Two executes may overlap on a loaded machine: the later one's lane is
    # deeper, and its dispatches with it; "depth 1" failed so under CI's load.)
    assert np.all(z.depth[disp] >= 1)
    for d in disp.tolist():
        holders = [e for e in execs.tolist() if z.start[e] <= z.start[d] and z.end[d] <= z.end[e]]
        assert holders, d
        depth = int(z.depth[d])
        assert any(depth > z.depth[e] for e in holders), (d, depth, [int(z.depth[e]) for e in holders])
        if device == "vulkan":
            assert any(depth == z.depth[e] + 1 for e in holders), (d, depth, [int(z.depth[e]) for e in holders])


@pytest.mark.parametrize(
    "sample, function, inputs",
    [
        ("matmul", "main", MM_INPUTS),
        ("globals", "accumulate", ["4xf32=1 2 3 4"]),
        ("mlp", "main", ["2x16xf32=0.5"]),
        ("reductions", "column_max", ["8x32xf32=3"]),
    ],
)
def test_profile_both_engines_equal_iree_profiler(compiled, tmp_path, sample, function, inputs):
    vmfb = compiled.path(sample, "llvm-cpu")
    expected = iree_dispatches(vmfb, function, inputs, "local-sync", tmp_path)
    assert dispatches_of(profile_reference(str(vmfb), function, inputs, "local-sync")) == expected
    assert dispatches_of(profile_debug(str(vmfb), function, inputs, "local-sync")) == expected


def test_profile_models_on_vulkan_both_engines(attention, tmp_path):
    vmfb, x = attention["vulkan"], attention["input"]
    expected = iree_dispatches(vmfb, "attention_block", [x], "vulkan", tmp_path)
    assert dispatches_of(profile_reference(str(vmfb), "attention_block", [x], "vulkan")) == expected
    assert dispatches_of(profile_debug(str(vmfb), "attention_block", [x], "vulkan")) == expected


def test_debug_recording_nests(attention):
    trace = profile_debug(
        str(attention["cpu"]), "attention_block", [attention["input"]], "local-sync", repeat=2
    )
    z = trace.zones
    cats = {name: trace.categories.id_of(name) for name in ("vm call", "import", "queue", "dispatch")}
    disp = np.flatnonzero(z.category == cats["dispatch"])
    assert len(disp) == 24
    # Each call's dispatches are numbered from its first, as break dispatch N counts: 0-11 in both calls.
    in_time = sorted(disp, key=lambda i: z.start[i])
    assert [trace.zone(int(i)).args["ordinal"] for i in in_time] == list(range(12)) * 2
    # Every dispatch lies inside a command buffer on the device track, itself inside a queue.execute import.
    cbs = np.flatnonzero(z.category == cats["queue"])
    imports = np.flatnonzero(
        (z.category == cats["import"])
        & np.isin(
            z.name,
            [
                trace.names.id_of("hal.device.queue.execute.indirect"),
                trace.names.id_of("hal.device.queue.execute"),
            ],
        )
    )
    for i in disp:
        assert z.depth[i] == 1
        assert np.any((z.start[cbs] <= z.start[i]) & (z.end[cbs] >= z.end[i]))
    for c in cbs:
        assert np.any((z.start[imports] <= z.start[c]) & (z.end[imports] >= z.end[c]))
    # Imports are called from VM functions: none sits at the top of the VM stack.
    assert np.all(z.depth[np.flatnonzero(z.category == cats["import"])] >= 1)
    fn = trace.names.id_of("attention_block")
    assert int((z.name == fn).sum()) == 2 and np.all(z.depth[z.name == fn] == 0)
    assert trace.metadata["aborted_zones"] == 0


def test_cli_profile_and_zones_count_the_same(attention, tmp_path):
    expected = iree_dispatches(
        attention["cpu"], "attention_block", [attention["input"]], "local-task", tmp_path
    )
    counts: dict[str, int] = {}
    for name, _ in expected:
        counts[name] = counts.get(name, 0) + 1
    for engine in ("reference", "debug"):
        out = tmp_path / f"{engine}.json"
        cmd = [
            "profile",
            str(attention["cpu"]),
            "--function=attention_block",
            f"--input={attention['input']}",
            f"--engine={engine}",
            "--device=local-task",
            f"--out={out}",
        ]
        profiled = lens_in_process(*cmd)
        assert profiled.returncode == 0, profiled.stderr
        events = json.loads(out.read_text())["traceEvents"]
        xs = sorted(
            (e for e in events if e["ph"] == "X" and e.get("cat") == "dispatch"),
            key=lambda e: e["args"]["ordinal"],
        )
        assert [(e["name"], tuple(e["args"]["workgroup_count"])) for e in xs] == expected
        assert all({"ordinal", "executable", "workgroup_count"} <= set(e["args"]) for e in xs)
        zones = lens_in_process("zones", str(out), "--json")
        assert zones.returncode == 0, zones.stderr
        rows = {r["name"]: r for r in json.loads(zones.stdout)["zones"]}
        for name, n in counts.items():
            assert rows[name]["count"] == n
            assert rows[name]["total_ns"] >= rows[name]["count"] * rows[name]["min_ns"]


def test_compile_timing_as_zones(tmp_path):
    from engine.samples import sample_path

    proc = iree_compile(
        [
            str(sample_path("matmul")),
            *CPU_FLAGS,
            "--mlir-timing",
            "--mlir-output-format=json",
            "-o",
            str(tmp_path / "m.vmfb"),
        ],
        text=True,
        check=True,
    )
    stderr = tmp_path / "stderr.txt"
    stderr.write_text(proc.stderr)
    trace = load_trace(stderr)
    from engine.compiler.timing import split_timing_output

    data = split_timing_output(proc.stderr)[1]
    report = parse_timing(data)

    def walk(passes, out):
        for p in passes:
            out.append(p.name)
            walk(p.children, out)
        return out

    names = walk(report.passes, [])
    assert len(trace.zones) == len(names)
    rows = {r.name: r for r in zone_statistics(trace)}
    for name in set(names):
        assert rows[name].count == names.count(name)
    top = sum(int(round(p.wall_s * 1e9)) for p in report.passes)
    assert int(trace.zones.duration[trace.zones.depth == 0].sum()) == top
    (tmp_path / "timing.json").write_text(json.dumps(data))
    assert len(load_compile_timing(tmp_path / "timing.json").zones) == len(names)


def test_bad_sources_are_clear_errors(tmp_path, compiled):
    bad = tmp_path / "bad.ireeprof"
    prof = tmp_path / "good.ireeprof"
    capture_ireeprof(compiled.path("matmul", "llvm-cpu"), "main", MM_INPUTS, prof, device="local-sync")
    bad.write_bytes(prof.read_bytes()[: prof.stat().st_size // 2])
    with pytest.raises(TraceFormatError, match="iree-profile"):
        load_ireeprof(bad)
    (tmp_path / "x.jsonl").write_text('{"record_type": "queue_event"}\n')
    with pytest.raises(TraceFormatError, match="schema"):
        load_ireeperf_jsonl(tmp_path / "x.jsonl")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(TraceFormatError, match="empty"):
        load_trace(tmp_path / "empty.json")
    (tmp_path / "p.mlir").write_text("func.func @main() {\n  return\n}\n")  # not IREE's "profile file magic"
    with pytest.raises(TraceFormatError, match="a program is not a trace"):
        load_trace(tmp_path / "p.mlir")
    (tmp_path / "t.txt").write_text("error: nothing timed here\n")
    with pytest.raises(TraceFormatError):
        load_trace(tmp_path / "t.txt")
    with pytest.raises(TraceFormatError, match="iree-run-module failed"):
        capture_ireeprof(
            compiled.path("matmul", "llvm-cpu"), "nope", [], tmp_path / "y.ireeprof", device="local-sync"
        )


def test_lenstrace_round_trip_and_damage(tmp_path, attention):
    trace = profile_debug(str(attention["cpu"]), "attention_block", [attention["input"]], "local-sync")
    p = tmp_path / "t.lenstrace"
    save_lenstrace(trace, p)
    back = load_trace(p)
    for col in ("start", "end", "depth", "track", "name", "category", "payload", "lane_offsets"):
        assert np.array_equal(getattr(trace.zones, col), getattr(back.zones, col))
    assert back.payloads == json.loads(json.dumps(trace.payloads))
    assert [t.name for t in back.tracks] == [t.name for t in trace.tracks]
    data = p.read_bytes()
    (tmp_path / "cut.lenstrace").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError):
        load_lenstrace(tmp_path / "cut.lenstrace")


def test_cli_zones_compare_json_and_errors(tmp_path):
    from engine.trace.chrome import write_chrome_json
    from engine.trace.model import TraceBuilder

    def trace(durations: dict, path: Path) -> Path:
        b = TraceBuilder()
        t = b.track(("t",), "t")
        at = 0
        for name, ds in durations.items():
            for d in ds:
                b.add_zone(at, at + d, t, name)
                at += d
        write_chrome_json(b.build(), path)
        return path

    a = trace({"cse": [100, 100], "canonicalize": [1000]}, tmp_path / "a.json")
    b = trace({"cse": [100, 100, 100], "canonicalize": [5000]}, tmp_path / "b.json")
    out = lens_in_process("zones", str(a), f"--compare={b}", "--json", "--top=1")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["zones"]
    assert len(rows) == 1 and rows[0]["name"] == "canonicalize"
    assert (rows[0]["total_a_ns"], rows[0]["total_b_ns"], rows[0]["total_diff_ns"]) == (1000, 5000, 4000)
    # The largest change either way: B -> A saved 4000 ns in canonicalize, more than cse's 100 ns lost.
    out = lens_in_process("zones", str(b), f"--compare={a}", "--json", "--top=1")
    rows = json.loads(out.stdout)["zones"]
    assert [(r["name"], r["total_diff_ns"]) for r in rows] == [("canonicalize", -4000)]
    out = lens_in_process("zones", str(b), f"--compare={a}", "--json", "--top=2")
    assert [r["name"] for r in json.loads(out.stdout)["zones"]] == ["cse", "canonicalize"]  # slower first
    out = lens_in_process("zones", str(a), "--json")
    rows = {r["name"]: r for r in json.loads(out.stdout)["zones"]}
    assert rows["cse"]["count"] == 2 and rows["cse"]["total_ns"] == 200 and rows["cse"]["mean_ns"] == 100
    (tmp_path / "m.vmfb").write_bytes(b"PK\x03\x04" + b"\0" * 26 + b"module.fb" + b"\0" * 64)
    out = lens_in_process("zones", str(tmp_path / "m.vmfb"))
    assert out.returncode == 1 and "not a trace" in out.stderr


def test_profile_repeat_runs_the_function_n_times_in_one_process(compiled, tmp_path):
    vmfb = compiled.path("matmul", "llvm-cpu")
    expected = iree_dispatches(vmfb, "main", MM_INPUTS, "local-sync", tmp_path)
    for profile in (profile_reference, profile_debug):
        got = dispatches_of(profile(str(vmfb), "main", MM_INPUTS, "local-sync", repeat=3))
        assert got == expected * 3, profile.__name__


def test_the_first_dispatch_of_a_debug_profile_is_not_charged_the_native_loops_compile(attention, tmp_path):
    """In a fresh process the native batch loop and its helpers are compiled on first use (about 46 ms here):
    that time is not the first dispatch's (the by-source profile put 97 % of a transformer on its first
    layer norm). Each dispatch zone of both calls stays far below it."""
    import json
    import subprocess
    import sys

    out = tmp_path / "p.json"
    proc = subprocess.run([sys.executable, "-m", "app.launcher", "profile", str(attention["cpu"]), "--engine=debug",
                           f"--input={attention['input']}", "--repeat=2", f"--out={out}"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    durations = [e["dur"] for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "dispatch"]
    assert len(durations) == 24
    assert max(durations) < 20_000, durations  # µs: a dispatch of this model runs in microseconds
