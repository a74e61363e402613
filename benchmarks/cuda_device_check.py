"""Real models on an NVIDIA GPU through IREE's CUDA backend, both engines: IREE Lens's debug engine (our VM and
emulated HAL, ``engine.runtime.hal.cuda_hal_device`` on ``libcuda``) and IREE's runtime (its ``cuda``
driver), against each other, against IREE's llvm-cpu build and against PyTorch; ``iree-lens diverge``
llvm-cpu vs CUDA. The checks of issue 34, to run on a GPU machine:

    python benchmarks/cuda_device_check.py DIR [--models small_cnn,squeezenet1_1] [--repeat 3] [--diverge]
        [--build-from MODELS] [--json OUT.jsonl]

DIR as ``vulkan_device_check.py`` takes it (``MODEL.cuda.vmfb``, ``MODEL.cpu.vmfb``, ``MODEL_x.npy``,
``MODEL_torch_y.npy``; ``--build-from`` compiles a missing build with ``--iree-hal-target-device=cuda
--iree-cuda-target=sm_80``). It prints the CUDA devices the driver reports (name, compute capability,
memory), then per model: load and call times of both engines (first call, best of ``--repeat``), the debug
engine's result against the reference's (must be exact: the same PTX on the same GPU), both against the
llvm-cpu build and PyTorch (within rounding), the best-call ratio debug / reference (the issue asks for at
most 1.5), and with ``--diverge`` the lockstep run llvm-cpu vs CUDA (first divergence must be null).

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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path, help="folder of MODEL.cuda.vmfb, MODEL.cpu.vmfb, MODEL_x.npy")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--repeat", type=int, default=3, help="timed calls after the first, per engine")
    p.add_argument("--diverge", action="store_true", help="iree-lens diverge llvm-cpu vs CUDA per model")
    p.add_argument("--build-from", type=Path, default=None, help="compile missing .vmfb from MODELS/MODEL.mlir[.xz]")
    p.add_argument("--json", type=Path, default=None, help="append one JSON object a figure (needed for the ratio)")
    a = p.parse_args()
    json_path = a.json or a.dir / "cuda_device_check.jsonl"
    report = shared.Report(json_path)
    a.dir.mkdir(parents=True, exist_ok=True)
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
