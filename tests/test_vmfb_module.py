"""The module reader against iree-dump-module --output=flatbuffer-json, and its typed errors."""

from __future__ import annotations

import json
import subprocess
import zipfile

import pytest
from support import iree_tool

from engine.errors import VmfbFormatError
from engine.runtime.vmfb.module import VmfbModule, open_vmfb

FEATURES = {"EXT_F32": 1, "EXT_F64": 2, "YIELD": 4, "UNWIND": 8}


def bits(text: str | None) -> int:
    return sum(FEATURES[w] for w in (text or "").split())


def flatbuffer_json(path) -> dict:
    out = subprocess.run(
        [iree_tool("iree-dump-module"), "--output=flatbuffer-json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def test_module_matches_flatbuffer_json(sample_target, compiled):
    path = compiled.path(*sample_target)
    ref = flatbuffer_json(path)
    m = open_vmfb(path)
    assert m.name == ref["name"]
    assert m.requirements == bits(ref.get("requirements"))
    assert m.bytecode_version == ref["bytecode_version"]
    assert m.types == [t["full_name"] for t in ref["types"]]
    assert [(d.name, d.minimum_version) for d in m.dependencies] == [
        (d["name"], d.get("minimum_version", 0)) for d in ref.get("dependencies", [])
    ]
    assert [(i.full_name, i.signature.calling_convention) for i in m.imports] == [
        (i["full_name"], i["signature"]["calling_convention"]) for i in ref["imported_functions"]
    ]
    assert [(e.name, e.internal_ordinal) for e in m.exports] == [
        (e["local_name"], e.get("internal_ordinal", 0)) for e in ref["exported_functions"]
    ]
    sigs = ref["function_signatures"]
    for f, d, s in zip(m.functions, ref["function_descriptors"], sigs, strict=True):
        assert (f.bytecode_offset, f.bytecode_length, f.block_count) == (
            d.get("bytecode_offset", 0),
            d["bytecode_length"],
            d["block_count"],
        )
        assert (f.i32_register_count, f.ref_register_count) == (
            d["i32_register_count"],
            d["ref_register_count"],
        )
        assert f.requirements == bits(d.get("requirements"))
        assert f.signature.calling_convention == s.get("calling_convention", "")
        assert f.signature.attrs == {a["key"]: a["value"] for a in s.get("attrs", [])}
        code = bytes(ref["bytecode_data"][f.bytecode_offset : f.bytecode_offset + f.bytecode_length])
        assert bytes(f.code) == code
    for seg, r in zip(m.rodata_segments, ref["rodata_segments"], strict=True):
        if "embedded_data" in r:
            assert seg.embedded and bytes(seg.data) == bytes(r["embedded_data"])
        else:
            assert not seg.embedded and seg.length == r["external_data_length"]
            assert seg.external_offset == r.get("external_data_offset", 0)
    st = ref.get("module_state", {})
    assert (m.module_state.global_bytes_capacity, m.module_state.global_ref_count) == (
        st.get("global_bytes_capacity", 0),
        st.get("global_ref_count", 0),
    )
    # Exported functions carry their best name; external rodata files are named by the ZIP.
    for e in m.exports:
        assert e.name in m.functions[e.internal_ordinal].aliases
    names = {i.filename: i for i in zipfile.ZipFile(path).infolist()}
    for seg in m.rodata_segments:
        if not seg.embedded:
            assert seg.zip_name in names and names[seg.zip_name].file_size == seg.length


def test_executables_found(sample_target, compiled):
    sample, target = sample_target
    m = open_vmfb(compiled.path(sample, target))
    assert m.executables, "every sample dispatches at least one executable"
    expected = {
        "llvm-cpu": "embedded-elf-x86_64",
        "vmvx": "vmvx-bytecode-fb",
        "vulkan-spirv": "vulkan-spirv-fb",
    }[target]
    for x in m.executables:
        assert x.format == expected and x.found_by == "hal.executable.create"
        magic = bytes(x.data[:4])
        assert (
            magic
            == {
                "embedded-elf-x86_64": b"\x7fELF",
                "vmvx-bytecode-fb": b"PK\x03\x04",
                "vulkan-spirv-fb": b"VKE1",
            }[x.format]
        )


def test_writable_mapping_is_private(compiled, tmp_path):
    src = compiled.path("mlp", "llvm-cpu")
    path = tmp_path / "m.vmfb"
    path.write_bytes(src.read_bytes())
    m = open_vmfb(path, writable=True)
    seg = m.rodata_segments[m.executables[0].rodata_ordinal]
    seg.array[0] ^= 0xFF  # a run may write into constants; the file must not change
    assert path.read_bytes() == src.read_bytes()
    with pytest.raises((TypeError, ValueError)):
        open_vmfb(path).rodata_segments[0].array[0] = 1  # read-only by default


@pytest.mark.parametrize(
    "data, match",
    [
        (b"", "empty"),
        (b"PK\x03\x04" + bytes(26), "module.fb"),
        (b"\x10\x00\x00\x00" + bytes(12), "IREE"),
        (b"func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n", r"this is MLIR text: compile it first"),
        (b"ML\xefR\x00" + bytes(16), r"this is MLIR bytecode: compile it first"),
        (b"\x93NUMPY\x01\x00v\x00{'descr': '<f4'}", r"NumPy \.npy array: give it as an input"),
        (b"# Notes\n\nSome prose that is not a module.\n", r"a text file, not a compiled \.vmfb"),
    ],
)
def test_bad_inputs_raise_one_typed_error(data, match):
    with pytest.raises(VmfbFormatError, match=match):
        VmfbModule.from_bytes(data, name="bad")


def test_non_iree_zip(tmp_path):
    p = tmp_path / "x.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(VmfbFormatError, match="hello.txt"):
        open_vmfb(p)


def test_truncated_module_names_where(compiled):
    data = compiled.path("mlp", "vmvx").read_bytes()
    for cut in (8, 100, 1000, len(data) // 2, len(data) - 10):
        try:
            m = VmfbModule.from_bytes(data[:cut], name="cut")
            assert len(m.functions) + len(m.rodata_segments) + len(m.executables) >= 0
        except VmfbFormatError as e:
            assert e.where and "offset" in e.where


def test_inspect_executables_names_a_cpu_librarys_exports_from_the_host_code(compiled):
    """A CPU library exports only its query function; the dispatches it holds are named by the host code's
    lookups, listed as iree-dump-module's disassembly dispatches them."""
    from support import lens_in_process, tool_call_sites

    vmfb = compiled.path("mlp", "llvm-cpu")
    proc = lens_in_process("inspect", str(vmfb), "--output=executables")
    assert proc.returncode == 0, proc.stderr
    listed = [line.split("export ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("  export ")]
    expected = list(dict.fromkeys(name for _, _, name, _ in tool_call_sites(vmfb)))
    assert listed == expected and len(listed) >= 2


def test_a_module_cut_inside_its_flatbuffer_is_called_truncated(compiled):
    """Every read past the end of a cut file, wherever it falls, says the file is truncated and how much of
    the module flatbuffer its size prefix declares (not only an offset outside a range)."""
    data = compiled.path("mlp", "vmvx").read_bytes()
    layout = VmfbModule.from_bytes(data, name="whole").layout
    declared = layout.flatbuffer_start + layout.size_prefix
    failed = 0
    for cut in range(layout.flatbuffer_start + 8, declared, max(1, declared // 40)):
        try:
            m = VmfbModule.from_bytes(data[:cut], name="cut")
            _ = [f.name for f in m.functions], m.rodata_segments, m.executables
        except VmfbFormatError as e:
            failed += 1
            assert f"the file is truncated: it ends at byte {cut} of the {declared}" in str(e), (cut, str(e))
    assert failed  # cuts inside the flatbuffer do fail
