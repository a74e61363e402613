"""Which parameters a module loads, read from its host code: the ``io_parameters.load`` and ``.gather`` calls
of a program compiled with external parameters (``engine.runtime.parameters``), each with its scope, keys and
byte lengths, so a user knows which archive (and scope) it needs before running it.

IREE 3.13 passes each call's scope, key table (``{u32 offset, u32 length}`` per parameter), key data (the
key strings) and spans (``{u64 parameter offset, u64 buffer offset, u64 length}``) as rodata buffers
(``vm.const.ref.rodata``); a null scope is the anonymous scope "". A call whose buffers are not rodata the
walk can see is reported with no keys (``resolved`` False), never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.runtime.parameters import SpanTableError, named_spans
from engine.runtime.vmfb.module import VmfbModule
from engine.runtime.vmfb.register_values import import_calls, ref_key

# Argument positions of (scope, key table, key data, spans) in each call (module.c's cconvs).
_ARGUMENTS = {"io_parameters.load": (4, 8, 9, 10), "io_parameters.gather": (4, 6, 7, 8)}


@dataclass(frozen=True)
class ParameterLoad:
    """One ``io_parameters`` call: ``keys`` with the bytes each span reads, in the call's order."""

    function: str
    pc: int
    how: str  # load or gather
    scope: str | None  # None: not resolved
    keys: tuple[tuple[str, int], ...] = ()  # (key, byte length)
    resolved: bool = True


def parameter_loads(module: VmfbModule) -> list[ParameterLoad]:
    """Every ``io_parameters.load``/``gather`` call in ``module``'s functions, with what it names."""
    imports = {imp.ordinal: imp.full_name for imp in module.imports if imp.full_name in _ARGUMENTS}
    if not imports:  # no need to decode the host code
        return []
    segments = module.rodata_segments
    found: list[ParameterLoad] = []
    for function, ins, held, callee, args, _ in import_calls(module, imports):
        name = imports[callee]
        if max(_ARGUMENTS[name]) >= len(args):
            continue
        scope_ref, table, data, spans = (_rodata(held.get(ref_key(args[p])), segments) for p in _ARGUMENTS[name])
        if scope_ref == "null":  # the anonymous scope
            scope = ""
        else:
            scope = bytes(scope_ref.data).decode("utf-8", "replace") if scope_ref is not None else None
        buffers = (table, data, spans)
        keys = _keys(table, data, spans) if "null" not in buffers and None not in buffers else None
        found.append(ParameterLoad(function.name, ins.pc, name.rsplit(".", 1)[1], scope, tuple(keys or ()),
                                   keys is not None and scope is not None))  # fmt: skip
    return found


def _rodata(value, segments):
    """The rodata segment a register holds, "null" for a null ref, None when the walk cannot tell."""
    if value == ("null",):
        return "null"
    if value and value[0] == "rodata" and value[1] < len(segments):
        return segments[value[1]]
    return None


def _keys(table, data, spans) -> list[tuple[str, int]] | None:
    try:
        named = named_spans(bytes(table.data), bytes(data.data), bytes(spans.data))
    except SpanTableError:
        return None  # not as IREE would read them: not listed rather than guessed
    return [(key, length) for key, _, _, length in named]


def describe_parameter_loads(loads: list[ParameterLoad]) -> list[str]:
    """Lines for ``iree-lens inspect --output=parameters``: by scope, each key once with its bytes."""
    if not loads:
        return ["the module loads no parameters (it imports no io_parameters.load or gather)"]
    by_scope: dict[str | None, dict[str, int]] = {}
    unresolved = 0
    for load in loads:
        if not load.resolved:
            unresolved += 1
            continue
        keys = by_scope.setdefault(load.scope, {})
        for key, length in load.keys:
            keys[key] = keys.get(key, 0) + length
    lines = []
    for scope, keys in by_scope.items():
        named = "an unknown scope" if scope is None else (f"scope {scope!r}" if scope else "the anonymous scope")
        total = sum(keys.values())
        flag = "" if scope is None else f" (--parameters={scope + '=' if scope else ''}FILE)"
        lines.append(f"{named}{flag}: {len(keys)} parameters, {total:,} bytes")
        lines += [f"  {key}: {length:,} bytes" for key, length in keys.items()]
    if unresolved:
        lines.append(f"{unresolved} call(s) whose keys are not rodata the host code names directly: not listed")
    return lines
