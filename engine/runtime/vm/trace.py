"""Text of instructions and executed steps: what ``iree-lens run --engine=debug --trace`` prints.

One executed instruction is one line::

    @module.function+0x0012  vm.add.i32 %i0, %i1 -> %i2  | %i0=3 %i1=4 -> %i2=7
"""

from __future__ import annotations

from typing import Any

from engine.runtime import isa
from engine.runtime.vm import numeric as N
from engine.runtime.vm.values import VmBuffer, VmList, ref_type_name


def register_name(raw: int, kind: str) -> str:
    """``%i3``, ``%i4:5`` (i64/f64 pairs) or ``%r2``/``%R2`` (MOVE)."""
    if kind == isa.REG_REF or (kind == "any" and raw & isa.REF_BANK_BIT):
        idx = raw & isa.REF_INDEX_MASK
        return f"%R{idx}" if raw & isa.REF_MOVE_BIT else f"%r{idx}"
    idx = raw & isa.PRIMITIVE_INDEX_MASK
    if kind in (isa.REG_I64, isa.REG_F64):
        return f"%i{idx}:{idx + 1}"
    return f"%i{idx}"


_LIST_KIND = {
    "i32": isa.REG_I32,
    "i64": isa.REG_I64,
    "f32": isa.REG_F32,
    "f64": isa.REG_F64,
    "ref": isa.REG_REF,
    "any": "any",
}


def _remap_text(pairs) -> str:
    return "(" + ", ".join(f"{register_name(s, 'any')}->{register_name(d, 'any')}" for s, d in pairs) + ")"


def format_operand(spec: isa.Operand, value: Any) -> str:
    k = spec.kind
    if k in isa.REGISTER_KINDS:
        return register_name(value, k)
    if k == isa.REG_LIST:
        kind = _LIST_KIND.get(spec.elem or "any", "any")
        return "[" + ", ".join(register_name(v, kind) for v in value) + "]"
    if k == isa.REMAP:
        return _remap_text(value) if value else ""
    if k == isa.BRANCH:
        return f"^{value:#06x}"
    if k == isa.FUNC:
        return f"import#{value & 0x7FFFFFFF}" if value & isa.IMPORT_BIT else f"func#{value}"
    if k == isa.STR16:
        return repr(value)
    if k == isa.BR_TABLE_CASES:
        return "{" + ", ".join(f"^{t:#06x}{_remap_text(p) if p else ''}" for t, p in value) + "}"
    if k == isa.SEGMENT_SIZES:
        return "segments[" + ", ".join(str(v) for v in value) + "]"
    if k == isa.TYPE:
        return f"type#{value}"
    if k == isa.RODATA:
        return f"rodata#{value}"
    if k == isa.GLOBAL:
        return f"global#{value}"
    return repr(value)


def format_instruction(ins, names: dict | None = None) -> str:
    """``vm.add.i32 %i0, %i1 -> %i2`` (written registers after the arrow)."""
    op = ins.opcode
    if op.is_block_marker:
        return "<block>"
    reads, writes = [], []
    for spec, value in zip(op.operands, ins.operands):
        text = format_operand(spec, value)
        if spec.kind == isa.FUNC and names:
            text = names.get(value, text)
        if text == "":
            continue
        (writes if spec.access == "write" else reads).append(text)
    s = f"{op.mnemonic} {', '.join(reads)}".rstrip()
    if writes:
        s += " -> " + ", ".join(writes)
    return s


def describe_ref(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, VmBuffer):
        return f"!vm.buffer<{v.length}{'' if v.mutable else ',ro'}>"
    if isinstance(v, VmList):
        return f"!vm.list<{v.element_type}>[{len(v)}]"
    describe = getattr(v, "describe", None)
    if callable(describe):
        try:
            return str(describe())
        except Exception:
            pass
    return f"!{ref_type_name(v)}"


def format_value(kind: str, words: tuple) -> str:
    """A register value for display: ``kind`` is an isa register kind, ``words`` its raw word(s)."""
    if kind == isa.REG_I32:
        return str(N.s32(words[0]))
    if kind == isa.REG_I64:
        return str(N.s64(words[0] | (words[1] << 32)))
    if kind == isa.REG_F32:
        return repr(N.f32_of(words[0]))
    if kind == isa.REG_F64:
        return repr(N.f64_of(words[0] | (words[1] << 32)))
    return describe_ref(words[0])


def format_step(record) -> str:
    """One line for one executed instruction (a ``StepRecord``) with the values it read and wrote."""
    loc = record.location
    text = format_instruction(record.instruction)
    parts = [f"{loc}  {text}"]
    vals = []
    for name, value in record.read:
        vals.append(f"{name}={value}")
    if record.written:
        w = " ".join(f"{n}={describe_ref(v) if n.startswith('%r') else v!r}" for n, v in record.written)
        vals.append("-> " + w)
    if record.import_call is not None:
        ic = record.import_call
        vals.append(f"call {ic.name}({', '.join(_short(a) for a in ic.args)})")
    if vals:
        parts.append(" | " + " ".join(vals))
    return "".join(parts)


def _short(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_short(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(_short(x) for x in v) + ")"
    if isinstance(v, (int, float)):
        return repr(v)
    return describe_ref(v)


def read_values(ins, i: list, r: list) -> tuple[tuple[str, str], ...]:
    """The read register operands of an instruction with their current values (before it runs)."""
    out = []
    for spec, value in zip(ins.opcode.operands, ins.operands):
        if spec.access != "read" or spec.kind not in isa.REGISTER_KINDS:
            continue
        if spec.kind == isa.REG_REF:
            idx = value & isa.REF_INDEX_MASK
            out.append((register_name(value, spec.kind), describe_ref(r[idx]) if idx < len(r) else "?"))
            continue
        idx = value & isa.PRIMITIVE_INDEX_MASK
        if idx + (1 if spec.kind in (isa.REG_I64, isa.REG_F64) else 0) >= len(i):
            continue
        words = (i[idx], i[idx + 1] if idx + 1 < len(i) else 0)
        out.append((register_name(value, spec.kind), format_value(spec.kind, words)))
    return tuple(out)
