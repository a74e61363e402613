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


def externalize(source: Path, out_mlir: Path, out_archive: Path, scope: str = "model") -> int:
    """A model with its weights moved out, as iree-turbine's ``externalize_module_parameters`` leaves one:
    each ``util.global ... = dense_resource<KEY>`` becomes ``#flow.parameter.named<SCOPE::KEY>`` and the
    resource's bytes (after the blob's 4-byte alignment header) go to an .irpa. Returns how many moved."""
    import re

    import iree.runtime as rt

    text = source.read_text()
    start = text.rfind("{-#")
    blobs = dict(re.findall(r'^\s*([\w.$-]+):\s*"0x([0-9A-Fa-f]+)"', text[start:], re.M))
    moved: set[str] = set()

    def named(m: re.Match) -> str:
        if m[2] not in blobs:
            return m[0]
        moved.add(m[2])
        return f'util.global private @{m[1]} = #flow.parameter.named<"{scope}"::"{m[2]}"> : {m[3]}'

    body = re.sub(r"util\.global private @([\w.$-]+) = dense_resource<([\w.$-]+)> : (tensor<[^>]+>)", named,
                  text[:start])  # fmt: skip
    index = rt.ParameterIndex()
    for key in sorted(moved):
        index.add_buffer(key, bytes.fromhex(blobs[key])[4:])
    index.create_archive_file(str(out_archive))
    out_mlir.write_text(body + text[start:])
    return len(moved)
