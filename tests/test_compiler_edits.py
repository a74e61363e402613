"""Resuming from an edited phase snapshot, and executable substitution with its replacement map."""

from __future__ import annotations

import iree.runtime as rt
import numpy as np
import pytest

from engine.compiler import (
    CompileRequest,
    ExecutableSubstitutions,
    compile_program,
    hal_binaries,
    resume_from_phase,
)
from engine.samples import sample_path

B2 = "dense<[5.000000e-01, -5.000000e-01, 1.000000e+00, -1.000000e+00]> : tensor<4xf32>"
B2_EDITED = "dense<[1.050000e+01, -5.000000e-01, 1.000000e+00, -3.000000e+00]> : tensor<4xf32>"


def run_main(vmfb_path, *args):
    module = rt.load_vm_flatbuffer_file(str(vmfb_path), driver="local-sync")
    return np.asarray(module.main(*args))


def mlp_numpy(x, b2):
    b1 = np.array(
        [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, -1.5, 2.0, -2.0, 0.25, -0.25, 0.75, -0.75, 1.25, -1.25, 0.1]
        + [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8],
        np.float32,
    )
    h = np.maximum(x @ np.full((16, 32), 0.125, np.float32) + b1, 0)
    return h @ np.full((32, 4), -0.0625, np.float32) + np.asarray(b2, np.float32)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    return compile_program(CompileRequest(sample_path("mlp")), out_dir=tmp_path_factory.mktemp("mlp"))


def test_resume_from_edited_abi_constant(mlp, tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    abi = mlp.phase("abi").text()
    assert abi.count(B2) == 1
    resumed = resume_from_phase(mlp, "abi", abi.replace(B2, B2_EDITED), out_dir=tmp_path)
    resumed.raise_if_failed()
    assert resumed.parent is mlp and resumed.resumed_from == "abi"
    assert [(s.phase, s.origin) for s in resumed.phases[:3]] == [
        ("input", "inherited"),
        ("abi", "edited"),
        ("preprocessing", "compiled"),
    ]
    assert len(resumed.phases) == 12 and B2_EDITED in resumed.phase("abi").text()
    np.testing.assert_allclose(run_main(mlp.vmfb_path, x), mlp_numpy(x, [0.5, -0.5, 1.0, -1.0]), rtol=1e-5)
    np.testing.assert_allclose(
        run_main(resumed.vmfb_path, x), mlp_numpy(x, [10.5, -0.5, 1.0, -3.0]), rtol=1e-5
    )


def test_resume_with_broken_edit_reports_error(mlp, tmp_path):
    text = mlp.phase("flow").text().replace("flow.dispatch", "flow.dispatchh", 1)
    resumed = resume_from_phase(mlp, "flow", text, out_dir=tmp_path)
    assert not resumed.ok and resumed.errors
    assert resumed.errors[0].file.endswith("mlp.mlir") and resumed.errors[0].line > 0


ELEMENTWISE_VARIANT = (
    sample_path("elementwise").read_text().replace("arith.addf %m, %abs", "arith.subf %m, %abs")
)


@pytest.fixture(scope="module")
def elementwise(tmp_path_factory):
    root = tmp_path_factory.mktemp("ew")
    base = compile_program(CompileRequest(sample_path("elementwise")), out_dir=root / "base")
    # The same program with a different kernel (a*b - |a|) under the same names.
    variant = compile_program(
        CompileRequest.from_text(ELEMENTWISE_VARIANT, name="elementwise"), out_dir=root / "variant"
    )
    base.raise_if_failed()
    variant.raise_if_failed()
    return base, variant


def inputs():
    rng = np.random.default_rng(1)
    return rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((4, 8)).astype(np.float32)


def test_cpu_binary_substitution_and_revert(elementwise, tmp_path):
    base, variant = elementwise
    a, b = inputs()
    reference = run_main(base.vmfb_path, a, b)
    np.testing.assert_allclose(
        reference, a * b + np.abs(a), rtol=1e-5, atol=1e-6
    )  # IREE fuses a*b+c into an FMA
    (binary,) = hal_binaries(base.phase("hal").text())
    own = binary.data(base.phase("hal").text())

    subs = ExecutableSubstitutions(base, tmp_path / "work")
    subs.replace_binary(binary.executable, own)
    same = subs.apply(out_dir=tmp_path / "same")
    assert same.parent is base and [r.executable for r in same.substitutions] == [binary.executable]
    assert run_main(same.vmfb_path, a, b).tobytes() == reference.tobytes()

    (other,) = hal_binaries(variant.phase("hal").text())
    subs.replace_binary(binary.executable, other.data(variant.phase("hal").text()))
    swapped = subs.apply(out_dir=tmp_path / "swapped")
    result = run_main(swapped.vmfb_path, a, b)
    np.testing.assert_allclose(
        result, a * b - np.abs(a), rtol=1e-5, atol=1e-6
    )  # IREE fuses a*b+c into an FMA
    assert result.tobytes() != reference.tobytes()
    assert swapped.executable(binary.executable).binaries[0].read_bytes() == other.data(
        variant.phase("hal").text()
    )

    subs.revert(binary.executable)
    assert not subs.replacements and subs.apply() is base
    with pytest.raises(KeyError):
        subs.replace_binary("no_such_executable", own)


def test_source_substitution(elementwise, tmp_path):
    base, variant = elementwise
    a, b = inputs()
    subs = ExecutableSubstitutions(base, tmp_path / "work")
    (name,) = [e.name for e in variant.executables if e.source is not None]
    subs.replace_source(name, variant.executable(name).source)
    result = subs.apply(out_dir=tmp_path / "out")
    result.raise_if_failed()
    assert result.substitutions[0].kind == "source"
    np.testing.assert_allclose(
        run_main(result.vmfb_path, a, b), a * b - np.abs(a), rtol=1e-5, atol=1e-6
    )  # IREE fuses a*b+c into an FMA
