"""Self-contained executable sources (``iree-lens sources``) substituted back with ``iree-lens run --substitute``.

Each written file, unmodified, must rebuild the same kernel: a run with every executable substituted gives the
plain run's outputs bit for bit on both engines; an edited op changes them exactly as IREE's own build of the
same edit (``iree-compile --iree-hal-substitute-executable-source``) does.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import (
    TARGET_FLAGS,
    compile_for,
    iree_compile,
    lens_run,
    model_lens_sources,
    shared_model,
    tiny_program,
)

from engine.compiler.executables import extract_executables, split_snapshot

MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"


def _lens(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.launcher", *args], capture_output=True, text=True, timeout=timeout
    )


def _model(name: str, tmp: Path) -> Path:
    return shared_model(name)


def _write_sources(program: Path, out: Path) -> tuple[Path, list[Path]]:
    proc = _lens("sources", str(program), f"--out={out}")
    assert proc.returncode == 0, proc.stderr
    written = [Path(line) for line in proc.stdout.split()]
    vmfb = next(p for p in written if p.suffix == ".vmfb")
    return vmfb, sorted(p for p in written if p.suffix == ".mlir")


def _run(vmfb: Path, function: str, x: Path, out: Path, engine: str, sources=()) -> np.ndarray:
    subs = [f"--substitute={p.stem}={p}" for p in sources]
    proc = lens_run(vmfb, function, [f"@{x}"], engine, *subs, f"--output=@{out}", timeout=900)
    assert proc.returncode == 0, proc.stderr
    return np.load(out)


def _iree_build(program: Path, edits: dict[str, Path], out: Path) -> Path:
    flags = [f"--iree-hal-substitute-executable-source={name}={path}" for name, path in edits.items()]
    iree_compile(
        [str(program), *TARGET_FLAGS["cpu"], *flags, "-o", str(out)],
        check=True, timeout=900,
    )  # fmt: skip
    return out


def _edit_first(path: Path, pattern: str, replacement: str, out: Path) -> Path:
    edited, n = re.subn(pattern, replacement, path.read_text(), count=1)
    assert n == 1, f"{pattern} not in {path}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(edited)
    return out


# -- cutting a phase snapshot ---------------------------------------------------------------------------

SNAPSHOT = """#composite_of_64b = #util.composite<64xi8, [
    dense_resource<host_a> : tensor<8xf32>,
    dense_resource<host_b> : tensor<8xf32>,
]>
#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0) -> (d0 * 2)>
#pipeline_layout = #hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer>]>
module @m {
  util.global private @c = #composite_of_64b
  hal.executable private @main_dispatch_0 {
    hal.executable.variant public @v target(<"llvm-cpu", "embedded-elf-x86_64">) {
      hal.executable.export public @main_dispatch_0_f32 ordinal(0) layout(#pipeline_layout) count(%arg0: !hal.device) -> (index, index, index) {
        %x, %y, %z = iree_tensor_ext.dispatch.workgroup_count_from_slice()
        hal.return %x, %y, %z : index, index, index
      }
      builtin.module {
        func.func @main_dispatch_0_f32() {
          %cst = arith.constant dense_resource<folded_bias> : tensor<8xf32>
          return
        }
      }
    }
  }
  hal.executable private @main_dispatch_1 {
    hal.executable.variant public @v target(<"llvm-cpu", "embedded-elf-x86_64">) {
      builtin.module {
        func.func @f() attributes {m = #map1} {
          return
        }
      }
    }
  }
}

{-#
  dialect_resources: {
    builtin: {
      host_a: "0x0400000000000000",
      host_b: "0x0400000000000000",
      folded_bias: "0x040000000000803F"
    }
  }
#-}
"""


def test_snapshot_cut_keeps_multiline_aliases_apart_and_carries_folded_blobs():
    parts = split_snapshot(SNAPSHOT)
    assert parts.aliases["#composite_of_64b"].count("\n") == 3  # the whole alias, not its first line
    assert set(parts.resources) == {"host_a", "host_b", "folded_bias"}
    files = extract_executables(SNAPSHOT)
    first, second = files["main_dispatch_0"], files["main_dispatch_1"]
    # Only what each op uses: dispatch 0 the layout and its folded blob; dispatch 1 its map, no blobs.
    assert first.startswith("#pipeline_layout = ") and "#composite" not in first and "#map" not in first
    assert first.splitlines()[1] == "hal.executable public @main_dispatch_0 {"
    assert 'folded_bias: "0x040000000000803F"' in first and "host_a" not in first
    assert second.startswith("#map1 = ") and "#map =" not in second and "dialect_resources" not in second


# -- substituted back -----------------------------------------------------------------------------------


def test_tiny_program_every_source_unmodified_is_bit_identical_and_an_edit_matches_iree(tmp_path):
    program = tiny_program(tmp_path / "tiny.mlir")
    vmfb, sources = _write_sources(program, tmp_path / "src")
    assert [p.stem for p in sources] == ["main_dispatch_0", "main_dispatch_1"]
    assert all("dense_resource<" in p.read_text() and "dialect_resources" in p.read_text() for p in sources)
    assert (tmp_path / "src" / "tiny_linked.ll").is_file()
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32))
    plain = _run(vmfb, "main", x, tmp_path / "plain.npy", "reference")
    for engine in ("reference", "debug"):
        got = _run(vmfb, "main", x, tmp_path / f"all_{engine}.npy", engine, sources)
        assert got.tobytes() == plain.tobytes(), engine
    # The folded bias of the second layer subtracted instead of added.
    edit = _edit_first(sources[1], r"arith\.addf", "arith.subf", tmp_path / "edit" / "main_dispatch_1.mlir")
    iree = _iree_build(program, {"main_dispatch_1": edit}, tmp_path / "iree_edit.vmfb")
    expected = _run(iree, "main", x, tmp_path / "iree_edit.npy", "reference")
    assert expected.tobytes() != plain.tobytes()
    for engine in ("reference", "debug"):
        got = _run(vmfb, "main", x, tmp_path / f"edit_{engine}.npy", engine, [edit])
        assert got.tobytes() == expected.tobytes(), engine


def test_small_cnn_every_source_unmodified_is_bit_identical_on_both_engines(tmp_path):
    vmfb, sources = model_lens_sources("small_cnn")
    assert len(sources) >= 5
    x = MODELS / "small_cnn_x.npy"
    plain = _run(vmfb, "small_cnn", x, tmp_path / "plain.npy", "reference")
    for engine in ("reference", "debug"):
        got = _run(vmfb, "small_cnn", x, tmp_path / f"all_{engine}.npy", engine, sources)
        assert got.tobytes() == plain.tobytes(), engine


def test_lens_sources_module_is_a_plain_build(tmp_path):
    # What support.model_lens_sources promises the tests that take its module as a plain build (the time by
    # source of a whole PyTorch model): the phases, LLVM IR and binaries that the command dumps leave the
    # module as a plain compile of the same program makes it, byte for byte.
    vmfb, _ = model_lens_sources("small_cnn")
    plain = compile_for(shared_model("small_cnn"), tmp_path / "plain.vmfb", "llvm-cpu")
    assert vmfb.read_bytes() == plain.read_bytes()


def _check_model(name: str, tmp_path: Path, subset: bool, edit: tuple[str, str, str], engines=("reference",)):
    program = _model(name, tmp_path)
    vmfb, sources = model_lens_sources(name)
    folded = [p for p in sources if "dense_resource<" in p.read_text()]
    assert folded, "a PyTorch export folds weights into some dispatches"
    assert all(p.read_text().lstrip().startswith(("#", "hal.executable")) for p in sources)
    x = MODELS / f"{name}_x.npy"
    plain = _run(vmfb, "main", x, tmp_path / "plain.npy", "reference")
    for engine in engines:
        got = _run(vmfb, "main", x, tmp_path / f"all_{engine}.npy", engine, folded if subset else sources)
        assert got.tobytes() == plain.tobytes(), engine
    executable, pattern, repl = edit
    source = vmfb.parent / f"{executable}.mlir"
    edited = _edit_first(source, pattern, repl, tmp_path / "edit" / source.name)
    expected = _run(_iree_build(program, {executable: edited}, tmp_path / "iree.vmfb"), "main", x,
                    tmp_path / "iree.npy", "reference")  # fmt: skip
    assert expected.tobytes() != plain.tobytes()
    return vmfb, x, edited, expected


# SqueezeNet's first convolution: its ReLU made the identity (the tiling, so the workgroup count, stays).
SQUEEZENET_RELU = ("main$async_dispatch_0", r"arith\.select (%\w+), (%\w+), %cst", r"arith.select \1, \2, \2")
# ... or its products made sums: no longer a convolution, IREE tiles it otherwise (2738 workgroups, not 36).
SQUEEZENET_RETILED = ("main$async_dispatch_0", r"arith\.mulf", "arith.addf")


def test_squeezenet_folded_weight_sources_and_an_edit_that_changes_the_workgroup_count(tmp_path):
    vmfb, x, edited, expected = _check_model("squeezenet1_1", tmp_path, True, SQUEEZENET_RETILED)
    # The debug engine dispatches the edit with its own workgroup count; IREE's runtime, which runs the host
    # code as compiled (36 workgroups), runs the edit's 2738 through trampolines: IREE's own build, bit for bit.
    for engine in ("debug", "reference"):
        got = _run(vmfb, "main", x, tmp_path / f"edit_{engine}.npy", engine, [edited])
        assert got.tobytes() == expected.tobytes(), engine
    # The dispatch timed, module's kernel against the edit, by IREE Lens and by iree-benchmark-executable on
    # the same binaries, inputs and workgroup counts: the figures agree within the (loaded) machine's noise.
    proc = _lens("benchmark", str(vmfb), "--function=main", f"--input=@{x}", "--dispatch=main$async_dispatch_0",
                 f"--substitute={edited.stem}={edited}", "--samples=5", "--repetitions=3", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["workgroup_count"] == [36, 1, 1]
    for ours, iree in (("original", "iree_original"), ("edited", "iree_edited")):
        t = report[ours]
        assert 0 < t["p10_s"] <= t["median_s"] <= t["p90_s"]
        assert 0.5 < t["median_s"] / report[iree]["median_s"] < 2.0, (ours, t, report[iree])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["squeezenet1_1", "efficientvit_m0"])
def test_pytorch_model_every_executable_substituted_and_an_edit_matches_iree(name, tmp_path):
    # The first ReLU made the identity (timm's and torchvision's fresh batch norms and biases add zeros: an
    # edit of those would change nothing).
    executable = "main$async_dispatch_0" if name == "squeezenet1_1" else "main$async_dispatch_1"
    edit = (executable, *SQUEEZENET_RELU[1:])
    vmfb, x, edited, expected = _check_model(name, tmp_path, False, edit, engines=("reference", "debug"))
    for engine in ("reference", "debug"):
        got = _run(vmfb, "main", x, tmp_path / f"edit_{engine}.npy", engine, [edited])
        assert got.tobytes() == expected.tobytes(), engine
    # The CPU library's LLVM IR, unmodified (normalised for llvmlite, code-generated, linked): the same outputs.
    plain = np.load(tmp_path / "plain.npy")
    library = vmfb.parent / "module_linked.ll"
    assert _run(vmfb, "main", x, tmp_path / "ll.npy", "reference", [library]).tobytes() == plain.tobytes()


@pytest.mark.vulkan
def test_tiny_program_on_vulkan_every_mlir_and_spirv_source_is_bit_identical(tmp_path):
    program = tiny_program(tmp_path / "tiny.mlir")
    proc = _lens("sources", str(program), f"--out={tmp_path / 'src'}", "--target=vulkan-spirv")
    assert proc.returncode == 0, proc.stderr
    written = [Path(line) for line in proc.stdout.split()]
    vmfb = next(p for p in written if p.suffix == ".vmfb")
    mlir = sorted(p for p in written if p.suffix == ".mlir")
    spirv = sorted(p for p in written if p.suffix == ".spvasm")
    assert len(mlir) == len(spirv) == 2  # one pipeline per dispatch executable
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32))

    def run(engine: str, tag: str, sources=()) -> bytes:
        subs = [f"--substitute={p.stem}={p}" for p in sources]
        out = tmp_path / f"{tag}.npy"
        proc = lens_run(vmfb, "main", [f"@{x}"], engine, "--device=vulkan", *subs, f"--output=@{out}", timeout=600)
        assert proc.returncode == 0, proc.stderr
        return np.load(out).tobytes()

    plain = run("reference", "plain")
    for engine in ("reference", "debug"):
        assert run(engine, f"mlir_{engine}", mlir) == plain, engine
        assert run(engine, f"spirv_{engine}", spirv) == plain, engine


def test_workgroup_counts_are_read_where_iree_resolved_them_to_constants():
    from engine.substitute.sources_batch import workgroup_counts

    text = """
      hal.executable.export public @a ordinal(0) layout(#pipeline_layout) count(%arg0: !hal.device) -> (index, index, index) {
        %c36 = arith.constant 36 : index
        %c1 = arith.constant 1 : index
        hal.return %c36, %c1, %c1 : index, index, index
      } <workgroup_size = [1 : index, 1 : index, 1 : index]>
      hal.executable.export public @b ordinal(1) layout(#pipeline_layout) count(%arg0: !hal.device, %arg1: index) -> (index, index, index) {
        %c1 = arith.constant 1 : index
        %0 = affine.apply affine_map<()[s0] -> (s0 ceildiv 4)>()[%arg1]
        hal.return %0, %c1, %c1 : index, index, index
      }
    """
    assert workgroup_counts(text) == {"a": (36, 1, 1), "b": None}


def test_a_trampoline_is_valid_llvm_ir_and_keeps_the_export_name():
    from engine.substitute.llvm_ir import parse_llvm_ir
    from engine.substitute.workgroup_trampoline import retile_llvm_ir

    text = (
        'define internal noundef i32 @"main$async_dispatch_0_f32"(ptr noalias %0, ptr noalias %1, ptr noalias %2) {\n'
        "  ret i32 0\n}\n"
        '@table = internal constant [1 x ptr] [ptr @"main$async_dispatch_0_f32"]\n'
    )
    out = retile_llvm_ir(text, {"main$async_dispatch_0_f32": ((36, 1, 1), (2738, 1, 1))})
    assert '@"main$async_dispatch_0_f32.edited"(ptr noalias %0' in out  # the edit's kernel, renamed
    assert 'define internal i32 @"main$async_dispatch_0_f32"(ptr %env' in out  # the table now calls the trampoline
    module = parse_llvm_ir(out, "retiled.ll")
    assert {f.name for f in module.functions} >= {"main$async_dispatch_0_f32", "main$async_dispatch_0_f32.edited"}
