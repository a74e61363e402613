"""The sample programs bundled with IREE Lens (``engine/resources/samples``, shipped as package data)."""

from __future__ import annotations

from pathlib import Path

# Package data (pyproject.toml), so an installed wheel has them too, not only a checkout.
SAMPLES_DIR = Path(__file__).resolve().parent / "resources" / "samples"

# Programs IREE 3.13 itself cannot compile for a target (not our bug; kept as examples of a failing compile).
KNOWN_COMPILE_FAILURES: dict[tuple[str, str], str] = {
    ("f16", "vmvx"): "vmvx has no f16 arithmetic: 'vm.mul.f32' op operand #0 must be 32-bit float, but got 'i32'",
}


def sample_names() -> list[str]:
    return sorted(p.stem for p in SAMPLES_DIR.glob("*.mlir"))


def sample_path(name: str) -> Path:
    return SAMPLES_DIR / f"{name}.mlir"
