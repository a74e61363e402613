"""Debug-database locations: rendered in linear time even when a damaged table's entries refer to each
other, and rendered the way IREE's own flatbuffer dump describes them when the table is valid."""

from __future__ import annotations

import struct
import time

import pytest
from lens_fuzz.iree_dump import iree_flatbuffer_json, iree_location_texts
from support import iree_compile

from engine.runtime.vmfb.locations import CALL_SITE, FUSED, MAX_LOCATION_CHARS
from engine.runtime.vmfb.module import VmfbModule

# Fused locations (with and without metadata), a name location and plain file locations.
FUSED_MLIR = """
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %a = arith.addf %x, %y : tensor<4xf32> loc(fused<"meta">["model.mlir":3:5, "n1"("model.mlir":4:1)])
  %b = arith.mulf %a, %x : tensor<4xf32> loc(fused["model.mlir":5:7, "model.mlir":6:9, "x.py":1:1])
  %c = arith.subf %b, %y : tensor<4xf32> loc(fused["model.mlir":7:7, "model.mlir":8:8])
  return %c : tensor<4xf32> loc("model.mlir":9:3)
}
"""


@pytest.fixture(scope="module")
def fused_vmfb(tmp_path_factory):
    d = tmp_path_factory.mktemp("fused")
    src = d / "fused.mlir"
    src.write_text(FUSED_MLIR)
    out = d / "fused.vmfb"
    cmd = [
        str(src),
        "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=vmvx",
        "-o",
        str(out),
    ]
    iree_compile(cmd, check=True)
    return out


def _entries(module: VmfbModule):
    """(index, tag, table) of every location-table entry, read with the project's own reader."""
    db = module.root.table(15, "debug_database")
    tags = db.scalars(0, "u8")
    values = db.tables(1)
    return [(i, int(tag), values[i]) for i, tag in enumerate(tags) if tag]


def test_locations_that_refer_to_each_other_render_in_milliseconds(fused_vmfb):
    data = bytearray(fused_vmfb.read_bytes())
    entries = _entries(VmfbModule.from_bytes(bytes(data)))
    fused = [i for i, tag, _ in entries if tag == FUSED]
    calls = [i for i, tag, _ in entries if tag == CALL_SITE]
    assert fused and calls, "the sample has no fused or call-site locations to damage"
    targets = fused + calls
    # Every fused child and every call-site callee/caller now points at a fused or call-site entry:
    # cycles everywhere, and a fan-out of 2+ per level (a recursive printer makes k^depth calls).
    for i, tag, t in entries:
        if tag == FUSED:
            pos, n = t.vector_span(1, 4)
            assert n >= 2
            for k in range(n):
                struct.pack_into("<i", data, pos + 4 * k, targets[(i + k) % len(targets)])
        elif tag == CALL_SITE:
            for field in (0, 1):
                p = t.field_pos(field)
                if p:
                    struct.pack_into("<i", data, p, fused[field % len(fused)])
    damaged = VmfbModule.from_bytes(bytes(data))
    db = damaged.debug_database
    start = time.perf_counter()
    texts = [db.location_text(i) for i in range(len(db.locations))]
    elapsed = time.perf_counter() - start
    assert elapsed < 0.25, f"{len(texts)} locations took {elapsed:.3f} s"
    for i in targets:
        assert "<bad location" in texts[i], texts[i]  # each cycle is cut where it closes
        assert len(texts[i]) <= MAX_LOCATION_CHARS
    assert db.location_text(len(texts)) == f"<bad location {len(texts)}>"
    assert db.location_text(-1) == "<bad location -1>"


def test_a_self_reference_and_an_index_outside_the_table_read_as_bad_locations(fused_vmfb):
    data = bytearray(fused_vmfb.read_bytes())
    entries = _entries(VmfbModule.from_bytes(bytes(data)))
    a, ta = next((i, t) for i, tag, t in entries if tag == FUSED)
    pos, n = ta.vector_span(1, 4)
    for k in range(n):
        struct.pack_into("<i", data, pos + 4 * k, a if k == 0 else 10**6)
    db = VmfbModule.from_bytes(bytes(data)).debug_database
    text = db.location_text(a)
    assert text.startswith(f"fused[<bad location {a}>, <bad location 1000000>")
    # Entries that refer to the damaged one still render it (its text is memoised once).
    assert all(text in db.location_text(i) for i, tag, _ in entries if tag == CALL_SITE)


def test_locations_match_iree_dump_module(fused_vmfb, compiled):
    for path in (fused_vmfb, compiled.path("softmax", "vmvx"), compiled.path("mlp", "llvm-cpu")):
        expected = iree_location_texts(iree_flatbuffer_json(path))
        module = VmfbModule.from_bytes(path.read_bytes())
        assert module.debug_database.location_texts == expected
        assert any(t.startswith("fused") for t in expected) or path != fused_vmfb
