"""What ``profile``, ``run`` and ``benchmark`` say about bad input before they run anything: ``profile`` a damaged
module with our reader's words (iree-run-module said 'rodata[0] external reference out of range'), a function
the module does not export with the ones it does, an --out folder that does not exist (it ran the program
first, then said '[Errno 2] No such file or directory'); ``run`` an --output folder that does not exist (a
traceback after the run); ``benchmark`` counts below 1 (--repetitions=0 printed '0 rounds' beside the one it
ran)."""

from __future__ import annotations

import json

import pytest
from support import SHARED_MODELS, compile_for, lens_in_process

from engine.samples import sample_path


def test_profile_refuses_a_damaged_module_a_missing_function_and_an_unwritable_out(tmp_path):
    module = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "llvm-cpu")
    data = module.read_bytes()
    truncated = tmp_path / "truncated.vmfb"
    truncated.write_bytes(data[: len(data) // 2])
    out = tmp_path / "p.json"
    damaged = lens_in_process("profile", truncated, "--function=main", "--input=2x16xf32=0.25", f"--out={out}")
    assert damaged.returncode == 1 and "truncated.vmfb" in damaged.stderr, damaged.stderr
    assert "iree-run-module" not in damaged.stderr and not out.exists()
    missing = lens_in_process("profile", module, "--function=nope", "--input=2x16xf32=0.25", f"--out={out}")
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"iree-lens profile: {module} exports no function 'nope' (it exports "), missing.stderr
    nowhere = tmp_path / "absent" / "p.json"
    unwritable = lens_in_process("profile", module, "--function=main", "--input=2x16xf32=0.25", f"--out={nowhere}")
    assert unwritable.returncode == 1
    assert unwritable.stderr.strip() == f"iree-lens profile: no folder {nowhere.parent} to write {nowhere} in"
    ran = lens_in_process("profile", module, "--function=main", "--input=2x16xf32=0.25", f"--out={out}")
    assert ran.returncode == 0 and out.exists(), ran.stderr


def test_run_refuses_an_output_folder_that_does_not_exist(tmp_path):
    module = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "llvm-cpu")
    nowhere = tmp_path / "absent" / "o.npy"
    proc = lens_in_process("run", module, "--function=main", "--input=2x16xf32=0.25", f"--output=@{nowhere}")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"iree-lens run: no folder {nowhere.parent} to write --output=@{nowhere} in"
    here = tmp_path / "o.npy"
    proc = lens_in_process("run", module, "--function=main", "--input=2x16xf32=0.25", f"--output=@{here}")
    assert proc.returncode == 0 and here.exists(), proc.stderr


def test_benchmark_refuses_counts_below_one(tmp_path):
    module = tmp_path / "never_opened.vmfb"
    for option in ("--repetitions=0", "--batch-size=0", "--samples=-1"):
        proc = lens_in_process("benchmark", module, "--function=main", "--dispatch=0", option)
        assert proc.returncode == 2
        assert proc.stderr.strip() == f"iree-lens benchmark: {option.split('=')[0]} must be at least 1"
    proc = lens_in_process("benchmark", module, "--function=main", "--dispatch=0", "--min-time=0")
    assert proc.returncode == 2 and proc.stderr.strip() == "iree-lens benchmark: --min-time must be above 0 seconds"


def test_zones_of_a_category_the_trace_does_not_hold_names_the_ones_it_does(tmp_path):
    """An empty table read as 'no time there'; --top=0 or below printed the header alone."""
    module = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "llvm-cpu")
    trace = tmp_path / "p.json"
    made = lens_in_process("profile", module, "--function=main", "--input=2x16xf32=0.25", f"--out={trace}")
    assert made.returncode == 0, made.stderr
    proc = lens_in_process("zones", trace, "--category=dispatches")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"iree-lens zones: no zones of category 'dispatches' in {trace}; its categories: ")
    assert "dispatch" in proc.stderr.rpartition(": ")[2].split(", ")
    assert lens_in_process("zones", trace, "--category=dispatch").returncode == 0
    top = lens_in_process("zones", trace, "--top=0")
    assert top.returncode == 2 and top.stderr.strip() == "iree-lens zones: --top must be at least 1"


def test_benchmark_names_the_against_build_its_trouble_is_in(tmp_path):
    """IREE's 'function not found in module' said of --against's module did not name it."""
    module = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "llvm-cpu")
    source = SHARED_MODELS / "small_cnn.mlir"
    if not source.exists():
        pytest.skip(f"{source} is absent")
    other = compile_for(source, tmp_path / "small_cnn.vmfb", "llvm-cpu")  # exports small_cnn, not main
    proc = lens_in_process("benchmark", module, "--function=main", "--input=2x16xf32=0.25", "--dispatch=0",
                           f"--against={other}", "--no-iree", "--no-roofline", "--repetitions=1", "--min-time=0.01")  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"iree-lens benchmark: --against {other}: "), proc.stderr


def test_a_profile_past_its_timeout_says_the_limit_given(tmp_path):
    """--timeout=0.05 read 'did not finish in 0 s'."""
    module = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "llvm-cpu")
    proc = lens_in_process("profile", module, "--function=main", "--input=2x16xf32=0.25", f"--out={tmp_path / 'p.json'}",
                           "--timeout=0.001")  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith("did not finish in 0.001 s"), proc.stderr


def test_benchmark_runs_a_build_on_the_device_it_was_compiled_for(tmp_path):
    """--device left out is the module's device, as run, profile and debug take it: a Vulkan build trapped
    with IREE's 'HAL device `__device_0` not found' and its whole target attribute on local-sync. A Vulkan
    --against for a CPU build is refused naming both."""
    cpu = compile_for(sample_path("mlp"), tmp_path / "mlp.vmfb", "llvm-cpu")
    vulkan = compile_for(sample_path("mlp"), tmp_path / "mlp_vulkan.vmfb", "vulkan-spirv")
    proc = lens_in_process("benchmark", cpu, "--function=main", "--input=2x16xf32=0.25", "--dispatch=0",
                           f"--against={vulkan}", "--no-iree", "--no-roofline")  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"iree-lens benchmark: --against {vulkan} does not run on local-sync, where A runs: "
                                   "both builds are timed on one device")  # fmt: skip
    from engine.runtime.hal.vulkan.loader import vulkan_available

    missing = vulkan_available()
    if missing is not None:
        pytest.skip(f"no Vulkan: {missing}")
    proc = lens_in_process("benchmark", vulkan, "--function=main", "--input=2x16xf32=0.25", "--dispatch=0",
                           "--no-iree", "--samples=2", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["device"] == "vulkan" and report["original"]["samples"] == 2
    # Beside IREE's own tool, the ratio of the medians is said, as on the CPU (it printed both times and no ratio).
    proc = lens_in_process("benchmark", vulkan, "--function=main", "--input=2x16xf32=0.25", "--dispatch=0",
                           "--repetitions=2", "--samples=2", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["agreement"] == pytest.approx(report["original"]["median_s"] / report["iree_original"]["median_s"])
