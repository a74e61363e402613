"""Where a module's host code dispatches: every ``hal.command_buffer.dispatch`` call, by export name.

Call sites are found in the host bytecode: IREE 3.13
records ``hal.command_buffer.dispatch(cmd, executable, function, ...)`` where ``function`` is the i64
result of ``hal.executable.lookup.function(executable, name)`` and ``name`` is a rodata string holding the
export name. A straight-line walk of each function tracks which register holds which rodata segment and
which looked-up export (following branch remaps and forgetting registers when they are overwritten), so
each dispatch call resolves to an export name. A dispatch whose function operand is a constant (no
lookup) is reported with that ordinal and no export name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from engine.runtime.vmfb.disassembler import FunctionDisassembler
from engine.runtime.vmfb.module import VmfbModule
from engine.runtime.vmfb.register_values import import_calls, ref_key, register_key


@dataclass(frozen=True)
class CallSite:
    """A ``hal.command_buffer.dispatch`` call in a module's host code.

    ``export`` is the looked-up export name (None when unresolved); ``ordinal`` is the constant function
    ordinal when the call used one instead of a lookup. ``text`` is the instruction as
    ``iree-dump-module --output=disassembly`` prints it.
    """

    function_ordinal: int
    function_name: str
    pc: int
    export: str | None
    ordinal: int | None
    lookup_pc: int | None
    text: str
    # The workgroup count the host code passes, where it is a constant the walk can see (None elsewhere).
    workgroups: tuple[int | None, int | None, int | None] = (None, None, None)


def calls_per_export(module: VmfbModule) -> Counter[str]:
    """How many ``hal.command_buffer.dispatch`` calls name each export: several where IREE deduplicated an
    executable dispatched from several places of the program."""
    return Counter(site.export for site in dispatch_call_sites(module) if site.export)


def dispatch_call_sites(module: VmfbModule) -> list[CallSite]:
    """Every ``hal.command_buffer.dispatch`` call in ``module``'s functions, resolved to export names."""
    imports = {imp.full_name: imp.ordinal for imp in module.imports}
    dispatch = imports.get("hal.command_buffer.dispatch")
    lookup = imports.get("hal.executable.lookup.function")
    if dispatch is None:
        return []
    segments = module.rodata_segments
    disassembler = FunctionDisassembler(module)
    sites: list[CallSite] = []
    # Registers hold ("rodata", ordinal), ("const", value) or ("export", name, lookup_pc).
    for function, ins, held, callee, args, results in import_calls(module, {dispatch, lookup}):
        if callee == lookup and len(args) >= 2 and results:
            name_reg = held.get(ref_key(args[1]))
            if name_reg and name_reg[0] == "rodata" and name_reg[1] < len(segments):
                name = segments[name_reg[1]].text()
                if name:
                    held.record_result(register_key(results[0]), ("export", name, ins.pc))
        elif callee == dispatch and len(args) >= 3:
            fn = held.get(register_key(args[2]))
            counts = [held.get(register_key(a)) if i < len(args) else None for i, a in enumerate(args[3:6], 3)]
            workgroups = tuple(c[1] if c and c[0] == "const" else None for c in counts)
            sites.append(
                CallSite(
                    function_ordinal=function.ordinal,
                    function_name=function.name,
                    pc=ins.pc,
                    export=fn[1] if fn and fn[0] == "export" else None,
                    ordinal=fn[1] if fn and fn[0] == "const" else None,
                    lookup_pc=fn[2] if fn and fn[0] == "export" else None,
                    text=disassembler.instruction_text(ins, {}),
                    workgroups=(*workgroups, None, None, None)[:3],  # type: ignore[arg-type]
                )
            )
    return sites
