"""``iree-lens profile`` says what is wrong with its module or its --out before IREE's profiler runs: a damaged
module with our reader's words (iree-run-module said 'rodata[0] external reference out of range'), a function
the module does not export with the ones it does, an --out folder that does not exist (it ran the program
first, then said '[Errno 2] No such file or directory')."""

from __future__ import annotations

from support import compile_for, lens_in_process

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
