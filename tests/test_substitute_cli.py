"""``iree-lens run --substitute=NAME=FILE``: edited executables on both engines, CPU and Vulkan (lavapipe).

Each edit changes the arithmetic of the elementwise sample (``a * b + |a|``); the expected values are computed
with numpy from the inputs, independently of either engine.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import TARGET_FLAGS as TARGETS
from support import assert_within_ulps, compile_with_dumps, edited_source, iree_compile

from engine.cli import main as cli_main
from engine.runtime.hal.vulkan.loader import vulkan_available
from engine.samples import sample_path

_NO_VULKAN = vulkan_available()
needs_vulkan = pytest.mark.skipif(_NO_VULKAN is not None, reason=f"no Vulkan: {_NO_VULKAN}")

@pytest.fixture(scope="module")
def ew(tmp_path_factory):
    base = tmp_path_factory.mktemp("subst")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = rng.standard_normal((4, 8)).astype(np.float32)
    np.save(base / "a.npy", a)
    np.save(base / "b.npy", b)
    return base, a, b


def run_lens(vmfb: Path, base: Path, engine: str, device: str, *subs: str, capsys) -> tuple[int, str, np.ndarray | None]:
    out = base / f"out_{engine}_{device}.npy"
    out.unlink(missing_ok=True)
    rc = cli_main(
        ["run", str(vmfb), "--function=main", f"--input=@{base / 'a.npy'}", f"--input=@{base / 'b.npy'}",
         f"--engine={engine}", f"--device={device}", f"--output=@{out}", *[f"--substitute={s}" for s in subs]]
    )  # fmt: skip
    err = capsys.readouterr().err
    return rc, err, (np.load(out) if out.exists() else None)


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_mlir_edit_on_cpu(ew, engine, capsys):
    base, a, b = ew
    vmfb = compile_with_dumps("elementwise", "cpu", base / "cpu")
    src = edited_source(base / "cpu" / "sources", base / "cpu_edit.mlir")
    rc, err, got = run_lens(vmfb, base, engine, "local-sync", f"main_dispatch_0={src}", capsys=capsys)
    assert rc == 0, err
    np.testing.assert_array_equal(got, (a * b) * np.abs(a))
    # Without the substitution the module computes the original.
    rc, err, got = run_lens(vmfb, base, engine, "local-sync", capsys=capsys)
    # a*b+|a|: IREE may fuse it into one FMA or not, by the host CPU; either is within an ulp of numpy's.
    assert_within_ulps(got, a * b + np.abs(a), ulps=1, magnitude=a * b)


@pytest.mark.parametrize("engine", ["debug", "reference"])
@pytest.mark.parametrize("stage", ["optimized", "linked"])
def test_llvm_ir_edit_on_cpu(ew, engine, stage, capsys):
    base, a, b = ew
    vmfb = compile_with_dumps("elementwise", "cpu", base / "cpu")
    ll = next((base / "cpu" / "intermediates").glob(f"*main_dispatch_0*.{stage}.ll"))
    text = ll.read_text()
    # The dispatch's vector add of (a*b) and |a| becomes a multiply.
    edited, n = re.subn(r"= fadd (contract )?<(\d+) x float>", r"= fmul \1<\2 x float>", text)
    assert n >= 1
    out = base / f"edit.{stage}.ll"
    out.write_text(edited)
    rc, err, got = run_lens(vmfb, base, engine, "local-sync", f"main_dispatch_0={out}", capsys=capsys)
    assert rc == 0, err
    np.testing.assert_array_equal(got, (a * b) * np.abs(a))


@needs_vulkan
@pytest.mark.parametrize("engine", ["debug", "reference"])
@pytest.mark.parametrize("kind", ["mlir", "spvasm", "spv"])
def test_vulkan_edits(ew, engine, kind, capsys):
    base, a, b = ew
    vmfb = compile_with_dumps("elementwise", "vulkan", base / "vk")
    if kind == "mlir":
        path = edited_source(base / "vk" / "sources", base / "vk_edit.mlir")
        name = "main_dispatch_0"
    else:
        spv = next((base / "vk" / "binaries").glob("*.spv"))
        text = subprocess.run(["spirv-dis", str(spv)], check=True, capture_output=True, text=True).stdout
        edited, n = re.subn(r"OpFAdd %float", "OpFMul %float", text)
        assert n == 1
        path = base / "vk_edit.spvasm"
        path.write_text(edited)
        if kind == "spv":
            out = base / "vk_edit.spv"
            subprocess.run(["spirv-as", "--target-env", "spv1.3", str(path), "-o", str(out)], check=True)
            path = out
        name = "main_dispatch_0_elementwise_32_f32"  # an export name
    rc, err, got = run_lens(vmfb, base, engine, "vulkan", f"{name}={path}", capsys=capsys)
    assert rc == 0, err
    np.testing.assert_array_equal(got, (a * b) * np.abs(a))


def test_syntax_errors_name_their_line(ew, capsys):
    base, a, b = ew
    vmfb = compile_with_dumps("elementwise", "cpu", base / "cpu")
    src = edited_source(base / "cpu" / "sources", base / "bad.mlir")
    lines = src.read_text().splitlines()
    line = next(i for i, t in enumerate(lines) if "arith.mulf" in t and "%in" not in t) + 1
    lines[line - 1] = lines[line - 1].replace("arith.mulf", "arith.mulfx")
    src.write_text("\n".join(lines) + "\n")
    rc, err, got = run_lens(vmfb, base, "debug", "local-sync", f"main_dispatch_0={src}", capsys=capsys)
    assert rc == 1 and got is None
    assert f"bad.mlir:{line}:" in err and "arith.mulfx" in err

    ll = next((base / "cpu" / "intermediates").glob("*.optimized.ll"))
    lines = ll.read_text().splitlines()
    k = next(i for i, t in enumerate(lines) if " fadd " in t)
    lines[k] = lines[k].replace(" fadd ", " faddz ")
    bad_ll = base / "bad.ll"
    bad_ll.write_text("\n".join(lines) + "\n")
    rc, err, got = run_lens(vmfb, base, "reference", "local-sync", f"main_dispatch_0={bad_ll}", capsys=capsys)
    assert rc == 1 and got is None
    assert f"bad.ll:{k + 1}:" in err


def test_interface_mismatch_is_refused(ew, capsys):
    base, a, b = ew
    vmfb = compile_with_dumps("elementwise", "cpu", base / "cpu")
    text = (base / "cpu" / "sources" / "module_main_dispatch_0.mlir").read_text()
    # Same export name, one binding fewer: the output goes to binding 1.
    layout3 = re.search(r"#hal\.pipeline\.layout<bindings = \[(.*?)\], flags = Indirect>", text).group(0)
    layout2 = layout3.replace('#hal.pipeline.binding<storage_buffer, "ReadOnly|Indirect">, ', "", 1)
    assert layout2 != layout3
    short = text.replace(layout3, layout2)
    short = short.replace(layout3.replace("#hal.pipeline.layout", ""), layout2.replace("#hal.pipeline.layout", ""))
    short = re.sub(r"binding\(2\)", "binding(1)", short)
    short = re.sub(r"(%1 = hal\.interface\.binding\.subspan .*? binding\()1\)", r"\g<1>0)", short)
    path = base / "two_bindings.mlir"
    path.write_text(short)
    for engine in ("debug", "reference"):
        rc, err, got = run_lens(vmfb, base, engine, "local-sync", f"main_dispatch_0={path}", capsys=capsys)
        assert rc == 1 and got is None, err
        assert "interface mismatch" in err and "2 bindings, the module passes 3" in err


def test_unknown_name_lists_executables(ew, capsys):
    base, a, b = ew
    vmfb = compile_with_dumps("elementwise", "cpu", base / "cpu")
    src = edited_source(base / "cpu" / "sources", base / "cpu_edit.mlir")
    rc, err, _ = run_lens(vmfb, base, "debug", "local-sync", f"main_dispatch_7={src}", capsys=capsys)
    assert rc == 1
    assert "main_dispatch_7" in err and "main_dispatch_0_elementwise_32_f32" in err


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_one_dispatch_of_a_linked_cpu_library(ew, engine, capsys, tmp_path):
    """mlp links its two dispatches into one library; editing main_dispatch_0 keeps main_dispatch_1 intact."""
    base, _, _ = ew
    vmfb = compile_with_dumps("mlp", "cpu", base / "mlp")
    text = (base / "mlp" / "sources" / "module_main_dispatch_0.mlir").read_text()
    edited, n = re.subn(r"arith\.maximumf (%\w+), (%\w+) : f32", r"arith.minimumf \1, \2 : f32", text)
    assert n == 1  # relu becomes min(x, 0)
    src = tmp_path / "relu_min.mlir"
    src.write_text(edited)
    x = np.random.default_rng(3).integers(-4, 5, (2, 16)).astype(np.float32)  # exact sums in f32
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "o.npy"
    rc = cli_main(["run", str(vmfb), "--function=main", f"--input=@{tmp_path / 'x.npy'}", f"--engine={engine}",
                   f"--output=@{out}", f"--substitute=main_dispatch_0={src}"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    # The same edit built by IREE itself (its own substitution flag), run by IREE's runtime: the
    # same kernel, so the same bits.
    iree_vmfb = tmp_path / "mlp_iree_substituted.vmfb"
    iree_compile(
        [str(sample_path("mlp")), *TARGETS["cpu"], "-o", str(iree_vmfb),
         f"--iree-hal-substitute-executable-source=main_dispatch_0={src}"],
        check=True)  # fmt: skip
    by_iree = tmp_path / "by_iree.npy"
    rc = cli_main(["run", str(iree_vmfb), "--function=main", f"--input=@{tmp_path / 'x.npy'}", "--engine=reference",
                   f"--output=@{by_iree}"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    np.testing.assert_array_equal(np.load(out), np.load(by_iree))
    # And numpy agrees to rounding (the kernel may contract a multiply-add where numpy rounds twice):
    # the edit is there (relu became min(x, 0)), not just some kernel.
    b1 = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, -1.5, 2.0, -2.0, 0.25, -0.25, 0.75, -0.75, 1.25, -1.25, 0.1,
                   0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8], np.float32)  # fmt: skip
    h = x @ np.full((16, 32), 0.125, np.float32) + b1
    expected = np.minimum(h, 0) @ np.full((32, 4), -0.0625, np.float32) + np.array([0.5, -0.5, 1, -1], np.float32)
    assert_within_ulps(np.load(out), expected, ulps=64)


MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"


@pytest.mark.skipif(not (MODELS / "attention_block.mlir").exists(), reason="shared models are not here")
@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_real_frontend_program(tmp_path, engine, capsys):
    """attention_block (an ONNX import, 12 dispatches linked into one CPU library): its last dispatch (the
    residual add) edited to add 1.0 gives the unedited result + 1 on both engines."""
    out = tmp_path / "att"
    out.mkdir()
    vmfb = out / "att.vmfb"
    iree_compile(
        [str(MODELS / "attention_block.mlir"), *TARGETS["cpu"], "-o", str(vmfb),
         f"--iree-hal-dump-executable-sources-to={out / 'sources'}"],
        check=True)  # fmt: skip
    last = max(out.glob("sources/*.mlir"), key=lambda p: int(re.search(r"dispatch_(\d+)", p.name).group(1)))
    text = last.read_text()
    m = re.search(r"linalg\.yield (%\w+) : f32\n(\s*)\} -> tensor", text)
    assert m is not None
    edited = text.replace(
        m.group(0),
        f"%plus_one = arith.constant 1.000000e+00 : f32\n          %edited = arith.addf {m.group(1)}, %plus_one : f32\n"
        f"          linalg.yield %edited : f32\n{m.group(2)}}} -> tensor",
    )
    src = tmp_path / "plus_one.mlir"
    src.write_text(edited)
    name = re.search(r"hal\.executable public @([\w$]+)", text).group(1)
    x = MODELS / "attention_block_x.npy"
    fn = "--function=attention_block"
    assert cli_main(["run", str(vmfb), fn, f"--input=@{x}", f"--engine={engine}", f"--output=@{tmp_path / 'o.npy'}"]) == 0
    rc = cli_main(["run", str(vmfb), fn, f"--input=@{x}", f"--engine={engine}", f"--output=@{tmp_path / 'e.npy'}",
                   f"--substitute={name}={src}"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    original, got = np.load(tmp_path / "o.npy"), np.load(tmp_path / "e.npy")
    np.testing.assert_array_equal(got, original + np.float32(1.0))


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_mlir_edit_on_vmvx(ew, engine, capsys):
    base, a, b = ew
    vmfb = compile_with_dumps("elementwise", "vmvx", base / "vmvx")
    src = edited_source(base / "vmvx" / "sources", base / "vmvx_edit.mlir")
    rc, err, got = run_lens(vmfb, base, engine, "local-sync", f"main_dispatch_0={src}", capsys=capsys)
    assert rc == 0, err
    np.testing.assert_array_equal(got, (a * b) * np.abs(a))


@needs_vulkan
def test_spirv_binding_outside_the_layout_is_refused(ew, capsys):
    base, a, b = ew
    vmfb = compile_with_dumps("elementwise", "vulkan", base / "vk")
    spv = next((base / "vk" / "binaries").glob("*.spv"))
    text = subprocess.run(["spirv-dis", str(spv)], check=True, capture_output=True, text=True).stdout
    edited, n = re.subn(r"(OpDecorate %\S+ Binding) 2\b", r"\1 5", text)
    assert n == 1
    path = base / "binding5.spvasm"
    path.write_text(edited)
    for engine in ("debug", "reference"):
        rc, err, got = run_lens(vmfb, base, engine, "vulkan", f"main_dispatch_0={path}", capsys=capsys)
        assert rc == 1 and got is None
        assert "interface mismatch" in err and "binding(s) 5" in err


def test_drafts_live_inside_the_given_state_folder(monkeypatch, tmp_path):
    """With ``IREE_LENS_STATE_DIR`` set (tests, scripted walks of the window), edited drafts live inside that
    folder, so two walks never share them; beside it (``/tmp/edits`` for a ``mktemp -d`` folder) every walk
    did. Without it they live beside the saved session under ``XDG_STATE_HOME``."""
    from engine.session.persist import default_state_dir
    from engine.substitute.documents import default_drafts_dir

    monkeypatch.setenv("IREE_LENS_STATE_DIR", str(tmp_path / "walk"))
    assert default_drafts_dir() == tmp_path / "walk" / "edits"
    monkeypatch.delenv("IREE_LENS_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_drafts_dir() == tmp_path / "xdg" / "iree-lens" / "edits"
    assert default_drafts_dir().parent == default_state_dir().parent
