"""A data-tiled build (``--iree-dispatch-creation-data-tiling``, microkernels) is typed by a rebuild with the
flags the module records (``recorded_flags``: its target's ``ukernels``, its encoding dispatches), judged by
its bytes as any rebuild. A tensor in the layout its encoding chose is shown as
its tiles as the build's configured source lays them out (else as its bytes, said so: several in one binding
each from its offset to the next one's), and no longer leaves the dispatch's other tensors untyped."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import compile_for, iree_tool, lens_in_process, save_matmul_inputs

from engine.dispatch.rebuild_sources import DATA_TILING_FLAG, found_or_rebuilt, recorded_flags
from engine.dispatch.typed_tensors import dispatch_tensors
from engine.samples import sample_path

FLAGS = (DATA_TILING_FLAG, "--iree-llvmcpu-enable-ukernels=all")  # with IREE Lens's llvm-cpu target


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data_tiling")
    save_matmul_inputs(out, 5)
    compile_for(sample_path("matmul"), out / "dt.vmfb", "llvm-cpu", *FLAGS)
    return out


def test_the_flags_the_module_records_are_read(folder):
    assert recorded_flags(folder / "dt.vmfb") == ("--iree-llvmcpu-enable-ukernels=all", DATA_TILING_FLAG)
    assert recorded_flags(sample_path("matmul")) == ()  # a program, not a module: nothing recorded


def test_the_encode_dispatches_type_what_they_read(folder, tmp_path):
    out = tmp_path / "capture"
    proc = lens_in_process("capture", str(folder / "dt.vmfb"), "--function=main", f"--input=@{folder / 'lhs.npy'}",
                           f"--input=@{folder / 'rhs.npy'}", f"--out={out}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "rebuilt" in proc.stderr
    encode_lhs, encode_rhs, matmul = json.loads((out / "manifest.json").read_text())["dispatches"]
    assert encode_lhs["tensors_from"] == encode_rhs["tensors_from"] == "interface"
    assert (encode_lhs["input_types"], encode_rhs["input_types"]) == (["4x8xf32"], ["8x16xf32"])
    np.testing.assert_array_equal(np.load(out / encode_lhs["inputs"][0]), np.load(folder / "lhs.npy"))
    # The encoded tensor in the layout the build's configured source gives it (data tiling's tiles): the same
    # values, rearranged.
    assert encode_lhs["output_types"] == ["1x8x4x1xf32"]
    tiled = np.load(out / encode_lhs["outputs"][0])
    np.testing.assert_array_equal(np.sort(tiled.ravel()), np.sort(np.load(folder / "lhs.npy").ravel()))
    # The matmul reads both encoded operands from one binding (each at its own offset) and writes the plain
    # result: typed, the program's output.
    assert matmul["tensors_from"] == "interface" and matmul["output_types"] == ["4x16xf32"]
    assert matmul["input_types"] == encode_lhs["output_types"] + encode_rhs["output_types"]
    iree = tmp_path / "iree.npy"
    subprocess.run([iree_tool("iree-run-module"), f"--module={folder / 'dt.vmfb'}", "--function=main",
                    f"--input=@{folder / 'lhs.npy'}", f"--input=@{folder / 'rhs.npy'}", f"--output=@{iree}"],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    np.testing.assert_array_equal(np.load(out / matmul["outputs"][0]), np.load(iree))

    sources = found_or_rebuilt(folder / "dt.vmfb")
    data = np.load(out / encode_lhs["inputs"][0]).view(np.uint8).reshape(-1)
    written = np.load(out / encode_lhs["outputs"][0]).reshape(-1).view(np.uint8)
    tensors = dispatch_tensors(encode_lhs["name"], encode_lhs["constants"], [data, np.zeros_like(written)],
                               [data, written], sources)  # fmt: skip
    assert str(tensors[0].type) == "4x8xf32"
    assert "the layout its encoding chose (its tiles)" in tensors[1].note

    # Without the configured sources (a compile that kept only the executables' sources) the layout is not
    # known: the encoded tensor is its binding's bytes, from its offset to the next one's, said so.
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(Path(sources.files[encode_lhs["name"]]).parent, bare / "sources")
    from engine.dispatch.typed_tensors import read_sources

    tensors = dispatch_tensors(encode_lhs["name"], encode_lhs["constants"], [data, np.zeros_like(written)],
                               [data, written], read_sources([bare / "sources"]))  # fmt: skip
    assert tensors[1].type.element == "u8"
    assert "in the layout its encoding chose (where it ends is not known here)" in tensors[1].note


def test_a_dump_of_every_file_types_it_alike(folder, tmp_path):
    # IREE's --iree-hal-dump-executable-files-to: sources, configured sources and benchmarks in one folder, the
    # encoding written out in the type (brackets inside brackets), not aliased.
    files = tmp_path / "files"
    compile_for(sample_path("matmul"), tmp_path / "dt.vmfb", "llvm-cpu", *FLAGS,
                f"--iree-hal-dump-executable-files-to={files}")
    from engine.dispatch.typed_tensors import read_sources

    sources = read_sources([files])
    assert all(Path(f).name.startswith("module_") and "benchmark" not in f for f in sources.files.values())
    encode = next(v for k, v in sources.interfaces.items() if k.startswith("_encoding_0_"))
    assert encode[1].unshown == ("4x8xf32, #iree_encoding.layout<...>",)  # was dropped: no output at all
    assert [t.shape for t in encode[1].materialized] == [(1, 8, 4, 1)]
