"""llvm-cpu builds linked as system shared objects (``--iree-llvmcpu-link-embedded=false``, the build IREE's
docs give for perf, gdb and sanitizers: executable format ``system-elf-x86_64``) in the debug engine, as
the embedded-ELF default is: the module runs as IREE's runtime runs it, bit for bit; its dispatches stop
and their tensors are IREE's own traced tensors, typed by sources rebuilt with the same link mode (a rebuild
linked the default way would give other executables and leave them untyped); its workgroups step.

A held-out PyTorch-style program (``heldout_programs/se_resnet.mlir``: convolutions, a squeeze-excite block,
padded max-pool, concatenation), compiled here by the real iree-compile.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from support import iree_compile, iree_traced_tensors, lens_in_process, once_per_run, run_folder
from support.traced import TRACE, assert_bundle_equals_traced

from engine.compiler.targets import target_flags
from engine.dispatch.bundle import Bundle
from engine.runtime.vmfb.module import open_vmfb

PROGRAMS = Path(__file__).resolve().parent / "heldout_programs"
PROGRAM = PROGRAMS / "se_resnet.mlir"
INPUT = PROGRAMS / "se_resnet_x.npy"
SYSTEM_LINK = "--iree-llvmcpu-link-embedded=false"


def build(name: str, *flags: str) -> Path:
    out = run_folder() / "system-elf" / f"se_resnet.{name}.vmfb"

    def compile_it() -> None:
        # By its absolute path: the module's debug locations name it so, and a rebuild finds it.
        proc = iree_compile([str(PROGRAM), *target_flags("llvm-cpu"), SYSTEM_LINK, *flags, "-o", str(out)],
                            text=True, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]

    return once_per_run(out, compile_it)


@pytest.fixture(scope="module")
def plain() -> Path:
    return build("plain")


def test_the_build_holds_system_linked_libraries(plain):
    # The premise: iree-compile wrote system-elf libraries, not the embedded ones every other test runs.
    formats = {e.format for e in open_vmfb(plain).executables}
    assert formats == {"system-elf-x86_64"}


def test_it_runs_in_the_debug_engine_bit_for_bit_as_in_iree_runtime(plain, tmp_path):
    outputs = {}
    for engine in ("reference", "debug"):
        out = tmp_path / f"{engine}.npy"
        proc = lens_in_process("run", str(plain), "--function=main", f"--engine={engine}", f"--input=@{INPUT}",
                               f"--output=@{out}")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs[engine] = np.load(out)
    assert outputs["debug"].dtype == outputs["reference"].dtype
    assert outputs["debug"].tobytes() == outputs["reference"].tobytes()


def test_every_dispatch_has_iree_traced_tensors_typed_by_a_system_linked_rebuild(plain, tmp_path):
    traced = iree_traced_tensors(build("traced", TRACE), "main", [np.load(INPUT)])
    out = tmp_path / "bundle"
    # No sources beside the module: the capture rebuilds them from the program its locations name, and
    # uses them only when the rebuilt executables are byte for byte the module's.
    proc = lens_in_process("capture", str(plain), "--function=main", f"--input=@{INPUT}", f"--out={out}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "rebuilt" in proc.stderr, proc.stderr[-2000:]
    assert_bundle_equals_traced(Bundle(out), traced)


def test_a_workgroup_of_it_steps_statement_by_statement(plain):
    proc = lens_in_process("kernel", str(plain), "--function=main", f"--input=@{INPUT}", "--dispatch=0",
                           "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = [json.loads(line) for line in proc.stdout.splitlines()]
    # Statements at lines of the kernel's MLIR source, and the stores to bindings they made.
    assert any(re.search(r"\.mlir:\d+$", s["loc"]) for s in steps) and any("store" in s for s in steps)
    # The statements recorded are the module's kernel: every store it made to a binding is what ran.
    assert "not the module's" not in proc.stderr, proc.stderr[-2000:]


def test_a_sanitizer_build_is_refused_naming_the_flag():
    # --iree-llvmcpu-sanitize=address links kernels against ASan's runtime, which this process lacks (IREE's
    # runtime refuses them too: "compiled with ASAN support but the host runtime is not"): said with the flag.
    vmfb = build("asan", "--iree-llvmcpu-sanitize=address")
    proc = lens_in_process("run", str(vmfb), "--function=main", f"--input=@{INPUT}")
    assert proc.returncode != 0
    assert "built with --iree-llvmcpu-sanitize=address" in proc.stderr, proc.stderr[-2000:]
