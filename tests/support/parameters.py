"""The parameter-archive program of the tests (``tests/e2e_programs/parameters_mlp.mlir``) and its weights,
written to an archive with IREE's own ``ParameterIndex`` (no engine code)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

PROGRAM = Path(__file__).resolve().parents[1] / "e2e_programs" / "parameters_mlp.mlir"
WEIGHT = (np.arange(16, dtype=np.float32).reshape(4, 4) - 5) / 8
BIAS = np.array([1, -2, 3, -4], np.float32)
SCALE = 0.5  # a splat entry: its 4-byte pattern repeated


def write_archive(path: Path) -> Path:
    """The program's scope "model" as an .irpa at ``path``: weight and bias stored, scale a splat."""
    import iree.runtime as rt

    index = rt.ParameterIndex()
    index.add_buffer("weight", WEIGHT.tobytes())
    index.add_buffer("bias", BIAS.tobytes())
    index.add_splat("scale", np.array([SCALE], np.float32).tobytes(), 16)
    index.create_archive_file(str(path))
    return path
