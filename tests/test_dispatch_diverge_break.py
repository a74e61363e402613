"""``break diverge``: the debug session stops after the first dispatch whose outputs differ from a reference
run (a capture bundle or another module) beyond a tolerance. The broken module is the mlp sample with one
executable's ``addf`` made a ``subf`` through ``--iree-hal-substitute-executable-source`` (as
test_dispatch_diverge.py builds it); the test names that dispatch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import broken_build, broken_pair, compile_for, lens_in_process, model_cpu_build, shared_model

from engine.samples import sample_path
from engine.session.script import ScriptError, parse_script

PROGRAMS = Path(__file__).resolve().parent / "diverge_programs"
MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
BROKEN = "main_dispatch_1"
INPUT = "--input=2x16xf32=0.25"


def _debug(module, commands: str, tmp_path, *extra: str) -> subprocess.CompletedProcess:
    script = tmp_path / "commands.txt"
    script.write_text(commands)
    return lens_in_process("debug", module, "--function=main", INPUT, f"--commands={script}", "--json", *extra)


def _stops(proc: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_break_diverge_names_the_broken_dispatch_against_a_module_and_a_bundle(tmp_path):
    good, broken, _ = broken_pair(sample_path("mlp"), tmp_path, BROKEN, "arith.addf", "arith.subf")
    # Against the good module (run with the same inputs): the first divergent dispatch is the broken one.
    proc = _debug(broken, f"break diverge {good}\ncontinue\ncontinue\n", tmp_path)
    assert proc.returncode == 0, proc.stderr
    stops = _stops(proc)
    first = stops[0]
    assert first["reason"] == "dispatch" and first["dispatch"]["when"] == "after", first
    assert first["dispatch"]["ordinal"] == 1 and first["dispatch"]["name"].startswith(BROKEN + "_"), first
    assert first["divergence"]["mismatches"] > 0 and first["divergence"]["max_abs_error"] > 0
    # It fires once a call: the dispatches after it inherit the difference; the run then finishes.
    assert stops[-1]["reason"] == "finished", stops
    # Against a capture bundle of the good module: the same dispatch.
    bundle = tmp_path / "good_bundle"
    cap = lens_in_process("capture", good, "--function=main", INPUT, f"--out={bundle}")
    assert cap.returncode == 0, cap.stderr
    proc = _debug(broken, f"break diverge {bundle} 1e-6 1e-6\ncontinue\n", tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = _stops(proc)[0]
    assert first["dispatch"]["ordinal"] == 1 and first["divergence"]["name"].startswith(BROKEN + "_")
    # The same module as its own reference never stops; a huge tolerance hides the broken one.
    # The finished record lists what the breakpoint judged: every dispatch the capture holds, by its name there.
    captured = [(d["ordinal"], d["name"]) for d in json.loads((bundle / "manifest.json").read_text())["dispatches"]]
    for commands in (f"break diverge {bundle}\ncontinue\n", f"break diverge {good}\ncontinue\n"):
        same = _debug(good, commands, tmp_path)
        assert [s["reason"] for s in _stops(same)] == ["finished"], same.stdout + same.stderr
        verdicts = _stops(same)[-1]["verdicts"]
        assert [(o, name) for o, name, _ in verdicts] == captured, verdicts
        assert {v for _, _, v in verdicts} == {"exact"}, verdicts  # the same build on the same inputs
    loose = _debug(broken, f"break diverge {good} 100\ncontinue\n", tmp_path)
    assert [s["reason"] for s in _stops(loose)] == ["finished"], loose.stdout + loose.stderr
    judged = {o: v for o, _, v in _stops(loose)[-1]["verdicts"]}
    assert judged[0] == "exact" and judged[1] not in ("exact", "diverged"), judged  # the broken one, let through
    # Without a diverge breakpoint there is nothing judged, and no verdicts.
    plain = _debug(good, "continue\n", tmp_path)
    assert "verdicts" not in _stops(plain)[-1], plain.stdout


def test_break_diverge_stops_where_the_reference_runs_another_dispatch_or_none(tmp_path):
    """A reference whose dispatch list does not match the live run's: a renamed dispatch stops there (the note
    names the reference's), and one past the reference's last dispatch stops too."""
    good = compile_for(sample_path("mlp"), tmp_path / "good.vmfb", "llvm-cpu")
    bundle = tmp_path / "bundle"
    cap = lens_in_process("capture", good, "--function=main", INPUT, f"--out={bundle}")
    assert cap.returncode == 0, cap.stderr
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert len(manifest["dispatches"]) >= 2, manifest["dispatches"]
    renamed, truncated = tmp_path / "renamed", tmp_path / "truncated"
    for edited, change in ((renamed, "rename"), (truncated, "truncate")):
        shutil.copytree(bundle, edited)
        m = json.loads((edited / "manifest.json").read_text())
        if change == "rename":
            m["dispatches"][1]["name"] = "another_dispatch"
        else:
            del m["dispatches"][1:]
        (edited / "manifest.json").write_text(json.dumps(m))
    first = _stops(_debug(good, f"break diverge {renamed}\ncontinue\n", tmp_path))[0]
    assert first["dispatch"]["ordinal"] == 1, first
    assert first["divergence"]["reference_name"] == "another_dispatch", first["divergence"]
    assert first["divergence"]["name"] == manifest["dispatches"][1]["name"], first["divergence"]
    first = _stops(_debug(good, f"break diverge {truncated}\ncontinue\n", tmp_path))[0]
    assert first["dispatch"]["ordinal"] == 1 and first["divergence"]["reference_name"] is None, first
    assert "#1" in first["divergence"]["note"], first["divergence"]


def test_break_diverge_bad_reference_and_script_errors(tmp_path):
    good, _, _ = broken_pair(sample_path("mlp"), tmp_path, BROKEN, "arith.addf", "arith.subf")
    missing = _debug(good, f"break diverge {tmp_path / 'nope'}\ncontinue\n", tmp_path)
    assert "nope does not exist" in missing.stdout + missing.stderr
    for bad in ("break diverge", "break diverge X abc", "break diverge X -1"):
        try:
            parse_script(bad)
        except ScriptError as e:
            assert "diverge" in str(e)
        else:
            raise AssertionError(f"{bad!r} was accepted")
    [command] = parse_script("break diverge ref.vmfb 1e-3 0.01")
    bp = command.breakpoint
    assert (bp.kind, bp.reference, bp.atol, bp.rtol, bp.when) == ("diverge", "ref.vmfb", 1e-3, 0.01, "after")
    helped = subprocess.run([sys.executable, "-m", "app.launcher", "debug", "--help"], capture_output=True, text=True)
    assert "break diverge BUNDLE_DIR|MODULE.vmfb [ATOL] [RTOL]" in " ".join(helped.stdout.split())


def _packed_inputs(tmp_path) -> list[str]:
    rng = np.random.default_rng(0)
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, (rng.standard_normal((16, 24)) * 2).astype(np.float32))
    np.save(b, rng.standard_normal((16, 40)).astype(np.float32))
    return [f"--input=@{a}", f"--input=@{b}"]


def _debug_packed(module, reference, inputs, tmp_path, function: str = "main", stops: int = 0) -> list[dict]:
    """The records of a run to the end that ``stops`` times at ``break diverge reference``: one ``continue``
    more than the stops (a run command after the end is an error, as in gdb -batch -x)."""
    script = tmp_path / "packed_commands.txt"
    script.write_text(f"break diverge {reference}\n" + "continue\n" * (stops + 1))
    proc = lens_in_process("debug", module, f"--function={function}", *inputs, f"--commands={script}", "--json")
    assert proc.returncode == 0, proc.stderr
    return _stops(proc)


def test_break_diverge_judges_tensors_packed_into_a_readwrite_binding(tmp_path):
    """IREE binds a whole transient slab to each dispatch and concatenates in place (``slow_memcpy`` into a
    ``readwrite`` binding): the written and updated bindings are judged on the bytes each dispatch defined, as
    the type of what they hold, so llvm-cpu against vmvx (rounding apart) never stops, and a broken build
    stops at exactly its broken dispatch, whether it computes into the slab or copies into it."""
    source = PROGRAMS / "packed_concat.mlir"
    cpu = compile_for(source, tmp_path / "cpu.vmfb", "llvm-cpu")
    vmvx = compile_for(source, tmp_path / "vmvx.vmfb", "vmvx")
    inputs = _packed_inputs(tmp_path)
    # The program does pack: its concatenation copies update a binding that earlier dispatches wrote.
    bundle = tmp_path / "vmvx_bundle"
    cap = lens_in_process("capture", vmvx, "--function=main", *inputs, f"--out={bundle}")
    assert cap.returncode == 0, cap.stderr
    entries = json.loads((bundle / "manifest.json").read_text())["dispatches"]
    packed = [e["name"] for e in entries if "readwrite" in [b["access"] for b in e["bindings"]]]
    assert any(n.endswith("slow_memcpy") for n in packed), entries
    # The two targets round differently (not bit for bit), and agree within rounding: IREE's own runtime says
    # the results are close, and the lockstep finder calls no dispatch diverged.
    report = json.loads(lens_in_process("diverge", cpu, vmvx, "--function=main", *inputs, "--json").stdout)
    assert report["first_divergence"] is None and "within_rounding" in report["verdicts"], report
    for live, reference in ((cpu, vmvx), (vmvx, cpu), (cpu, bundle)):
        stops = _debug_packed(live, reference, inputs, tmp_path)
        assert [s["reason"] for s in stops] == ["finished"], (live.name, reference, stops)
    # Broken builds: exp -> tanh in the dispatch computing into the slab; the second copy of the
    # concatenation one column off. Each stops once, after exactly that dispatch.
    for executable, old, new, ordinal in (
        ("main_dispatch_1", "math.exp", "math.tanh", 1),
        ("main_dispatch_3", "offsets = [0, 24]", "offsets = [0, 23]", 3),
    ):
        broken = broken_build(source, tmp_path, "llvm-cpu", executable, old, new)
        stops = _debug_packed(broken, vmvx, inputs, tmp_path, stops=1)
        first = stops[0]
        assert first["reason"] == "dispatch" and first["dispatch"]["ordinal"] == ordinal, stops
        assert first["divergence"]["name"].startswith(executable + "_"), first
        assert first["divergence"]["mismatches"] > 0 and not first["divergence"]["note"], first
        # The dispatches before it were judged and agreed; it is the one diverged.
        verdicts = dict(first["divergence"]["verdicts"])
        assert sorted(verdicts) == list(range(ordinal + 1)) and verdicts[ordinal] == "diverged", verdicts
        assert all(v != "diverged" for o, v in verdicts.items() if o < ordinal), verdicts
        assert stops[-1]["reason"] == "finished", stops


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two compiles of the model and two debug runs on a loaded 2-core machine
def test_break_diverge_efficientvit_across_cpu_builds_does_not_stop(tmp_path):
    """The PyTorch EfficientViT-M0 export (336 dispatches, in-place concatenations into read-write slabs)
    built for the host CPU and for a generic x86-64 (other vector code: rounding apart) never stops; the gate
    that judged only write-only bindings stopped at dispatch 1 ('it wrote 0 bytes, the reference 2488192')."""
    source = shared_model("efficientvit_m0")
    host = model_cpu_build("efficientvit_m0", tmp_path / "host.vmfb").module
    generic = compile_for(source, tmp_path / "generic.vmfb", "llvm-cpu", "--iree-llvmcpu-target-cpu=generic")
    stops = _debug_packed(host, generic, [f"--input=@{MODELS / 'efficientvit_m0_x.npy'}"], tmp_path, "main")
    assert [s["reason"] for s in stops] == ["finished"], stops[0].get("divergence")


@pytest.mark.vulkan
def test_break_diverge_packed_binding_across_cpu_and_vulkan(tmp_path):
    """The packed program on llvm-cpu against its Vulkan build (lavapipe), both ways: a module reference runs
    on the device it was compiled for, and neither direction stops; a Vulkan build broken in dispatch 1 stops
    there."""
    source = PROGRAMS / "packed_concat.mlir"
    cpu = compile_for(source, tmp_path / "cpu.vmfb", "llvm-cpu")
    vk = compile_for(source, tmp_path / "vk.vmfb", "vulkan-spirv")
    inputs = _packed_inputs(tmp_path)
    assert [s["reason"] for s in _debug_packed(cpu, vk, inputs, tmp_path)] == ["finished"]
    assert [s["reason"] for s in _debug_packed(vk, cpu, [*inputs, "--device=vulkan"], tmp_path)] == ["finished"]
    broken = broken_build(source, tmp_path, "vulkan-spirv", "main_dispatch_1", "math.exp", "math.tanh")
    first = _debug_packed(broken, cpu, [*inputs, "--device=vulkan"], tmp_path, stops=1)[0]
    assert first["reason"] == "dispatch" and first["dispatch"]["ordinal"] == 1, first
    assert first["divergence"]["name"].startswith("main_dispatch_1_"), first


def test_break_diverge_does_not_stop_at_untyped_bytes_that_differ(tmp_path):
    """Two arguments copied into a result by ``slow_memcpy`` dispatches (IREE's name gives no element type,
    and the bytes they read are the call's arguments: of no type the run knows). Without the executables'
    sources such bytes that differ cannot be told rounding from error: the breakpoint judges them "bytes
    differ" and does not stop (the divergence finder names no such dispatch either). With ``--sources``
    the same dispatch is typed and stopped at."""
    from support import broken_build

    work = tmp_path / "work"
    work.mkdir()
    program = Path(shutil.copy(PROGRAMS / "concat_inner_arguments.mlir", work / "concat.mlir"))
    sources = tmp_path / "sources"
    good = compile_for(program, work / "good.vmfb", "llvm-cpu", f"--iree-hal-dump-executable-sources-to={sources}")
    bad = broken_build(program, work, "llvm-cpu", "main_dispatch_1", "offsets = [0, 24]", "offsets = [0, 23]")
    clean = tmp_path / "clean"
    clean.mkdir()
    good, bad = shutil.copy(good, clean / "good.vmfb"), shutil.copy(bad, clean / "bad.vmfb")
    shutil.rmtree(work)  # the program the modules' locations name is gone: nothing rebuilds the sources
    inputs = _packed_inputs(tmp_path)

    script = tmp_path / "commands.txt"
    script.write_text(f"break diverge {good}\ncontinue\n")
    proc = lens_in_process("debug", bad, "--function=main", *inputs, f"--commands={script}", "--json")
    stops = _stops(proc)
    assert [s["reason"] for s in stops] == ["finished"], stops[0].get("divergence")
    verdicts = {o: v for o, _name, v in stops[-1]["verdicts"]}
    assert verdicts == {0: "exact", 1: "bytes_differ"}, verdicts
    assert proc.returncode == 0 and "1 dispatches' outputs are bytes of no known element type" in proc.stderr
    assert "--sources" in proc.stderr

    script = tmp_path / "typed_commands.txt"
    script.write_text(f"break diverge {good}\ncontinue\ncontinue\n")
    proc = lens_in_process("debug", bad, "--function=main", *inputs, f"--commands={script}", "--json",
                           f"--sources={sources}")  # fmt: skip
    first = _stops(proc)[0]
    assert first["reason"] == "dispatch" and first["dispatch"]["ordinal"] == 1, first
    assert first["divergence"]["mismatches"] > 0 and "f32" in first["divergence"]["summary"], first


def test_break_diverge_against_traced_tensors_does_not_stop_at_a_binding_laid_out_otherwise(tmp_path):
    """A reference captured by IREE's runtime at trace points holds tensors; the live run, untyped, judges
    whole bindings. The padded copy's binding (3904 bytes) is larger than its traced tensor (3888): no
    evidence of a divergence, so not judged ("bytes differ", said apart with --sources as the remedy). It
    stopped there with 'it wrote 3904 bytes, the reference 3888'. A convolution made wrong still stops."""
    program = PROGRAMS / "padded_conv.mlir"
    inputs = ["--input=1x3x16x16xf32=0.5", "--input=4x3x3x3xf32=0.25"]
    traced = compile_for(program, tmp_path / "traced.vmfb", "llvm-cpu", "--iree-flow-trace-dispatch-tensors")
    bundle = tmp_path / "traced_bundle"
    cap = lens_in_process("capture", traced, "--function=main", *inputs, "--engine=reference", f"--out={bundle}")
    assert cap.returncode == 0, cap.stderr
    script = tmp_path / "commands.txt"
    script.write_text(f"break diverge {bundle}\ncontinue\n")
    # Untyped: built from a copy of the program that is gone, so no rebuild of its sources types the run.
    gone = tmp_path / "gone" / program.name
    gone.parent.mkdir()
    gone.write_text(program.read_text())
    good = compile_for(gone, tmp_path / "good.vmfb", "llvm-cpu")
    gone.unlink()
    proc = lens_in_process("debug", good, "--function=main", *inputs, f"--commands={script}", "--json")
    stops = _stops(proc)
    assert [s["reason"] for s in stops] == ["finished"], stops[0].get("divergence")
    verdicts = {o: v for o, _name, v in stops[-1]["verdicts"]}
    assert verdicts == {0: "bytes_differ", 1: "exact"}, verdicts
    assert "laid out otherwise than its tensors" in proc.stderr and "--sources" in proc.stderr
    # Where the program is there, the session rebuilds its sources before the run: the padded copy is judged.
    typed = compile_for(program, tmp_path / "typed.vmfb", "llvm-cpu")
    proc = lens_in_process("debug", typed, "--function=main", *inputs, f"--commands={script}", "--json")
    verdicts = {o: v for o, _name, v in _stops(proc)[-1]["verdicts"]}
    assert verdicts == {0: "exact", 1: "exact"}, verdicts

    wrong = broken_build(program, tmp_path, "llvm-cpu", "main_dispatch_1", "arith.addf", "arith.subf")
    proc = lens_in_process("debug", wrong, "--function=main", *inputs, f"--commands={script}", "--json")
    first = _stops(proc)[0]
    assert first["reason"] == "dispatch" and first["dispatch"]["ordinal"] == 1, first
    assert first["divergence"]["mismatches"] > 0, first
