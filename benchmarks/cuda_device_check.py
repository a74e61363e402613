"""Real models on an NVIDIA GPU through IREE's CUDA backend, both engines: IREE Lens's debug engine (our VM and
emulated HAL, ``engine.runtime.hal.cuda_hal_device`` on ``libcuda``) and IREE's runtime (its ``cuda``
driver), against each other, against IREE's llvm-cpu build and against PyTorch; ``iree-lens diverge``
llvm-cpu vs CUDA. The checks of issue 34, to run on a GPU machine:

    python benchmarks/cuda_device_check.py DIR [--models small_cnn,squeezenet1_1] [--repeat 3] [--diverge]
        [--edit] [--zones] [--traced] [--timetravel N] [--build-from MODELS] [--stage-only] [--json OUT.jsonl]

DIR as ``vulkan_device_check.py`` takes it (``MODEL.cuda.vmfb``, ``MODEL.cpu.vmfb``, ``MODEL_x.npy``,
``MODEL_torch_y.npy``; ``--build-from`` compiles a missing build with ``--iree-hal-target-device=cuda
--iree-cuda-target=sm_80``). It prints the CUDA devices the driver reports (name, compute capability,
memory), then per model: load and call times of both engines (first call, best of ``--repeat``), the debug
engine's result against the reference's (must be exact: the same PTX on the same GPU), both against the
llvm-cpu build and PyTorch (within rounding), the best-call ratio debug / reference (the issue asks for at
most 1.5), and with ``--diverge`` the lockstep run llvm-cpu vs CUDA (first divergence must be null). ``--edit``
runs the module with its own linked PTX substituted (``--substitute=EXECUTABLE=FILE.ptx``, both engines: the
result must not change); ``--zones`` profiles a debug run (every dispatch a zone timed by CUDA events, none a
"batch share"); ``--traced`` stops at every dispatch of ``MODEL.cuda_traced.vmfb`` (a capture) and compares its
tensors with those IREE's runtime reports at the same build's trace points on the GPU (must be bit-identical);
``--timetravel N`` steps to dispatch N and back in a time-travel session on the GPU.

A GPU machine has no iree-compile: stage the builds here (``--stage-only --build-from ../shared/models``:
compiles ``cuda``, ``cuda_traced`` and ``cpu`` builds and copies the inputs; no device needed), download IREE's
runtime wheel for the machine's Python (3.12 on this workplace's GPU machines)::

    echo /.gpu/ >> .git/info/exclude
    .venv/bin/python benchmarks/cuda_device_check.py .gpu/models --stage-only --build-from ../shared/models
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 -d .gpu/whl iree-base-runtime==3.13.0 pyelftools==0.32

then run, carrying ``.gpu``, in one call::

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl &&
    export PYTHONPATH=/tmp/site; set -o pipefail; PYTHONUNBUFFERED=1 python3 benchmarks/cuda_device_check.py
    .gpu/models --diverge --edit --zones --traced --timetravel 3 --json $OUT/cuda.jsonl 2>&1 | tee $OUT/log

Without a CUDA driver it says so in one line and exits 2 (nothing was checked). NOT YET RUN ON A GPU: no
figures are recorded here.

Exit status 1 if any comparison that must agree diverged or the best-call ratio is above 1.5.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import vulkan_device_check as shared  # noqa: E402 - the same staging, runs, comparisons and report

DEFAULT_MODELS = ("small_cnn", "attention_block", "squeezenet1_1", "efficientvit_m0")
VARIANT = "cuda"
MAX_CALL_RATIO = 1.5  # the debug engine's best call against IREE's runtime's (issue 34)
# Models staged with a traced build too (--traced): small ones, so that the carried folder stays within a
# device call's 64 MiB with IREE's runtime wheel beside it.
TRACED_MODELS = ("small_cnn", "attention_block")


def describe_cuda_devices(report: shared.Report) -> str | None:
    """The devices the driver reports, or None (and the one sentence) when there is no driver."""
    from engine.errors import HalError
    from engine.runtime.hal.cuda.driver import list_cuda_devices

    try:
        devices = list_cuda_devices()
    except HalError as e:
        report.figure("skip", str(e))
        return None
    for d in devices:
        report.figure(
            "device",
            f"cuda://{d.index}: {d.name}, compute capability {d.compute_capability[0]}.{d.compute_capability[1]}, "
            f"{d.total_memory / 2**30:.1f} GiB, {d.multiprocessors} multiprocessors",
            name=d.name, sm=d.sm, memory=d.total_memory,
        )  # fmt: skip
    return devices[0].name if devices else None


def best_call_ratio(model: str, report: shared.Report, json_path: Path | None) -> None:
    """Debug / reference best call of the model's CUDA build, from the figures check_runs reported."""
    if json_path is None or not json_path.exists():
        return
    import json

    best = {}
    for line in json_path.read_text().splitlines():
        row = json.loads(line)
        if row.get("kind") == "time" and row.get("model") == model and row.get("variant") == VARIANT:
            best[row["engine"]] = row["best_s"]
    if {"debug", "reference"} <= best.keys() and best["reference"] > 0:
        ratio = best["debug"] / best["reference"]
        report.figure("ratio", f"{model}.{VARIANT}: best call debug / reference {ratio:.2f}", model=model, ratio=ratio)
        if ratio > MAX_CALL_RATIO:
            report.fail(f"{model}.{VARIANT}: the debug engine's best call is {ratio:.2f}x IREE's (over {MAX_CALL_RATIO})")


def check_ptx_edit(model: str, variant: str, folder: Path, device: str, report: shared.Report) -> None:
    """The module's own linked PTX put back with ``--substitute``: the same result on both engines."""
    import tempfile

    import numpy as np

    from engine.runtime.vmfb.module import open_vmfb
    from engine.substitute.documents import documents_from_module

    vmfb = folder / f"{model}.{variant}.vmfb"
    x = folder / f"{model}_x.npy"
    docs = [d for d in documents_from_module(open_vmfb(vmfb)) if d.kind == "ptx"]
    if not docs:
        report.fail(f"edit {model}.{variant}: the module offers no PTX")
        return
    with tempfile.TemporaryDirectory(prefix="lens-cuda-edit-") as tmp:
        ptx = Path(tmp) / f"{docs[0].name}.ptx"
        ptx.write_text(docs[0].original)
        for engine in ("debug", "reference"):
            outs = {}
            for label, extra in (("plain", ()), ("edited", (f"--substitute={docs[0].name}={ptx}",))):
                npy = Path(tmp) / f"{engine}-{label}.npy"
                proc, wall = shared.lens("run", str(vmfb), f"--function={shared.function_of(vmfb)}", "--device=cuda",
                                         f"--engine={engine}", f"--input=@{x}", f"--output=@{npy}", *extra)  # fmt: skip
                if proc.returncode != 0:
                    report.fail(f"edit {model}.{variant} {engine} {label}: exit {proc.returncode}: {proc.stderr[-2000:]}")
                    break
                outs[label] = (np.load(npy), wall)
            else:
                same = outs["edited"][0].tobytes() == outs["plain"][0].tobytes()
                report.figure(
                    "edit",
                    f"{model}.{variant} on {device}, {engine} engine, {docs[0].name} replaced by its own PTX: "
                    f"{outs['plain'][1]:.1f} s plain, {outs['edited'][1]:.1f} s edited; result "
                    f"{'bit-identical' if same else 'CHANGED'}",
                    model=model, engine=engine, identical=same,
                )  # fmt: skip
                if not same:
                    report.fail(f"edit {model}.{variant} {engine}: the unmodified PTX changed the result")


def check_traced(model: str, variant: str, folder: Path, device: str, report: shared.Report) -> None:
    """Every dispatch of the traced build stopped at by the debug engine on CUDA (a capture) against the
    tensors IREE's runtime reports at the same build's trace points on the same GPU: bit-identical."""
    import tempfile

    import numpy as np

    from engine.dispatch.bundle import Bundle
    from engine.dispatch.capture import capture_debug, capture_reference

    vmfb = folder / f"{model}.cuda_traced.vmfb"
    if not vmfb.exists():
        report.figure("skip", f"traced {model}: no {vmfb.name} (stage it with --stage-only --build-from)")
        return
    function, inputs = shared.function_of(vmfb), [f"@{folder / f'{model}_x.npy'}"]
    with tempfile.TemporaryDirectory(prefix="lens-cuda-traced-") as tmp:
        capture_debug(vmfb, function, inputs, Path(tmp) / "debug", device="cuda")
        capture_reference(vmfb, function, inputs, Path(tmp) / "iree", device="cuda")
        ours, theirs = Bundle(Path(tmp) / "debug"), Bundle(Path(tmp) / "iree")
        differ = []
        for a, b in zip(ours.dispatches, theirs.dispatches):
            for which in ("inputs", "outputs"):
                got, want = ours.dispatch_tensors(a, which), theirs.dispatch_tensors(b, which)
                if [np.asarray(t).tobytes() for t in got] != [np.asarray(t).tobytes() for t in want]:
                    differ.append(f"{a.ordinal} {a.name} {which}")
        counts = (len(ours.dispatches), len(theirs.dispatches))
    report.figure(
        "traced",
        f"{model}.cuda_traced on {device}: {counts[0]} dispatches stopped at, IREE traced {counts[1]}; "
        f"{len(differ)} differ" + (f", first {differ[0]}" if differ else " (every tensor bit-identical)"),
        model=model, dispatches=counts[0], iree_dispatches=counts[1], differing=differ[:20],
    )  # fmt: skip
    if differ or counts[0] != counts[1] or not counts[0]:
        report.fail(f"traced {model}: the stops' tensors are not IREE's ({len(differ)} differ, counts {counts})")


def check_zones(model: str, variant: str, folder: Path, device: str, report: shared.Report) -> None:
    """``iree-lens profile --engine=debug --device=cuda``: one zone per dispatch, timed by CUDA events."""
    import json
    import tempfile

    vmfb = folder / f"{model}.{variant}.vmfb"
    with tempfile.TemporaryDirectory(prefix="lens-cuda-zones-") as tmp:
        out = Path(tmp) / "trace.json"
        proc, wall = shared.lens("profile", str(vmfb), f"--function={shared.function_of(vmfb)}", "--engine=debug",
                                 "--device=cuda", f"--input=@{folder / f'{model}_x.npy'}", f"--out={out}")  # fmt: skip
        if proc.returncode != 0:
            report.fail(f"zones {model}.{variant}: exit {proc.returncode}: {proc.stderr[-2000:]}")
            return
        data = json.loads(out.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    dispatches = [e for e in events if e.get("cat") == "dispatch" and e.get("ph") == "X"]
    shared_time = [e for e in dispatches if (e.get("args") or {}).get("timing") == "batch share"]
    total_ms = sum(float(e.get("dur", 0)) for e in dispatches) / 1000
    report.figure(
        "zones",
        f"{model}.{variant} on {device}: {len(dispatches)} dispatch zones, {len(shared_time)} of them a batch "
        f"share, {total_ms:.2f} ms of dispatch time, profile run {wall:.1f} s",
        model=model, dispatches=len(dispatches), batch_share=len(shared_time), dispatch_ms=total_ms,
    )  # fmt: skip
    if not dispatches or shared_time:
        report.fail(f"zones {model}.{variant}: {len(shared_time)} of {len(dispatches)} zones not timed by CUDA events")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path, help="folder of MODEL.cuda.vmfb, MODEL.cpu.vmfb, MODEL_x.npy")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--repeat", type=int, default=3, help="timed calls after the first, per engine")
    p.add_argument("--diverge", action="store_true", help="iree-lens diverge llvm-cpu vs CUDA per model")
    p.add_argument("--edit", action="store_true", help="run each model with its own PTX substituted (both engines)")
    p.add_argument("--zones", action="store_true", help="profile a debug run: zones timed by CUDA events")
    p.add_argument("--timetravel", type=int, default=0, metavar="N", help="step to dispatch N and back (0: skip)")
    p.add_argument("--traced", action="store_true", help="every dispatch's tensors against IREE's trace points")
    p.add_argument("--stage-only", action="store_true", help="only build the models into DIR (no GPU needed)")
    p.add_argument("--build-from", type=Path, default=None, help="compile missing .vmfb from MODELS/MODEL.mlir[.xz]")
    p.add_argument("--json", type=Path, default=None, help="append one JSON object a figure (needed for the ratio)")
    a = p.parse_args()
    json_path = a.json or a.dir / "cuda_device_check.jsonl"
    report = shared.Report(json_path)
    a.dir.mkdir(parents=True, exist_ok=True)
    if a.stage_only:
        for model in [m for m in a.models.split(",") if m]:
            traced = [f"{VARIANT}_traced"] if model in TRACED_MODELS else []
            shared.stage_model(model, a.dir, a.build_from, [VARIANT, *traced, "cpu"], report)
            (a.dir / f"{model}.mlir").unlink(missing_ok=True)  # an unpacked .mlir.xz: not needed there
        return 0
    device = describe_cuda_devices(report)
    if device is None:
        print("nothing checked: no CUDA device here")
        return 2
    for model in [m for m in a.models.split(",") if m]:
        if not shared.stage_model(model, a.dir, a.build_from, [VARIANT, "cpu"], report):
            continue
        if not (a.dir / f"{model}.{VARIANT}.vmfb").exists():
            continue
        steps = [(shared.check_runs, (a.repeat,))] + ([(shared.check_diverge, ())] if a.diverge else [])
        steps += [(check_ptx_edit, ())] if a.edit else []
        steps += [(check_zones, ())] if a.zones else []
        steps += [(check_traced, ())] if a.traced else []
        steps += [(shared.check_timetravel, (a.timetravel,))] if a.timetravel else []
        for step, extra in steps:
            try:
                step(model, VARIANT, a.dir, *extra, device, report)
            except Exception as e:  # noqa: BLE001 - one model's failure must not hide the others' figures
                report.fail(f"{model}.{VARIANT}: {type(e).__name__}: {e}")
        best_call_ratio(model, report, json_path)
    print(f"{len(report.failures)} failure(s)" + ("" if not report.failures else ": " + "; ".join(report.failures)))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
