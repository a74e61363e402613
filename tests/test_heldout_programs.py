"""The held-out checks of issues 20, 21 and 23, run as a checker runs them, on programs no feature was built
on: PyTorch-style programs in the torch dialect as iree-turbine exports them (``heldout_programs/``, written
by ``make_programs.py``: a CNN with a depthwise conv, decomposed batch norm, avg-pool, rank-0 parameter and
argument and a rank-0 result; a reduction chain with an integer argmax; an MLP with a symbolic batch size;
a squeeze-excite residual block with a padded max-pool and a concatenation),
compiled here by the real iree-compile.

- ``iree-lens diverge A B --json`` with default options: no divergence for healthy builds across targets
  (the framework's outputs, computed by numpy, agree with both runs), and exactly the export name of a
  dispatch broken through IREE's own ``--iree-hal-substitute-executable-source``.
- ``iree-lens capture MODULE --sources=DIR`` (a plain build; the sources of a second compile): every
  dispatch's inputs and outputs equal IREE's traced tensors (``HalModuleDebugSink``) in shape, element type
  and bytes; rank-0 tensors stay rank 0.
- ``iree-lens debug --remote='<iree-lens> serve --stdio'``: the same stdout and saved tensors as locally.
- ``iree-lens dap``: stopOnEntry, next, stepBack, ``dispatch:NAME*``, readMemory holds IREE's traced inputs,
  exited 0 and terminated.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import (
    iree_compile,
    iree_tool,
    iree_traced_tensors,
    lens_argv,
    lens_env,
    once_per_run,
    run_folder,
)
from support.dap import DapClient

from engine.compiler.targets import target_flags
from engine.dispatch.bundle import Bundle

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).resolve().parent / "heldout_programs"
TRACE = "--iree-flow-trace-dispatch-tensors"
INPUTS = {
    "depthwise_cnn": ("depthwise_cnn_x.npy", "depthwise_cnn_temperature.npy"),
    "reduction_chain": ("reduction_chain_x.npy",),
    "dynamic_mlp": ("dynamic_mlp_x.npy",),
    "se_resnet": ("se_resnet_x.npy",),
    "masked_embedding": ("masked_embedding_ids.npy", "masked_embedding_mask.npy"),
}
SLOW = pytest.mark.slow


def lens(*args: str, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*lens_argv(), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=lens_env(), cwd=cwd)  # fmt: skip


def input_flags(program: str) -> list[str]:
    return [f"--input=@{PROGRAMS / name}" for name in INPUTS[program]]


def input_arrays(program: str) -> list[np.ndarray]:
    return [np.load(PROGRAMS / name) for name in INPUTS[program]]


class Builds:
    """Each (program, target, kind) compiled once per test run, on demand, in one folder that the parallel
    workers share (a lock per module: the second worker waits for the first's compile, dumps included)."""

    def __init__(self, root: Path):
        self.root = root

    def compile(self, program: str, target: str, *flags: str, name: str = "plain") -> Path:
        out = self.root / f"{program}.{target}.{name}.vmfb"

        def compile_it() -> None:
            proc = iree_compile([str(PROGRAMS / f"{program}.mlir"), *target_flags(target),
                                 *flags, "-o", str(out)], text=True, timeout=600)  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]

        return once_per_run(out, compile_it)

    def plain(self, program: str, target: str = "llvm-cpu") -> Path:
        return self.compile(program, target)

    def sources(self, program: str, target: str = "llvm-cpu") -> Path:
        dump = self.root / f"{program}.{target}.sources"
        self.compile(program, target, f"--iree-hal-dump-executable-sources-to={dump}", name="dump")  # once
        return dump

    def traced(self, program: str, target: str = "llvm-cpu") -> Path:
        return self.compile(program, target, TRACE, name="traced")

    def broken(self, program: str, target: str, executable: str, old: str, new: str) -> Path:
        """``executable``'s dumped source with one op changed, put back by IREE's own substitution. The
        dump refers to the program's dense_resource blobs without holding them: they are appended."""
        text = (self.sources(program, target) / f"module_{executable}.mlir").read_text()
        assert old in text, f"{old} not in {executable}"
        program_text = (PROGRAMS / f"{program}.mlir").read_text()
        blobs = program_text[program_text.index("{-#"):] if "{-#" in program_text else ""
        edited = self.root / f"{program}.{target}.{executable}.edited.mlir"
        part = edited.with_name(f"{edited.name}.{os.getpid()}")  # the same text from either worker, whole
        part.write_text(text.replace(old, new, 1) + "\n" + blobs)
        part.replace(edited)
        return self.compile(program, target, f"--iree-hal-substitute-executable-source={executable}={edited}",
                            name=f"broken_{executable}")  # fmt: skip


@pytest.fixture(scope="module")
def builds() -> Builds:
    return Builds(run_folder() / "heldout-builds")


def diverge(a: Path, b: Path, program: str, *extra: str) -> dict:
    proc = lens("diverge", a, b, "--function=main", *input_flags(program), "--json", *extra, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert proc.returncode == (report["first_divergence"] is not None)  # 1 exactly when a divergence is named
    return report


def golden(program: str) -> Path:
    """The framework's outputs (numpy, float64, computed by make_programs.py), in result order."""
    return PROGRAMS / f"{program}_expected.npz"


# ------------------------------------------------------------------------------------- diverge (20)


@pytest.mark.parametrize("program", ["reduction_chain", pytest.param("depthwise_cnn", marks=SLOW),
                                     pytest.param("dynamic_mlp", marks=SLOW), pytest.param("se_resnet", marks=SLOW),
                                     pytest.param("masked_embedding", marks=SLOW)])
def test_healthy_llvm_cpu_and_vmvx_builds_do_not_diverge(builds, program):
    report = diverge(builds.plain(program), builds.plain(program, "vmvx"), program,
                     f"--golden={golden(program)}")  # fmt: skip
    assert report["first_divergence"] is None, [d for d in report["dispatches"] if d["verdict"] == "diverged"]
    assert len(report["dispatches"]) >= 2
    # Both runs agree with the framework's outputs (numpy, float64) within rounding.
    outputs = len(np.load(golden(program)).files)
    assert sorted((g["run"], g["output"]) for g in report["golden"] if g["ok"]) == [
        (run, k) for run in "AB" for k in range(outputs)], report["golden"]


@pytest.mark.vulkan
@pytest.mark.parametrize("program", ["se_resnet", pytest.param("reduction_chain", marks=SLOW),
                                     pytest.param("dynamic_mlp", marks=SLOW)])
def test_healthy_llvm_cpu_and_vulkan_builds_do_not_diverge(builds, program):
    report = diverge(builds.plain(program), builds.plain(program, "vulkan-spirv"), program, f"--golden={golden(program)}")
    assert report["devices"][1].startswith("vulkan")
    assert report["first_divergence"] is None, [d for d in report["dispatches"] if d["verdict"] == "diverged"]
    assert all(g["ok"] for g in report["golden"]), report["golden"]


@pytest.mark.vulkan
@SLOW
@pytest.mark.parametrize(("program", "executable", "hazard"), [
    # IREE 3.13's default Vulkan target compiles the depthwise conv + batch norm into a 64-invocation kernel
    # that shares workgroup memory with no barrier: on lavapipe (subgroup 8) it is wrong.
    ("depthwise_cnn", "main$async_dispatch_2", True),
    # The i1 attention mask (10 bytes) counted by a Vulkan kernel: the last row's count comes out wrong.
    ("masked_embedding", "main$async_dispatch_0", False),
])
def test_builds_iree_gets_wrong_on_lavapipe_are_named(builds, tmp_path, program, executable, hazard):
    """IREE's own runtime gets these Vulkan builds wrong on lavapipe (checked against numpy's outputs): the
    finder names the dispatch where it happens, with the kernel's hazard where the binary shows one."""
    vulkan = builds.plain(program, "vulkan-spirv")
    expected = np.load(golden(program))
    outputs = [tmp_path / f"y{k}.npy" for k in range(len(expected.files))]
    proc = subprocess.run([iree_tool("iree-run-module"), f"--module={vulkan}", "--device=vulkan", "--function=main",
                           *input_flags(program), *(f"--output=@{o}" for o in outputs)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    wrong = np.abs(np.load(outputs[0]).astype(np.float64) - expected["arr_0"]).max()
    assert wrong > 1e-2  # IREE's runtime: wrong on this device
    report = diverge(builds.plain(program), vulkan, program)
    found = report["first_divergence"]
    assert found is not None and found["executable"] == executable, found
    assert found["inputs_agreed"]
    assert any("no barrier" in note for note in report["notes"]) == hazard, report["notes"]


BROKEN = [
    # (program, target of the broken build, executable, op, replacement, module A's target)
    ("reduction_chain", "llvm-cpu", "main$async_dispatch_3", "cmpf ogt", "cmpf olt", "llvm-cpu"),  # argmax -> argmin
    pytest.param("depthwise_cnn", "llvm-cpu", "main$async_dispatch_2", "arith.subf", "arith.addf", "vmvx", marks=SLOW),
    pytest.param("dynamic_mlp", "llvm-cpu", "main$async_dispatch_0", "math.tanh", "math.sin", "vmvx", marks=SLOW),
    pytest.param("reduction_chain", "vulkan-spirv", "main$async_dispatch_5", "arith.maximumf", "arith.minimumf",
                 "llvm-cpu", marks=[SLOW, pytest.mark.vulkan]),
    # The padded max-pool (-inf padding) made a min-pool; the squeeze-excite's sigmoid given exp2.
    pytest.param("se_resnet", "llvm-cpu", "main$async_dispatch_2", "arith.maximumf", "arith.minimumf", "vmvx",
                 marks=SLOW),
    pytest.param("se_resnet", "vulkan-spirv", "main$async_dispatch_9", "math.exp", "math.exp2", "llvm-cpu",
                 marks=[SLOW, pytest.mark.vulkan]),
]


@pytest.mark.parametrize(("program", "target", "executable", "old", "new", "against"), BROKEN)
def test_a_broken_dispatch_is_named_exactly(builds, program, target, executable, old, new, against):
    broken = builds.broken(program, target, executable, old, new)
    report = diverge(builds.plain(program, against), broken, program)
    found = report["first_divergence"]
    assert found is not None and found["executable"] == executable, (found, report["dispatches"])
    name = next(d["name"] for d in report["dispatches"] if d["ordinal"] == found["ordinal"])
    assert found["name"] == name and name.startswith(executable + "_")
    assert [d["name"] for d in report["dispatches"] if d["verdict"] == "diverged"] == [name]


# ------------------------------------------------------------------------------------- capture (23)


def traced_by_dispatch(traced) -> dict[tuple[str, int], tuple[list[np.ndarray], list[np.ndarray]]]:
    found: dict[tuple[str, str], list[list[np.ndarray]]] = {}
    for key, arrays in traced:
        head, _, kind = key.rpartition(" ")
        found.setdefault((head.split("::")[1], kind), []).append(arrays)
    return {(name, n): (ins, found[(name, "outputs")][n])
            for (name, kind), lists in found.items() if kind == "inputs" for n, ins in enumerate(lists)}  # fmt: skip


@pytest.mark.parametrize(("program", "target"), [
    ("dynamic_mlp", "llvm-cpu"), ("depthwise_cnn", "llvm-cpu"), ("masked_embedding", "llvm-cpu"),
    pytest.param("reduction_chain", "llvm-cpu", marks=SLOW), pytest.param("se_resnet", "llvm-cpu", marks=SLOW),
    pytest.param("se_resnet", "vulkan-spirv", marks=[SLOW, pytest.mark.vulkan]),
    pytest.param("dynamic_mlp", "vulkan-spirv", marks=[SLOW, pytest.mark.vulkan]),
])
def test_capture_with_sources_equals_iree_traced_tensors(builds, program, target, tmp_path):
    """dynamic_mlp: tensor<?x16xf32> sized by push constants, and a weight binding whose subspan IREE keeps
    ahead of the input's; depthwise_cnn: a rank-0 argument and a rank-0 result; masked_embedding: i1
    tensors in and out (stored as i8 bytes, traced as i1), si64 ids."""
    device = "vulkan" if target == "vulkan-spirv" else "local-sync"
    proc = lens("capture", builds.plain(program, target), f"--device={device}", "--function=main",
                *input_flags(program), f"--sources={builds.sources(program, target)}", f"--out={tmp_path / 'bundle'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    bundle = Bundle(tmp_path / "bundle")
    traced = iree_traced_tensors(builds.traced(program, target), "main", input_arrays(program), device=device)
    expected = traced_by_dispatch(traced)
    assert len(bundle.dispatches) == len(expected) >= 2
    seen: dict[str, int] = {}
    ranks = set()
    for d in bundle.dispatches:
        n = seen[d.name] = seen.get(d.name, -1) + 1
        assert d.tensors_from == "interface", (d.ordinal, d.name)
        for which, want in zip(("inputs", "outputs"), expected[(d.name, n)], strict=True):
            got = [np.asarray(g) for g in bundle.dispatch_tensors(d, which)]
            assert len(got) == len(want), (d.ordinal, d.name, which)
            for k, (g, w) in enumerate(zip(got, want, strict=True)):
                assert (g.shape, g.dtype) == (w.shape, w.dtype), (d.ordinal, d.name, which, k)
                assert g.tobytes() == w.tobytes(), (d.ordinal, d.name, which, k)
                ranks.add(g.ndim)
    if program == "depthwise_cnn":
        assert 0 in ranks  # the temperature and the logits' sum


# -------------------------------------------------------------------------------- debug --remote (21)

SCRIPT = """break dispatch 1
break dispatch *dispatch_3* after
continue
save-tensors {out}/a
info registers
step 3
next
continue
save-tensors {out}/b
reverse-step 2
reverse-continue
save-tensors {out}/c
continue
"""


REFERENCE_SCRIPT = "break dispatch *\ncontinue\nsave-tensors {out}/a\ncontinue\ncontinue\ncontinue\nsave-tensors {out}/b\n"


def run_debug(module: Path, program: str, out: Path, *extra: str, script: str = SCRIPT
              ) -> tuple[subprocess.CompletedProcess, dict]:  # fmt: skip
    out.mkdir(parents=True)
    commands = out / "commands.gdb"
    commands.write_text(script.format(out=out))
    proc = lens("debug", module, "--function=main", *input_flags(program), f"--commands={commands}", "--json",
                *extra, cwd=out)  # fmt: skip
    saved = {p.relative_to(out).as_posix(): np.load(p) for p in sorted(out.rglob("*.npy"))}
    return proc, saved


@pytest.mark.parametrize(("program", "engine"), [
    ("depthwise_cnn", "debug"),
    ("depthwise_cnn", "reference"),  # IREE's runtime given the rank-0 temperature (was passed as shape [1])
    pytest.param("dynamic_mlp", "debug", marks=SLOW),
    pytest.param("se_resnet", "debug", marks=SLOW),
    pytest.param("masked_embedding", "debug", marks=SLOW),
])
def test_debug_remote_prints_and_saves_what_a_local_run_does(builds, program, engine, tmp_path):
    if engine == "debug":
        module, script, extra = builds.plain(program), SCRIPT, [f"--sources={builds.sources(program)}"]
    else:
        module, script, extra = builds.traced(program), REFERENCE_SCRIPT, ["--engine=reference"]
    serve = shlex.join([*lens_argv(), "serve", "--stdio"])
    local = run_debug(module, program, tmp_path / "local", *extra, script=script)
    remote = run_debug(module, program, tmp_path / "remote", *extra, f"--remote={serve}", script=script)
    (proc_l, saved_l), (proc_r, saved_r) = local, remote
    assert proc_l.returncode == proc_r.returncode == 0, (proc_l.stderr, proc_r.stderr)
    assert proc_l.stdout.count('"reason"') >= 4 and '"failed"' not in proc_l.stdout, proc_l.stdout[-2000:]
    assert proc_r.stdout.replace(str(tmp_path / "remote"), "OUT") == proc_l.stdout.replace(str(tmp_path / "local"), "OUT")
    assert saved_l.keys() == saved_r.keys() and len(saved_l) >= 3
    for name, array in saved_l.items():
        assert (saved_r[name].shape, saved_r[name].dtype) == (array.shape, array.dtype), name
        assert saved_r[name].tobytes() == array.tobytes(), name


# ------------------------------------------------------------------------------------------- DAP (21)


@pytest.mark.parametrize("program", ["reduction_chain", pytest.param("depthwise_cnn", marks=SLOW),
                                     pytest.param("se_resnet", marks=SLOW), pytest.param("masked_embedding", marks=SLOW)])
def test_dap_held_out_path(builds, program):
    vmfb = builds.traced(program)
    traced = traced_by_dispatch(iree_traced_tensors(vmfb, "main", input_arrays(program)))
    names = sorted({n for n, _ in traced}, key=lambda n: int(n.split("_dispatch_")[1].split("_")[0]))
    name = names[min(2, len(names) - 1)]  # not the first: stepping reaches it through the others
    client = DapClient([*lens_argv(), "dap"])
    try:
        client.request("initialize", {"adapterID": "iree-lens", "clientID": "pytest", "pathFormat": "path"})
        client.request("launch", {"program": str(vmfb), "function": "main", "inputs": [f"@{PROGRAMS / n}" for n in INPUTS[program]],
                                  "device": "local-sync",
                                  "engine": "debug", "stopOnEntry": True})  # fmt: skip
        client.wait_event("initialized")
        assert client.request("setFunctionBreakpoints", {"breakpoints": [{"name": f"dispatch:{name[:-4]}*"}]}
                              )["body"]["breakpoints"][0]["verified"]  # fmt: skip
        client.request("configurationDone")
        assert client.stopped()["reason"] == "entry"
        entry = client.top_frame()["instructionPointerReference"]
        client.request("next", {"threadId": 1})
        assert client.stopped()["reason"] == "step" and client.top_frame()["instructionPointerReference"] != entry
        client.request("stepBack", {"threadId": 1})
        client.stopped()
        assert client.top_frame()["instructionPointerReference"] == entry
        client.request("continue", {"threadId": 1})
        assert client.stopped()["reason"] == "function breakpoint"
        frames = client.request("stackTrace", {"threadId": 1})["body"]["stackFrames"]
        assert name in frames[0]["name"]
        scopes = client.request("scopes", {"frameId": frames[0]["id"]})["body"]["scopes"]
        dispatch = next(s for s in scopes if s["name"] == "Dispatch")
        contents = []
        for variable in client.request("variables", {"variablesReference": dispatch["variablesReference"]})["body"]["variables"]:
            size = int(variable["value"].split(" bytes")[0].split()[-1])
            body = client.request("readMemory", {"memoryReference": variable["memoryReference"], "count": size})["body"]
            contents.append(base64.b64decode(body["data"]))
        for tensor in traced[(name, 0)][0]:
            assert any(tensor.tobytes() in data for data in contents), (tensor.shape, "in no binding")
        client.request("continue", {"threadId": 1})
        assert client.wait_event("exited")["body"]["exitCode"] == 0
        client.wait_event("terminated")
    finally:
        client.close()
