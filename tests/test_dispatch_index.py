"""DispatchIndex against independent searches: grep-style scans of the phase files, spirv-dis, and the
call sites read from ``iree-dump-module --output=disassembly --bytecode_offsets`` text."""

from __future__ import annotations

import re

import pytest
from support import grep, tool_call_sites

from engine.compiler import CompileRequest, compile_program
from engine.compiler.dispatch_index import DispatchIndex
from engine.runtime.vmfb.call_sites import dispatch_call_sites
from engine.runtime.vmfb.module import open_vmfb
from engine.samples import sample_path

CASES = [
    ("mlp", "llvm-cpu"),
    ("matmul", "llvm-cpu"),
    ("transpose_concat", "llvm-cpu"),  # 4 dispatches linked into one executable
    ("softmax", "vulkan-spirv"),
    ("mlp", "vulkan-spirv"),
    ("control_flow", "vulkan-spirv"),  # dispatches in three host functions
]

# Two identical element-wise ops: IREE deduplicates them into one executable dispatched twice.
DEDUP_MLIR = """func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = arith.mulf %a, %a : tensor<8xf32>
  %1 = arith.mulf %b, %b : tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}
"""


@pytest.fixture(scope="module")
def compilations(tmp_path_factory):
    root = tmp_path_factory.mktemp("dispatch_index")
    cache = {}

    def get(sample: str, target: str):
        if (sample, target) not in cache:
            if sample == "dedup":
                request = CompileRequest.from_text(DEDUP_MLIR, name="dedup", target=target)
            else:
                request = CompileRequest.from_file(sample_path(sample), target=target)
            c = compile_program(request, out_dir=root / f"{sample}-{target}")
            c.raise_if_failed()
            cache[sample, target] = c
        return cache[sample, target]

    return get




def signature(line: str) -> str:
    """The ``(operand types) -> result types`` part of a dispatch line."""
    m = re.search(r":\s*(\(.*?\)\s*->\s*.*?)\s*=?\s*$", line)
    return m[1] if m else ""


@pytest.mark.parametrize(("sample", "target"), CASES, ids=[f"{s}-{t}" for s, t in CASES])
def test_phase_lines_match_grep(compilations, sample, target):
    c = compilations(sample, target)
    index = DispatchIndex.from_compilation(c)
    flow, stream = c.phase("flow").text(), c.phase("stream").text()
    creation = c.phase("dispatch-creation").text()

    expected_names = re.findall(r"^  flow\.executable private @(\w+) \{", flow, re.MULTILINE)
    assert index.names == expected_names and expected_names
    assert not index.notes

    creation_lines = creation.splitlines()
    flow_lines = flow.splitlines()
    regions = []
    for d in index:
        n = re.escape(d.name)
        for phase, text, op in (("flow", flow, "flow"), ("stream", stream, "stream")):
            defs = [loc.line for loc in d.in_phase(phase) if loc.role == "executable"]
            assert defs == grep(text, rf"^  {op}\.executable private @{n} \{{")
            assert d.line_in(phase) == defs[0]
            uses = [loc.line for loc in d.in_phase(phase) if loc.role == "dispatch"]
            use_op = "flow.dispatch" if phase == "flow" else "stream.cmd.dispatch"
            assert uses == grep(text, rf"{re.escape(use_op)} @{n}::@") and uses
            exports = [loc.line for loc in d.in_phase(phase) if loc.role == "export"]
            assert exports == grep(text, rf"{op}\.executable\.export public @{n}_")
        assert list(d.exports) == re.findall(rf"flow\.executable\.export public @({n}_\w+)", flow)
        # A dispatch-creation region has the same operand/result types as the flow.dispatch it became.
        mine = d.in_phase("dispatch-creation")
        assert mine and all(loc.role == "region" for loc in mine)
        flow_uses = [loc.line for loc in d.in_phase("flow") if loc.role == "dispatch"]
        assert len(mine) == len(flow_uses)
        for region, use in zip(mine, flow_uses):
            assert signature(creation_lines[region.line - 1]) == signature(flow_lines[use - 1]) != ""
            assert creation_lines[region.end_line - 1].strip() == "}"
        regions += [loc.line for loc in mine]
        # The hal phase looks the export up in the executable it was linked into.
        hal = c.phase("hal").text()
        for export in d.exports:
            lookups = grep(
                hal, rf"hal\.executable\.lookup\.function .*@{re.escape(d.hal_executable)}::@\w+::@{export}\)"
            )
            assert lookups == [loc.line for loc in d.in_phase("hal") if loc.role == "lookup"] and lookups
    # Every region of the dispatch-creation snapshot belongs to exactly one dispatch.
    assert sorted(regions) == grep(creation, r"flow\.dispatch\.workgroups")


def test_deduplicated_regions_share_one_dispatch(compilations):
    c = compilations("dedup", "llvm-cpu")
    index = DispatchIndex.from_compilation(c)
    (d,) = index.dispatches
    creation = c.phase("dispatch-creation").text()
    assert [loc.line for loc in d.in_phase("dispatch-creation")] == grep(
        creation, r"flow\.dispatch\.workgroups"
    )
    assert len(d.in_phase("dispatch-creation")) == 2
    assert len([loc for loc in d.in_phase("stream") if loc.role == "dispatch"]) == 2
    assert len(index.call_sites(open_vmfb(c.vmfb_path), d.name)) == 2




@pytest.mark.parametrize(("sample", "target"), CASES, ids=[f"{s}-{t}" for s, t in CASES])
def test_call_sites_match_iree_dump_module(compilations, sample, target):
    c = compilations(sample, target)
    index = DispatchIndex.from_compilation(c)
    module = open_vmfb(c.vmfb_path)
    expected = tool_call_sites(c.vmfb_path)
    found = dispatch_call_sites(module)
    assert [(s.function_ordinal, s.pc, s.export, s.text) for s in found] == expected
    assert all(s.export for s in found)
    # Each dispatch is called at least once, and only by its own exports' sites.
    for d in index:
        sites = index.call_sites(module, d.name)
        assert sites and {s.export for s in sites} <= set(d.exports)
    assert sorted((s.function_ordinal, s.pc) for s in index.call_sites(module)) == sorted(
        e[:2] for e in expected
    )


@pytest.mark.parametrize(("sample", "target"), [("mlp", "llvm-cpu"), ("mlp", "vulkan-spirv")])
def test_code_files_point_at_the_export(compilations, sample, target):
    c = compilations(sample, target)
    index = DispatchIndex.from_compilation(c)
    for d in index:
        (export,) = d.exports
        kinds = [f.kind for f in d.code_files]
        assert kinds[:2] == ["source", "configuration"]
        assert d.source == c.executable(d.name).source
        wanted = {"llvm-ir", "assembly"} if target == "llvm-cpu" else {"spirv", "spirv-mlir"}
        assert wanted <= set(kinds)
        for f in d.code_files:
            text = f.text()
            line = f.symbol_line(text, export)
            assert line is not None, (f.kind, f.path)
            assert export in text.splitlines()[line - 1]
            if f.kind == "llvm-ir":
                assert line in grep(text, rf"^define .*@{export}\(")
            if f.kind == "spirv":
                # spirv-dis text (the tool is installed here): the entry point carries the export name.
                assert grep(text, rf'OpEntryPoint GLCompute %\S+ "{export}"')
    if target == "llvm-cpu":
        assert {d.hal_executable for d in index} == {"mlp_linked"}


def test_from_phase_texts_without_files():
    # Only the flow phase: names and exports, no files, no dispatch-creation regions.
    flow = (
        "module {\n"
        "  flow.executable private @f_dispatch_0 {\n"
        "    flow.executable.export public @f_dispatch_0_add workgroups() -> (index, index, index) {\n"
        "    }\n"
        "  }\n"
        "  util.func public @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "    %0 = flow.dispatch @f_dispatch_0::@f_dispatch_0_add(%a) : (tensor<4xf32>) -> tensor<4xf32>\n"
        "    util.return %0 : tensor<4xf32>\n"
        "  }\n"
        "}\n"
    )
    index = DispatchIndex.from_phase_texts({"flow": flow})
    d = index.get("f_dispatch_0_add")
    assert d.name == "f_dispatch_0" and d.exports == ("f_dispatch_0_add",)
    assert [(loc.line, loc.end_line, loc.role) for loc in d.locations] == [
        (2, 5, "executable"),
        (3, 4, "export"),
        (7, 7, "dispatch"),
    ]
    assert d.locations[-1].function == "f"
    assert d.code_files == () and d.line_in("stream") is None
    with pytest.raises(KeyError):
        index.get("nope")


def test_cached_index_is_shared_until_a_snapshot_changes(compilations):
    c = compilations("mlp", "llvm-cpu")
    first = DispatchIndex.cached(c)
    assert DispatchIndex.cached(c) is first
    flow = c.phase("flow").path
    text = flow.read_text()
    # An edited snapshot (another modification time) is indexed again: one blank line moves every line.
    flow.write_text("\n" + text)
    try:
        again = DispatchIndex.cached(c)
        assert again is not first
        assert (
            again.get("main_dispatch_0").line_in("flow") == first.get("main_dispatch_0").line_in("flow") + 1
        )
    finally:
        flow.write_text(text)
