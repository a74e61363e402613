"""Real models on a Vulkan device, both engines: IREE Lens's debug engine (our VM and emulated HAL on the
``vulkan`` package) and IREE's runtime (``iree.runtime``, its ``vulkan`` driver), on the same physical device
(a GPU, or Mesa's lavapipe), against each other, against IREE's llvm-cpu build and against PyTorch.

    python benchmarks/vulkan_device_check.py DIR [--models small_cnn,squeezenet1_1] [--variants vulkan]
        [--repeat 3] [--diverge] [--substitute] [--timetravel N] [--build-from MODELS] [--json OUT.jsonl]

DIR holds, per model: ``MODEL.VARIANT.vmfb`` (``VARIANT`` starting with ``vulkan``: a Vulkan build, e.g.
``vulkan`` for IREE's default target, ``vulkan_sm80`` for ``--iree-vulkan-target=sm_80``, ``vulkan_sm80_bda``
with ``--iree-vulkan-dispatch-abi=bda`` too; ``cpu``: the
llvm-cpu build), ``MODEL.VARIANT.sources/`` (``--iree-hal-dump-executable-sources-to``: types the tensors),
``MODEL_x.npy`` (the input) and optionally ``MODEL_torch_y.npy`` (PyTorch's output). ``--build-from MODELS``:
a missing ``.vmfb`` is compiled from ``MODELS/MODEL.mlir`` (or ``.mlir.xz``) when ``iree.compiler`` imports;
``MODEL_x.npy``/``MODEL_torch_y.npy`` are taken from there too. Everything is read, nothing compiled, on a
machine that has only the runtime (a GPU box: compile on the host and carry DIR).

What it prints (text, and one JSON object a line with ``--json``):

* the Vulkan devices the ``vulkan`` package and IREE's runtime each see (name from the physical device
  properties, driver, API version, subgroup size);
* per model and Vulkan build: load and call times of both engines (first call, best of ``--repeat``), the
  debug engine's result against the reference's (``engine.dispatch.numerics``: exact / within rounding /
  diverged), each against the llvm-cpu build run by IREE's runtime on ``local-task`` and against PyTorch;
* per Vulkan build, the kernels that share workgroup memory or use subgroup operations with no barrier and
  how many span several subgroups of this device (``engine.dispatch.spirv_hazards``: right only where a
  workgroup is one subgroup);
* ``--diverge``: ``iree-lens diverge CPU.vmfb VULKAN.vmfb --input=@x --json`` (default options: lockstep,
  B fed A's inputs per dispatch, the rounding rule), its wall time, dispatches compared and first divergence;
* ``--substitute``: ``iree-lens run --substitute EXPORT=FILE.spv`` on both engines with the unmodified
  SPIR-V of the model's first convolution (else matmul) kernel (taken from the module itself: no compiler needed), against the
  run without it;
* ``--timetravel N``: Previous Dispatch (dispatch N to N-1 inside one command buffer) in a time-travel
  session on Vulkan, with the dispatch memo and without.

Measured on an NVIDIA H100 80GB HBM3 (Vulkan 1.4.312, driver 580.159.04, subgroup 32; llvm-cpu on the same
box's 16-core Xeon), builds for ``--iree-vulkan-target=sm_80`` (descriptor and BDA ABI): on all four models
the debug engine's result equals IREE's runtime's bit for bit and both are within rounding of PyTorch
(SqueezeNet max abs 4.2e-7, SQNR 134 dB); best call, reference / debug: small_cnn 3.7 / 7.0 ms,
attention_block 3.8 / 2.7 ms, SqueezeNet 11.4 / 94.5 ms, efficientvit_m0 51 / 692 ms; ``iree-lens diverge``
llvm-cpu vs H100 with default options, first_divergence null: small_cnn 1.7 s, attention_block 1.4 s,
SqueezeNet 5.1-6.3 s (about 14 min on lavapipe), efficientvit_m0 9.4-14.4 s (336 dispatches); Previous
Dispatch 4 -> 3 10-75 ms (no kernel reaches the dispatch memo's 0.05 s there, so it keeps nothing);
substitution of a convolution's own SPIR-V: exact on both engines. IREE's default Vulkan target on the H100:
SqueezeNet wrong and different on every call in both engines (SQNR -8.8 dB vs PyTorch; diverge: dispatch 0),
efficientvit_m0 one element off in a different 5x5 convolution per run (see ``engine.dispatch.spirv_hazards``).
On lavapipe (subgroup 8) the default-target builds are right and the sm_80 builds of small_cnn and
attention_block wrong in both engines alike (subgroup reductions over 32 invocations).

Exit status 1 if any comparison that must agree diverged (debug vs reference, either against llvm-cpu or
PyTorch, a result changing from call to call, diverge's first divergence, a substitution changing the result).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.dispatch.numerics import compare  # noqa: E402
from engine.runtime.function_io import Tensor  # noqa: E402

DEFAULT_MODELS = ("small_cnn", "attention_block", "squeezenet1_1", "efficientvit_m0")
VARIANT_FLAGS = {
    "vulkan": ("--iree-hal-target-device=vulkan",),
    "vulkan_sm80": ("--iree-hal-target-device=vulkan", "--iree-vulkan-target=sm_80"),
    # IREE's buffer-device-address dispatch ABI: bindings reached through 64-bit addresses, not descriptors.
    "vulkan_sm80_bda": (
        "--iree-hal-target-device=vulkan", "--iree-vulkan-target=sm_80", "--iree-vulkan-dispatch-abi=bda",
    ),
    # IREE's CUDA target (benchmarks/cuda_device_check.py): sm_90 fails in iree-compile 3.13, sm_80 runs on Hopper.
    "cuda": ("--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"),
    # The same with IREE's trace points around each dispatch (its runtime then reports every dispatch's tensors).
    "cuda_traced": ("--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80", "--iree-flow-trace-dispatch-tensors"),
    "cpu": (
        "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=llvm-cpu",
        "--iree-llvmcpu-target-cpu=x86-64-v3",  # runs on any AVX2 host, the one that compiled it or not
    ),
}


SUBGROUP_SIZE: dict[str, int] = {}  # device name -> its subgroup size (0: not reported)


@dataclass
class Report:
    json_path: Path | None
    failures: list[str] = field(default_factory=list)

    def figure(self, kind: str, text: str, **data) -> None:
        print(f"[{kind}] {text}", flush=True)
        if self.json_path is not None:
            with self.json_path.open("a") as f:
                f.write(json.dumps({"kind": kind, "text": text, **data}, default=str) + "\n")

    def fail(self, what: str) -> None:
        self.failures.append(what)
        self.figure("FAIL", what)


# ------------------------------------------------------------------------------------------- devices


def describe_devices(report: Report) -> str:
    """The devices each side sees; returns the name of the one the debug engine's ``vulkan`` opens."""
    from engine.runtime.hal.vulkan import VulkanDevice, list_physical_devices

    for info in list_physical_devices():
        v = info.driver_version
        # NVIDIA packs its driver version 10.8.8.6 bits; other vendors use VK_MAKE_VERSION's 10.10.12.
        if info.vendor_id == 0x10DE:
            driver = f"{v >> 22}.{(v >> 14) & 0xFF}.{(v >> 6) & 0xFF:02d}"
        else:
            driver = f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"
        report.figure(
            "device",
            f"vulkan package: #{info.index} {info.name} ({info.device_type}), API {info.api_version}, "
            f"driver {driver} (raw {v:#x}), subgroup {info.subgroup_size}, "
            f"{len(info.extensions)} extensions",
            name=info.name, device_type=info.device_type, api=info.api_version, driver_raw=v,
            subgroup=info.subgroup_size, vendor=info.vendor_id,
            cooperative_matrix="VK_KHR_cooperative_matrix" in info.extensions,
        )  # fmt: skip
    with VulkanDevice() as opened:
        chosen = opened.info.name
        SUBGROUP_SIZE[chosen] = opened.info.subgroup_size
    import iree.runtime as rt

    for d in rt.get_driver("vulkan").query_available_devices():
        report.figure("device", f"iree.runtime vulkan driver: {d}", iree_device=str(d))
    report.figure("device", f"the debug engine's 'vulkan' opens: {chosen}", chosen=chosen)
    return chosen


# ------------------------------------------------------------------------------------------- inputs


def stage_model(model: str, folder: Path, build_from: Path | None, variants: list[str], report: Report) -> bool:
    """Copies the model's input and PyTorch output into ``folder`` and builds missing .vmfb when it can."""
    if build_from is not None:
        for name in (f"{model}_x.npy", f"{model}_torch_y.npy"):
            if (build_from / name).exists() and not (folder / name).exists():
                shutil.copy(build_from / name, folder / name)
    if not (folder / f"{model}_x.npy").exists():
        report.figure("skip", f"{model}: no {model}_x.npy in {folder}")
        return False
    for variant in variants:
        vmfb = folder / f"{model}.{variant}.vmfb"
        if vmfb.exists():
            continue
        if build_from is None:
            report.figure("skip", f"{model}.{variant}: no {vmfb.name} and no --build-from")
            continue
        try:
            from iree.compiler.tools.binaries import find_tool
        except ImportError:
            report.figure("skip", f"{model}.{variant}: no {vmfb.name} and iree.compiler is not installed")
            continue
        source = build_from / f"{model}.mlir"
        if not source.exists() and (build_from / f"{model}.mlir.xz").exists():
            source = folder / f"{model}.mlir"
            with lzma.open(build_from / f"{model}.mlir.xz") as f, source.open("wb") as g:
                shutil.copyfileobj(f, g)
        start = time.perf_counter()
        subprocess.run(
            [find_tool("iree-compile"), str(source), *VARIANT_FLAGS[variant],
             f"--iree-hal-dump-executable-sources-to={folder / f'{model}.{variant}.sources'}", "-o", str(vmfb)],
            check=True, stdout=subprocess.DEVNULL,  # a traced build's constant evaluation prints its tensors
        )  # fmt: skip
        report.figure("build", f"{vmfb.name}: compiled in {time.perf_counter() - start:.1f} s")
    return True


def function_of(vmfb: Path) -> str:
    from engine.runtime.vmfb.module import open_vmfb

    names = [e.name for e in open_vmfb(vmfb).exports if not e.name.endswith("$async") and not e.name.startswith("__")]
    return names[0] if len(names) == 1 else "main"


# ------------------------------------------------------------------------------------------- runs


def timed_calls(runner, function: str, args: list, repeat: int) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(first call, best of ``repeat`` later calls, first result's array, last result's array)."""
    start = time.perf_counter()
    result = runner.invoke(function, args)
    first = time.perf_counter() - start
    best, last = float("inf"), result
    for _ in range(repeat):
        start = time.perf_counter()
        last = runner.invoke(function, args)
        best = min(best, time.perf_counter() - start)
    return first, best, np.asarray(result[0].array), np.asarray(last[0].array)


def check_workgroup_memory(vmfb: Path, subgroup_size: int, tag: str, report: Report) -> None:
    """How many kernels share workgroup memory or use subgroup operations with no barrier, and how many of
    those span several subgroups of this device (``engine.dispatch.spirv_hazards``)."""
    from engine.dispatch.spirv_hazards import unsynchronised_workgroups
    from engine.runtime.vmfb.module import open_vmfb
    from engine.runtime.vmfb.vke1 import read_vke1

    found, modules = [], 0
    for exe in open_vmfb(vmfb).executables:
        if exe.format.startswith("vulkan-spirv"):
            for module in read_vke1(bytes(exe.data)).shader_modules:
                modules += 1
                found += unsynchronised_workgroups(module.spirv)
    spanning = [f for f in found if f.spans_subgroups(subgroup_size)]
    report.figure(
        "spirv",
        f"{tag}: {len(found)} of {modules} kernels share workgroup memory or use subgroup operations with no "
        f"barrier (right only where a workgroup is one subgroup); {len(spanning)} of them span several subgroups "
        f"of {subgroup_size}" + (f", e.g. {spanning[0].describe(subgroup_size)}" if spanning else ""),
        kernels=modules, unsynchronised=len(found), spanning=[f.entry_point for f in spanning],
    )  # fmt: skip


def check_runs(model: str, variant: str, folder: Path, repeat: int, device: str, report: Report) -> dict:
    from engine.runtime.debug_runner import DebugRunner
    from engine.runtime.reference import ReferenceRunner

    vmfb = folder / f"{model}.{variant}.vmfb"
    check_workgroup_memory(vmfb, SUBGROUP_SIZE.get(device, 0), f"{model}.{variant} on {device}", report)
    function = function_of(vmfb)
    x = np.load(folder / f"{model}_x.npy")
    args = [Tensor.from_numpy(x)]
    out: dict[str, np.ndarray] = {}
    tag = f"{model}.{variant} on {device}"
    for engine, make in (("reference", ReferenceRunner), ("debug", DebugRunner)):
        start = time.perf_counter()
        runner = make(vmfb, "cuda" if variant.startswith("cuda") else "vulkan")
        load = time.perf_counter() - start
        first, best, out[engine], again = timed_calls(runner, function, args, repeat)
        # The same engine, module, input and device twice: anything but bit-equal is a kernel whose result
        # depends on scheduling (a race), which no comparison between engines can be judged against.
        c = compare(again, out[engine])
        report.figure("repeat", f"{tag}: {engine} engine, last call vs first: {c.summary()}", model=model,
                      variant=variant, device=device, engine=engine, **c.to_json())  # fmt: skip
        if repeat and c.verdict != "exact":
            report.fail(f"{tag}: the {engine} engine's result changes from call to call on the same device")
        report.figure(
            "time",
            f"{tag}: {engine:9} load {load:7.3f} s, first call {first:8.3f} s, best of {repeat} {best:8.4f} s",
            model=model, variant=variant, device=device, engine=engine, load_s=load, first_s=first, best_s=best,
        )  # fmt: skip
        del runner
    c = compare(out["debug"], out["reference"])
    report.figure("compare", f"{tag}: debug vs reference: {c.summary()}", model=model, variant=variant,
                  device=device, pair="debug-reference", **c.to_json())  # fmt: skip
    if not c.ok:
        report.fail(f"{tag}: the debug engine's result diverged from IREE's runtime on the same device")
    cpu = folder / f"{model}.cpu.vmfb"
    if cpu.exists():
        reference = ReferenceRunner(cpu, "local-task")
        out["cpu"] = np.asarray(reference.invoke(function_of(cpu), args)[0].array)
        for engine in ("reference", "debug"):
            c = compare(out[engine], out["cpu"])
            report.figure("compare", f"{tag}: {engine} vs llvm-cpu (iree.runtime local-task): {c.summary()}",
                          model=model, variant=variant, device=device, pair=f"{engine}-cpu", **c.to_json())  # fmt: skip
            if not c.ok:
                report.fail(f"{tag}: the {engine} engine's result diverged from IREE's llvm-cpu build")
    torch_y = folder / f"{model}_torch_y.npy"
    if torch_y.exists():
        want = np.load(torch_y)
        for engine in ("reference", "debug", "cpu"):
            if engine in out:
                c = compare(out[engine], want)
                report.figure("compare", f"{tag}: {engine} vs PyTorch: {c.summary()}", model=model,
                              variant=variant, device=device, pair=f"{engine}-torch", **c.to_json())  # fmt: skip
                if not c.ok:
                    report.fail(f"{tag}: the {engine} result diverged from PyTorch's")
    return out


# ------------------------------------------------------------------------------------------- the CLI


def lens(*argv: str, timeout: float | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """``iree-lens ARGV`` as a user runs it (a separate process, no Qt), and its wall time."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "app.launcher", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip
    return proc, time.perf_counter() - start


def check_diverge(model: str, variant: str, folder: Path, device: str, report: Report) -> None:
    cpu, vk = folder / f"{model}.cpu.vmfb", folder / f"{model}.{variant}.vmfb"
    if not cpu.exists():
        report.figure("skip", f"diverge {model}: no {cpu.name}")
        return
    proc, wall = lens("diverge", str(cpu), str(vk), f"--input=@{folder / f'{model}_x.npy'}", "--json")
    tag = f"diverge {model}.cpu (local-sync) vs {model}.{variant} ({device})"
    if proc.returncode not in (0, 1):  # 1: a divergence named (failed below, with its dispatch)
        report.fail(f"{tag}: exit {proc.returncode}: {proc.stderr[-2000:]}")
        return
    obj = json.loads(proc.stdout.strip().splitlines()[-1])
    outputs = "; ".join(f"{o['verdict']} max abs {o['max_abs_error']}" for o in obj["outputs"])
    report.figure(
        "diverge",
        f"{tag}: {wall:.1f} s, {obj['dispatches_compared']} dispatches {obj['verdicts']}, "
        f"first_divergence {json.dumps(obj['first_divergence'])}; program output B vs A: {outputs}",
        model=model, variant=variant, device=device, wall_s=wall, dispatches=obj["dispatches_compared"],
        verdicts=obj["verdicts"], first_divergence=obj["first_divergence"], notes=obj["notes"],
    )  # fmt: skip
    if obj["first_divergence"] is not None:
        report.fail(f"{tag}: first divergence at dispatch {obj['first_divergence'].get('ordinal')}")


def first_spirv(vmfb: Path, into: Path) -> tuple[str, Path]:
    """(export name, .spv file) of the module's first convolution (else matmul, else any) Vulkan kernel, its
    SPIR-V unchanged."""
    from engine.runtime.vmfb.module import open_vmfb
    from engine.runtime.vmfb.vke1 import read_vke1

    module = open_vmfb(vmfb)
    pipelines = [
        (definition, pipeline)
        for exe in module.executables
        if exe.format.startswith("vulkan-spirv")
        for definition in [read_vke1(bytes(exe.data))]
        for pipeline in definition.pipelines
    ]
    # A kernel that computes (a convolution or a matmul) rather than a copy, where the module has one.
    rank = ("conv", "matmul", "generic")
    definition, pipeline = min(
        pipelines, key=lambda dp: next((i for i, w in enumerate(rank) if w in dp[1].entry_point), len(rank))
    )
    path = into / f"{pipeline.entry_point}.spv"
    path.write_bytes(definition.shader_modules[pipeline.shader_module_ordinal].spirv.tobytes())
    return pipeline.entry_point, path


def check_substitute(model: str, variant: str, folder: Path, device: str, report: Report) -> None:
    vmfb = folder / f"{model}.{variant}.vmfb"
    x = folder / f"{model}_x.npy"
    with tempfile.TemporaryDirectory(prefix="lens-vk-sub-") as tmp:
        export, spv = first_spirv(vmfb, Path(tmp))
        for engine in ("debug", "reference"):
            outs = {}
            for label, extra in (("plain", ()), ("substituted", (f"--substitute={export}={spv}",))):
                npy = Path(tmp) / f"{engine}-{label}.npy"
                proc, wall = lens("run", str(vmfb), f"--function={function_of(vmfb)}", "--device=vulkan",
                                  f"--engine={engine}", f"--input=@{x}", f"--output=@{npy}", *extra)  # fmt: skip
                if proc.returncode != 0:
                    report.fail(f"substitute {model}.{variant} {engine} {label}: exit {proc.returncode}: "
                                f"{proc.stderr[-2000:]}")  # fmt: skip
                    break
                outs[label] = (np.load(npy), wall)
            else:
                c = compare(outs["substituted"][0], outs["plain"][0])
                report.figure(
                    "substitute",
                    f"{model}.{variant} on {device}, {engine} engine, {export} replaced by its own SPIR-V: "
                    f"{outs['plain'][1]:.1f} s plain, {outs['substituted'][1]:.1f} s substituted; result {c.summary()}",
                    model=model, variant=variant, device=device, engine=engine, export=export, verdict=str(c.verdict),
                )  # fmt: skip
                if c.verdict != "exact":
                    report.fail(f"substitute {model}.{variant} {engine}: the unmodified SPIR-V changed the result")


def check_timetravel(model: str, variant: str, folder: Path, dispatch: int, device: str, report: Report) -> None:
    from engine.session.protocol import Call, Failed, Open, Step, Stopped, TravelTo
    from engine.session.timetravel_session import TimeTravelSession

    vmfb = folder / f"{model}.{variant}.vmfb"
    for memo_on in (True, False):
        events: list = []
        session = TimeTravelSession(events.append)

        def send(command, events=events, session=session):
            events.clear()
            session.handle(command)
            failed = [e for e in events if isinstance(e, Failed)]
            if failed:
                raise RuntimeError(f"{command}: {failed}")
            return events[-1]

        try:
            send(Open(str(vmfb), "cuda" if variant.startswith("cuda") else "vulkan"))
            memo = session.travel.memo
            if not memo_on:
                memo.min_seconds = float("inf")
            send(Call(function_of(vmfb), (f"@{folder / f'{model}_x.npy'}",), True))
            start = time.perf_counter()
            for _ in range(dispatch + 1):
                stop = send(Step("dispatch"))
            forward = time.perf_counter() - start
            if not (isinstance(stop, Stopped) and stop.location.dispatch_info.ordinal == dispatch):
                raise RuntimeError(f"Next Dispatch x{dispatch + 1} stopped at {stop}")
            run, written = memo.kernels_run, memo.kernels_written
            start = time.perf_counter()
            stop = send(TravelTo(dispatch=dispatch - 1, park=True))
            travel = time.perf_counter() - start
            where = stop.location.dispatch_info.ordinal
        except RuntimeError as e:
            report.fail(f"time travel {model}.{variant} on {device}: {e}")
            return
        finally:
            close = getattr(session, "close", None)
            if callable(close):
                close()
        report.figure(
            "timetravel",
            f"{model}.{variant} on {device}, memo {'on' if memo_on else 'off'}: forward to dispatch {dispatch} "
            f"{forward:.2f} s (kept {len(memo.kept)} dispatches, {memo.nbytes / 1e6:.1f} MB); Previous Dispatch "
            f"{dispatch} -> {where}: {travel:.3f} s, kernels run {memo.kernels_run - run}, written from the memo "
            f"{memo.kernels_written - written}",
            model=model, variant=variant, device=device, memo=memo_on, forward_s=forward, travel_s=travel,
            arrived=where, kernels_run=memo.kernels_run - run, kernels_written=memo.kernels_written - written,
        )  # fmt: skip
        if where != dispatch - 1:
            report.fail(f"time travel {model}.{variant}: Previous Dispatch arrived at {where}, not {dispatch - 1}")


# ------------------------------------------------------------------------------------------- main


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path, help="folder of MODEL.VARIANT.vmfb, MODEL_x.npy (see above)")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--variants", default="vulkan", help="comma-separated Vulkan builds to check (vulkan, vulkan_sm80)")
    p.add_argument("--repeat", type=int, default=3, help="timed calls after the first, per engine")
    p.add_argument("--diverge", action="store_true", help="iree-lens diverge llvm-cpu vs Vulkan per model")
    p.add_argument("--substitute", action="store_true", help="run --substitute with unmodified SPIR-V per model")
    p.add_argument("--timetravel", type=int, default=None, metavar="N", help="Previous Dispatch N -> N-1 per model")
    p.add_argument("--no-runs", action="store_true", help="skip the engine-against-engine runs")
    p.add_argument("--build-from", type=Path, default=None, help="compile missing .vmfb from MODELS/MODEL.mlir[.xz]")
    p.add_argument("--json", type=Path, default=None, help="also append one JSON object a figure to this file")
    a = p.parse_args()
    report = Report(a.json)
    a.dir.mkdir(parents=True, exist_ok=True)
    device = describe_devices(report)
    variants = [v for v in a.variants.split(",") if v]
    for model in [m for m in a.models.split(",") if m]:
        if not stage_model(model, a.dir, a.build_from, [*variants, "cpu"], report):
            continue
        for variant in variants:
            if not (a.dir / f"{model}.{variant}.vmfb").exists():
                continue
            steps = []
            if not a.no_runs:
                steps.append((check_runs, (a.repeat,)))
            if a.diverge:
                steps.append((check_diverge, ()))
            if a.substitute:
                steps.append((check_substitute, ()))
            if a.timetravel is not None:
                steps.append((check_timetravel, (a.timetravel,)))
            for step, extra in steps:
                try:
                    step(model, variant, a.dir, *extra, device, report)
                except Exception as e:  # noqa: BLE001 - one model's failure must not hide the others' figures
                    report.fail(f"{model}.{variant}: {type(e).__name__}: {e}")
    print(f"{len(report.failures)} failure(s)" + ("" if not report.failures else ": " + "; ".join(report.failures)))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
