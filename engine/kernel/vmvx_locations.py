"""Source locations of a VMVX dispatch function in its executable's source.

A module's own VMVX locations fall short two ways: IREE 3.13 writes the debug source map of a linked VMVX
executable (several dispatch functions in one nested module) only for the last function it encodes (docs:
runtime facts §1.2), and unless the module was built with ``--iree-hal-dump-executable-sources-to`` its
locations name the program's lines (a ``torch.aten.log`` of a frontend's program), not the executable
source's (its ``math.log``). The program the host module's locations name is compiled again for VMVX with
``--iree-hal-link-executables=false`` (one function per executable, each with its own map) and its
executables' sources dumped, into a cache folder; a function's map is used only when the rebuilt function
has the same instructions at the same offsets as the module's.
"""

from __future__ import annotations

from pathlib import Path

from engine.kernel.program_rebuild import compiles, program_and_cache_folder
from engine.runtime.vmfb.module import Function, VmfbModule

UNLINKED_FLAG = "--iree-hal-link-executables=false"


def _shape(module: VmfbModule, function: Function) -> list[tuple[int, str]]:
    from engine.runtime.vmfb.disassembler import FunctionDisassembler

    return [(line.pc, line.instruction.opcode.mnemonic) for line in FunctionDisassembler(module).lines(function)]


def _unlinked_build(module_path: Path, timeout_s: float) -> Path | None:
    from engine.folder_lock import folder_lock

    found = program_and_cache_folder(module_path, "vmvx-sources-")
    if found is None:
        return None
    program, out = found
    with folder_lock(out):  # another process rebuilding the same module: wait for its build
        return _unlinked_build_into(out, program, timeout_s)


def _unlinked_build_into(out: Path, program: Path, timeout_s: float) -> Path | None:
    from engine.compiler.job import iree_compile_path
    from engine.compiler.targets import target_flags

    vmfb = out / "unlinked.vmfb"
    if vmfb.exists():
        return vmfb
    out.mkdir(parents=True, exist_ok=True)
    cmd = [iree_compile_path(), str(program), *target_flags("vmvx"), UNLINKED_FLAG,
           f"--iree-hal-dump-executable-sources-to={out / 'sources'}", "-o", str(out / "partial.vmfb")]  # fmt: skip
    if not compiles(cmd, timeout_s):
        return None
    (out / "partial.vmfb").rename(vmfb)
    return vmfb


def rebuilt_locations(
    module_path: str | Path, module: VmfbModule, function: Function, timeout_s: float = 900
) -> dict[int, str]:
    """``{pc: location text}`` of ``function`` (of the nested VMVX ``module``) from an unlinked rebuild of
    the program, or ``{}`` when there is none with the same instructions."""
    from engine.runtime.vmfb.disassembler import FunctionDisassembler
    from engine.runtime.vmfb.module import open_vmfb

    vmfb = _unlinked_build(Path(module_path), timeout_s)
    if vmfb is None:
        return {}
    shape = _shape(module, function)
    for executable in open_vmfb(vmfb).executables:
        if executable.format != "vmvx-bytecode-fb":
            continue
        nested = VmfbModule.from_bytes(memoryview(bytearray(bytes(executable.data))), name=executable.name)
        for candidate in nested.functions:
            if candidate.name == function.name and _shape(nested, candidate) == shape:
                return FunctionDisassembler(nested).instruction_locations(candidate)
    return {}
