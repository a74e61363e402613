"""Register-to-register ops (arithmetic, bitwise, shifts, compares, casts, math), from one expression table.

Each row gives an opcode symbol and a Python expression of IREE's ``ops.h`` semantics over the
operands ``x``, ``y``, ``z`` (in encoding order). Operand values by register kind: i32 → the unsigned
word, i64 → the unsigned 64-bit value, f32/f64 → the Python float, ref → the object. ``xr``/``yr``/``zr``
are the raw words/bits of float operands (to copy floats without touching NaN payloads).

A result is masked to its width (i32/i64), or rounded to float32/converted to f64 bits (f32/f64). A row
whose expression starts with ``=`` yields raw result bits (no float conversion) and one starting with
``?`` yields a boolean (written as 0/1). From each row a closure factory is generated once, at import,
with the register numbers and the next pc bound as closure constants, so running an instruction is one
Python call with no decoding and no dispatch on the opcode.
"""

from __future__ import annotations

import math
import re

from engine.runtime import isa
from engine.runtime.vm import numeric as N
from engine.runtime.vm.handlers import HANDLERS, CompileEnv, handler

S32 = "((%s ^ 0x80000000) - 0x80000000)"
S64 = "((%s ^ 0x8000000000000000) - 0x8000000000000000)"


def _s32(v: str) -> str:
    return S32 % v


def _s64(v: str) -> str:
    return S64 % v


_X32, _Y32, _Z32 = _s32("x"), _s32("y"), _s32("z")
_X64, _Y64, _Z64 = _s64("x"), _s64("y"), _s64("z")

# symbol -> expression
ROWS: dict[str, str] = {
    # --- i32 arithmetic (wraps modulo 2**32) ---
    "AddI32": "x + y",
    "SubI32": "x - y",
    "MulI32": "x * y",
    # i32 quotients through a double are exact: a non-integer quotient is at least 1/|y| from an integer,
    # more than the rounding error |x/y| * 2**-53 < 2**-22/|y|; Python raises ZeroDivisionError like c_div.
    "DivI32S": f"int({_X32} / {_Y32})",
    "DivI32U": "x // y",
    "RemI32S": f"{_X32} - {_Y32} * int({_X32} / {_Y32})",
    "RemI32U": "x % y",
    "FMAI32": "x * y + z",
    "AbsI32": f"abs({_X32})",
    "MinI32S": f"y if {_Y32} < {_X32} else x",
    "MinI32U": "y if y < x else x",
    "MaxI32S": f"y if {_X32} < {_Y32} else x",
    "MaxI32U": "y if x < y else x",
    "NotI32": "~x",
    "AndI32": "x & y",
    "OrI32": "x | y",
    "XorI32": "x ^ y",
    "CtlzI32": "32 - x.bit_length()",
    "ShlI32": "x << (y & 31)",
    "ShrI32S": f"{_X32} >> (y & 31)",
    "ShrI32U": "x >> (y & 31)",
    # --- i64 ---
    "AddI64": "x + y",
    "SubI64": "x - y",
    "MulI64": "x * y",
    "DivI64S": f"c_div({_X64}, {_Y64})",
    "DivI64U": "x // y",
    "RemI64S": f"c_rem({_X64}, {_Y64})",
    "RemI64U": "x % y",
    "FMAI64": "x * y + z",
    "AbsI64": f"abs({_X64})",
    "MinI64S": f"y if {_Y64} < {_X64} else x",
    "MinI64U": "y if y < x else x",
    "MaxI64S": f"y if {_X64} < {_Y64} else x",
    "MaxI64U": "y if x < y else x",
    "NotI64": "~x",
    "AndI64": "x & y",
    "OrI64": "x | y",
    "XorI64": "x ^ y",
    "CtlzI64": "64 - x.bit_length()",
    "ShlI64": "x << (y & 63)",
    "ShrI64S": f"{_X64} >> (y & 63)",
    "ShrI64U": "x >> (y & 63)",
    # --- truncations and extensions (trunc zero-extends into the register, ops.h) ---
    "TruncI32I8": "x & 0xFF",
    "TruncI32I16": "x & 0xFFFF",
    "TruncI64I32": "x",
    "ExtI8I32S": "((x & 0xFF) ^ 0x80) - 0x80",
    "ExtI8I32U": "x & 0xFF",
    "ExtI16I32S": "((x & 0xFFFF) ^ 0x8000) - 0x8000",
    "ExtI16I32U": "x & 0xFFFF",
    "ExtI32I64S": _X32,
    "ExtI32I64U": "x",
    # --- integer and ref compares ---
    "CmpEQI32": "?x == y",
    "CmpNEI32": "?x != y",
    "CmpLTI32S": "?(x ^ 0x80000000) < (y ^ 0x80000000)",
    "CmpLTI32U": "?x < y",
    "CmpNZI32": "?x != 0",
    "CmpEQI64": "?x == y",
    "CmpNEI64": "?x != y",
    "CmpLTI64S": "?(x ^ 0x8000000000000000) < (y ^ 0x8000000000000000)",
    "CmpLTI64U": "?x < y",
    "CmpNZI64": "?x != 0",
    "CmpEQRef": "?x is y",
    "CmpNERef": "?x is not y",
    "CmpNZRef": "?x is not None",
    # --- f32 (computed in double, rounded once: exact for + - * / sqrt) ---
    "AddF32": "x + y",
    "SubF32": "x - y",
    "MulF32": "x * y",
    "DivF32": "fdiv(x, y)",
    "RemF32": "ieee_remainder(x, y)",
    "FMAF32": "f32_round(x * y) + z",  # FP_FAST_FMAF is not defined for generic x86-64: a*b rounded, then +c
    "AbsF32": "=xr & 0x7FFFFFFF",
    "NegF32": "=xr ^ 0x80000000",
    "CeilF32": "L32['ceil'](x)",
    "FloorF32": "L32['floor'](x)",
    "RoundF32": "L32['round'](x)",
    "RoundF32Even": "round_even(x)",
    "MinF32": "=yr if y < x else xr",
    "MaxF32": "=yr if x < y else xr",
    "AtanF32": "L32['atan'](x)",
    "Atan2F32": "L32['atan2'](x, y)",
    "CosF32": "L32['cos'](x)",
    "SinF32": "L32['sin'](x)",
    "ExpF32": "L32['exp'](x)",
    "Exp2F32": "L32['exp2'](x)",
    "ExpM1F32": "L32['expm1'](x)",
    "LogF32": "L32['log'](x)",
    "Log10F32": "L32['log10'](x)",
    "Log1pF32": "L32['log1p'](x)",
    "Log2F32": "L32['log2'](x)",
    "PowF32": "L32['pow'](x, y)",
    "RsqrtF32": "fdiv(1.0, L32['sqrt'](x))",
    "SqrtF32": "L32['sqrt'](x)",
    "TanhF32": "L32['tanh'](x)",
    "ErfF32": "L32['erf'](x)",
    "CastSI32F32": _X32,
    "CastUI32F32": "x",
    "CastF32SI32": "cast_f32_si32(x)",
    "CastF32UI32": "cast_f32_si32(x)",  # (uint32_t)llroundf(x): the same low 32 bits
    "CastF32SI64": "cast_f32_si64(x)",
    "CastF32UI64": "cast_f32_ui64(x)",
    "CastSI64F32": f"int_to_f32({_X64})",
    "CastUI64F32": "int_to_f32(x)",
    "BitcastI32F32": "=x",
    "BitcastF32I32": "xr",
    "CmpEQF32O": "?x == y",
    "CmpEQF32U": "?x != x or y != y or x == y",
    "CmpNEF32O": "?x != y",
    "CmpNEF32U": "?x != y",
    "CmpLTF32O": "?x < y",
    "CmpLTF32U": "?x != x or y != y or x < y",
    "CmpLTEF32O": "?x <= y",
    "CmpLTEF32U": "?x != x or y != y or x <= y",
    "CmpNaNF32": "?x != x",
    # --- f64 ---
    "AddF64": "x + y",
    "SubF64": "x - y",
    "MulF64": "x * y",
    "DivF64": "fdiv(x, y)",
    "RemF64": "ieee_remainder(x, y)",
    "FMAF64": "x * y + z",
    "AbsF64": "=xr & 0x7FFFFFFFFFFFFFFF",
    "NegF64": "=xr ^ 0x8000000000000000",
    "CeilF64": "L64['ceil'](x)",
    "FloorF64": "L64['floor'](x)",
    "RoundF64": "L64['round'](x)",
    "RoundF64Even": "round_even(x)",
    "MinF64": "=yr if y < x else xr",
    "MaxF64": "=yr if x < y else xr",
    "AtanF64": "L64['atan'](x)",
    "Atan2F64": "L64['atan2'](x, y)",
    "CosF64": "L64['cos'](x)",
    "SinF64": "L64['sin'](x)",
    "ExpF64": "L64['exp'](x)",
    "Exp2F64": "L64['exp2'](x)",
    "ExpM1F64": "L64['expm1'](x)",
    "LogF64": "L64['log'](x)",
    "Log10F64": "L64['log10'](x)",
    "Log1pF64": "L64['log1p'](x)",
    "Log2F64": "L64['log2'](x)",
    "PowF64": "L64['pow'](x, y)",
    "RsqrtF64": "fdiv(1.0, L64['sqrt'](x))",
    "SqrtF64": "L64['sqrt'](x)",
    "TanhF64": "L64['tanh'](x)",
    "ErfF64": "L64['erf'](x)",
    "TruncF64F32": "x",
    "ExtF32F64": "x",
    "CastSI32F64": f"float({_X32})",
    "CastUI32F64": "float(x)",
    "CastF64SI32": "cast_f32_si32(f32_round(x))",  # ops.h calls lroundf on the double (converted to float)
    "CastF64UI32": "cast_f32_si32(f32_round(x))",
    "CastSI64F64": f"float({_X64})",
    "CastUI64F64": "float(x)",
    "CastF64SI64": "llround(x)",
    "CastF64UI64": "llround(x)",
    "BitcastI64F64": "=x",
    "BitcastF64I64": "xr",
    "CmpEQF64O": "?x == y",
    "CmpEQF64U": "?x != x or y != y or x == y",
    "CmpNEF64O": "?x != y",
    "CmpNEF64U": "?x != y",
    "CmpLTF64O": "?x < y",
    "CmpLTF64U": "?x != x or y != y or x < y",
    "CmpLTEF64O": "?x <= y",
    "CmpLTEF64U": "?x != x or y != y or x <= y",
    "CmpNaNF64": "?x != x",
}

_DEFAULT_NAN = N.f64_of(0xFFF8000000000000)  # x86's default NaN (sign bit set), what 0.0/0.0 gives in C


def fdiv(a: float, b: float) -> float:
    """IEEE division (Python raises on division by zero; C gives ±inf or NaN)."""
    try:
        return a / b
    except ZeroDivisionError:
        if a != a:
            return a
        if a == 0.0:
            return _DEFAULT_NAN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def ieee_remainder(a: float, b: float) -> float:
    if a != a:
        return a
    if b != b:
        return b
    if math.isinf(a) or b == 0.0:
        return _DEFAULT_NAN
    if math.isinf(b):
        return a
    return math.remainder(a, b)


def int_to_f32(n: int) -> float:
    """A 64-bit integer converted to float32 with one correct rounding (C's ``(float)n``)."""
    m = abs(n)
    if m < (1 << 53):
        return float(n)  # exact in double; f32_bits then rounds once
    shift = m.bit_length() - 24
    q, rem = divmod(m, 1 << shift)
    half = 1 << (shift - 1)
    if rem > half or (rem == half and q & 1):
        q += 1
    v = float(q << shift)
    return -v if n < 0 else v


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_rem(a: int, b: int) -> int:
    return a - b * c_div(a, b)


_NAMESPACE = {
    "fdiv": fdiv,
    "ieee_remainder": ieee_remainder,
    "int_to_f32": int_to_f32,
    "c_div": c_div,
    "c_rem": c_rem,
    "f32_round": N.f32_round,
    "round_even": N.round_even,
    "cast_f32_si32": N.cast_f32_si32,
    "cast_f32_si64": N.cast_f32_si64,
    "cast_f32_ui64": N.cast_f32_ui64,
    "llround": N.llround,
    "L32": N.LIBM_F32,
    "L64": N.LIBM_F64,
    "F32": N.f32_of,
    "F32B": N.f32_bits,
    "F64": N.f64_of,
    "F64B": N.f64_bits,
}

_KIND = {isa.REG_I32: "i", isa.REG_I64: "I", isa.REG_F32: "f", isa.REG_F64: "F", isa.REG_REF: "r"}


def _uses(expr: str, name: str) -> bool:
    return re.search(rf"\b{name}\b", expr) is not None


def generate_factory_source(symbol: str, expr: str) -> str:
    """Python source of ``make(<registers>, n)`` returning the closure of one row."""
    op = isa.BY_SYMBOL[symbol]
    reads = [o for o in op.operands if o.access == "read"]
    (write,) = [o for o in op.operands if o.access == "write"]
    names = ["x", "y", "z"][: len(reads)]
    mode = ""
    if expr[0] in "=?":
        mode, expr = expr[0], expr[1:]
    params = [f"a{k}" for k in range(len(reads))]
    pre = []
    body = []
    for k, (o, v) in enumerate(zip(reads, names)):
        kind = _KIND[o.kind]
        a = f"a{k}"
        if kind == "r":
            pre.append(f"    {a} &= 0x3FFF")
            body.append(f"        {v} = r[{a}]")
            continue
        pre.append(f"    {a} &= 0x7FFF")
        if kind in "IF":
            pre.append(f"    {a}h = {a} + 1")
            raw = f"(i[{a}] | (i[{a}h] << 32))"
        else:
            raw = f"i[{a}]"
        if kind in "iI":
            body.append(f"        {v} = {raw}")
            if _uses(expr, v + "r"):
                body.append(f"        {v}r = {v}")
        else:
            need_value = _uses(expr, v)
            if _uses(expr, v + "r") or not need_value:
                body.append(f"        {v}r = {raw}")
                if need_value:
                    body.append(f"        {v} = {'F32' if kind == 'f' else 'F64'}({v}r)")
            else:
                body.append(f"        {v} = {'F32' if kind == 'f' else 'F64'}({raw})")
    wkind = _KIND[write.kind]
    pre.append("    w &= 0x7FFF")
    if mode == "?":
        body.append(f"        i[w] = 1 if ({expr}) else 0")
    elif wkind == "i":
        body.append(f"        i[w] = ({expr}) & 0xFFFFFFFF")
    elif wkind == "f":
        body.append(
            f"        i[w] = ({expr}) & 0xFFFFFFFF" if mode == "=" else f"        i[w] = F32B({expr})"
        )
    else:
        pre.append("    wh = w + 1")
        if wkind == "I" or mode == "=":
            body.append(f"        v = ({expr}) & 0xFFFFFFFFFFFFFFFF")
        else:
            body.append(f"        v = F64B({expr})")
        body.append("        i[w] = v & 0xFFFFFFFF")
        body.append("        i[wh] = v >> 32")
    src = [
        f"def make({', '.join(params + ['w', 'n'])}):",
        *pre,
        "    def h(i, r, t):",
        *body,
        "        return n",
        "    return h",
    ]
    return "\n".join(src)


_FACTORY_NAMES = re.compile(r"\b(a\d+h?|wh?)\b")


def inline_source(symbol: str, operands: tuple, indent: str = "    ") -> list[str]:
    """Statements running one instruction of a row with its registers written in as numbers (what a fused
    block of straight-line code (``engine.runtime.vm.fusion``) is made of); the same expressions as the
    closure ``generate_factory_source`` makes."""
    op = isa.BY_SYMBOL[symbol]
    reads = [o for o in op.operands if o.access == "read"]
    lines = generate_factory_source(symbol, ROWS[symbol]).splitlines()
    body = lines[lines.index("    def h(i, r, t):") + 1 : -2]  # between the def and "return n"
    values: dict[str, int] = {}
    for k, (o, raw) in enumerate(
        zip(reads, [operands[p] for p, o in enumerate(op.operands) if o.access == "read"])
    ):
        values[f"a{k}"] = raw & (0x3FFF if _KIND[o.kind] == "r" else 0x7FFF)
        values[f"a{k}h"] = values[f"a{k}"] + 1
    (wpos,) = [p for p, o in enumerate(op.operands) if o.access == "write"]
    values["w"] = operands[wpos] & 0x7FFF
    values["wh"] = values["w"] + 1
    lines = [_FACTORY_NAMES.sub(lambda m: str(values[m.group(1)]), line.strip()) for line in body]
    # An operand's signed value used more than once (c_rem-like rows) is computed once.
    out = []
    for line in lines:
        for v in ("x", "y", "z"):
            signed = S32 % v
            if line.count(signed) > 1:
                out.append(f"{v}s = {signed}")
                line = line.replace(signed, f"{v}s")
        out.append(line)
    return [indent + line for line in out]


def _register_row(symbol: str, expr: str) -> None:
    ns = dict(_NAMESPACE)
    exec(compile(generate_factory_source(symbol, expr), f"<vm op {symbol}>", "exec"), ns)
    make = ns["make"]
    op = isa.BY_SYMBOL[symbol]
    positions = [k for k, o in enumerate(op.operands) if o.access == "read"] + [
        k for k, o in enumerate(op.operands) if o.access == "write"
    ]

    def factory(ins, env: CompileEnv, make=make, positions=positions):
        ops = ins.operands
        return make(*[ops[p] for p in positions], env.next_pc)

    handler(symbol)(factory)


for _symbol, _expr in ROWS.items():
    _register_row(_symbol, _expr)

NAMESPACE = _NAMESPACE  # the helpers the rows' expressions call (inline_source's statements need them too)

__all__ = [
    "ROWS",
    "HANDLERS",
    "NAMESPACE",
    "fdiv",
    "ieee_remainder",
    "int_to_f32",
    "generate_factory_source",
    "inline_source",
]
