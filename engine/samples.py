"""The sample programs bundled with IREE Lens: ``resources/samples`` at the top of the repository, which
an installed wheel carries as the package data of ``engine.resources`` (setup.py)."""

from __future__ import annotations

from pathlib import Path


def _resources_dir() -> Path:
    here = Path(__file__).resolve().parent
    checkout = here.parent
    # A checkout (or an editable install of one) keeps resources/ beside engine/; a wheel installs it
    # as engine/resources. pyproject.toml tells a checkout from a site-packages folder that happens to
    # hold some other distribution's "resources".
    if (checkout / "pyproject.toml").is_file() and (checkout / "resources").is_dir():
        return checkout / "resources"
    return here / "resources"


RESOURCES_DIR = _resources_dir()
SAMPLES_DIR = RESOURCES_DIR / "samples"

# Programs IREE 3.13 itself cannot compile for a target (not our bug; kept as examples of a failing compile).
KNOWN_COMPILE_FAILURES: dict[tuple[str, str], str] = {
    ("f16", "vmvx"): "vmvx has no f16 arithmetic: 'vm.mul.f32' op operand #0 must be 32-bit float, but got 'i32'",
}


def sample_names() -> list[str]:
    return sorted(p.stem for p in SAMPLES_DIR.glob("*.mlir"))


def sample_path(name: str) -> Path:
    return SAMPLES_DIR / f"{name}.mlir"
