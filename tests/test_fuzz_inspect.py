"""``iree-lens inspect``: the JSON carries the debug database's locations as text, and
``--output=disassembly --locations`` puts each instruction's source location after it; both checked
against IREE's own flatbuffer dump of the module."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from lens_fuzz.iree_dump import iree_flatbuffer_json, iree_location_texts, iree_source_maps
from support import iree_compile

ASSERT_MLIR = """func.func @main(%a: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %ok = arith.cmpi sgt, %a, %c0 : i32
  cf.assert %ok, "must be positive"
  %r = arith.addi %a, %a : i32
  return %r : i32
}
"""
LINE = re.compile(r"^\[([0-9A-F]{8})\]  (.*?)(?:  loc\((.*)\))?$")


def inspect(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "app.launcher", "inspect", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def assert_vmfb(tmp_path_factory):
    d = tmp_path_factory.mktemp("assert")
    (d / "model.mlir").write_text(ASSERT_MLIR)
    out = d / "model.vmfb"
    iree_compile(
        ["model.mlir", "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=vmvx", "-o", str(out)],
        check=True,
        cwd=d,
    )  # fmt: skip
    return out


def test_json_carries_locations_as_text_in_table_order(assert_vmfb, compiled):
    for path in (assert_vmfb, compiled.path("mlp", "llvm-cpu")):
        data = json.loads(inspect(path, "--output=json"))
        expected = iree_location_texts(iree_flatbuffer_json(path))
        assert data["debug_database"]["locations"] == expected
    assert '"model.mlir":3:9' in data["debug_database"]["locations"] or path != assert_vmfb


def test_disassembly_locations_follow_each_instruction(assert_vmfb):
    dump = iree_flatbuffer_json(assert_vmfb)
    texts = iree_location_texts(dump)
    ((name, pcs),) = iree_source_maps(dump)
    assert name == "main"  # one function: its source map is in the right slot even in 3.13
    plain = inspect(assert_vmfb, "--output=disassembly", "--bytecode_offsets").splitlines()
    located = inspect(assert_vmfb, "--output=disassembly", "--bytecode_offsets", "--locations").splitlines()
    assert len(plain) == len(located)
    seen = 0
    for a, b in zip(plain, located):
        m = LINE.match(b)
        if not m or not b.startswith("[") or b.endswith(":"):
            assert a == b  # headers, labels and braces are unchanged
            continue
        pc = int(m.group(1), 16)
        assert b == a + (f"  loc({texts[pcs[pc]]})" if pc in pcs else "")
        seen += pc in pcs
    assert seen == len(pcs)  # every mapped pc is an instruction that shows its location
    assert any('loc(callsite("model.mlir":4:3 at "model.mlir":1:1))' in line for line in located)


def test_a_misplaced_source_map_attaches_to_the_function_it_names(compiled):
    """3.13 writes one source map, named after the last function encoded, into slot 0."""
    path = compiled.path("softmax", "vmvx")
    dump = iree_flatbuffer_json(path)
    maps = iree_source_maps(dump)
    assert len(maps) == 1 and len(maps) < len(dump["function_descriptors"])
    name = maps[0][0]
    text = inspect(path, "--output=disassembly", "--locations", "--no-rodata")
    functions = re.split(r"\n(?=vm\.func @)", text)
    with_locations = [f.split("(", 1)[0] for f in functions if "  loc(" in f]
    assert with_locations == [f"vm.func @{name}"]


def test_a_real_frontend_model_has_fused_locations_as_iree_reads_them(tmp_path):
    """An ONNX import: fused locations over the model's lines, the same text as IREE's dump gives."""
    from pathlib import Path

    from engine.compiler.targets import target_flags

    model = Path(__file__).parents[1] / ".." / "shared" / "models" / "small_cnn.mlir"
    if not model.exists():
        pytest.skip("the shared real-frontend models are not on this machine")
    out = tmp_path / "small_cnn.vmfb"
    iree_compile(
        [str(model), *target_flags("llvm-cpu"), "-o", str(out)], check=True
    )
    locations = json.loads(inspect(out, "--output=json"))["debug_database"]["locations"]
    assert locations == iree_location_texts(iree_flatbuffer_json(out))
    assert any(t.startswith("fused[") and "small_cnn.mlir" in t for t in locations)
    text = inspect(out, "--output=disassembly", "--locations", "--no-rodata")
    shown = re.findall(r"  loc\((.*)\)$", text, re.M)
    assert shown and set(shown) <= set(locations)
