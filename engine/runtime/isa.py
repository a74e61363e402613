"""The VM bytecode instruction set of IREE 3.13 (bytecode version 17.0): one table for every opcode.

Each entry binds the opcode number, IREE's symbol (``AddI32``, exactly as in IREE's ``isa.json``),
the MLIR mnemonic (``vm.add.i32``) and the operand encoding: the fields in the order they are
encoded after the opcode byte(s). The decoder, the disassembler and the VM's handlers (bound by
symbol) are all driven by this table so they cannot drift apart.

Operand spec tokens (``kind:name``) in the table rows:

* ``Ri32`` / ``Wi64`` / ``Rf32`` / ``Wref`` ...: a register read (R) or written (W), u16 encoded;
  ``.mv`` marks a ref operand that may carry the MOVE bit.
* ``imm_i32`` / ``imm_i64`` / ``imm_f32`` / ``imm_f64``: an immediate (4 or 8 bytes).
* ``global`` (u32 byte offset for primitive globals, ref ordinal for ref globals), ``type`` (u32
  type-table index), ``rodata`` (u32 segment ordinal), ``func`` (u32 ordinal, bit 31 = import),
  ``branch`` (u32 function-relative pc of the target block marker).
* ``str16``: u16 length + UTF-8 bytes, unaligned.
* ``Rlist.<t>`` / ``Wlist.<t>``: register list (align pc to 2, u16 count, count x u16).
* ``segment_sizes``: like a register list, but the u16 values are span sizes (0xFFFF = not a span).
* ``remap``: branch operand remap list (align 2, u16 count, count x (u16 src, u16 dst)).
* ``table_size``: u16 br_table case count; ``cases``: table_size x (u32 target, remap list).
"""

from __future__ import annotations

from dataclasses import dataclass

# Operand kinds (Operand.kind).
REG_I32 = "reg_i32"
REG_I64 = "reg_i64"
REG_F32 = "reg_f32"
REG_F64 = "reg_f64"
REG_REF = "reg_ref"
IMM_I32 = "imm_i32"
IMM_I64 = "imm_i64"
IMM_F32 = "imm_f32"
IMM_F64 = "imm_f64"
GLOBAL = "global"
TYPE = "type"
RODATA = "rodata"
FUNC = "func"
BRANCH = "branch"
STR16 = "str16"
REG_LIST = "reg_list"
SEGMENT_SIZES = "segment_sizes"
REMAP = "remap"
TABLE_SIZE = "table_size"
BR_TABLE_CASES = "br_table_cases"

REGISTER_KINDS = frozenset({REG_I32, REG_I64, REG_F32, REG_F64, REG_REF})

# Register encoding (u16): bit 15 selects the ref bank; for refs bit 14 is MOVE.
REF_BANK_BIT = 0x8000
REF_MOVE_BIT = 0x4000
REF_INDEX_MASK = 0x3FFF
PRIMITIVE_INDEX_MASK = 0x7FFF
# Function ordinal encoding: bit 31 marks an import.
IMPORT_BIT = 0x80000000

PREFIX_EXT_F32 = 0xE0
PREFIX_EXT_F64 = 0xE1
BLOCK_MARKER = 0x79

# Instructions that end a basic block (control leaves or may leave the straight line).
TERMINATORS = frozenset(
    {
        "Branch",
        "CondBranch",
        "BranchTable",
        "Return",
        "Fail",
        "Yield",
        "Break",
        "CondBreak",
        "CallYieldable",
        "CallVariadicYieldable",
    }
)


@dataclass(frozen=True, slots=True)
class Operand:
    """One encoded operand field of an instruction."""

    kind: str  # one of the kind constants above
    name: str  # IREE's field name (``result``, ``callee_ordinal``, ...)
    access: str | None = None  # "read" / "write" for registers and register lists, else None
    move_allowed: bool = False  # a ref register that may carry the MOVE bit
    elem: str | None = None  # register lists: element type (i32/i64/f32/f64/ref/any)


@dataclass(frozen=True, slots=True)
class Opcode:
    """One instruction of the VM ISA."""

    set: str  # "core", "ext_f32" or "ext_f64"
    prefix: int | None  # 0xE0 / 0xE1 for the extension sets, None for core
    code: int  # the opcode byte (after the prefix, if any)
    symbol: str  # IREE's symbol, e.g. "AddI32"; VM handlers bind by this name
    mnemonic: str  # "vm.add.i32"; "" for the block marker and the prefixes
    operands: tuple[Operand, ...]

    @property
    def encoding(self) -> bytes:
        """The opcode bytes as they appear in the bytecode."""
        return bytes([self.code]) if self.prefix is None else bytes([self.prefix, self.code])

    @property
    def is_terminator(self) -> bool:
        return self.symbol in TERMINATORS

    @property
    def is_block_marker(self) -> bool:
        return self.prefix is None and self.code == BLOCK_MARKER

    @property
    def is_prefix(self) -> bool:
        return self.prefix is None and self.code in (PREFIX_EXT_F32, PREFIX_EXT_F64)

    @property
    def feature(self) -> int:
        """The FeatureBits a function needs to use this opcode (EXT_F32=1, EXT_F64=2, else 0)."""
        return {None: 0, PREFIX_EXT_F32: 1, PREFIX_EXT_F64: 2}[self.prefix]


_REG_KINDS = {"i32": REG_I32, "i64": REG_I64, "f32": REG_F32, "f64": REG_F64, "ref": REG_REF}
_SIMPLE_KINDS = {
    "imm_i32": IMM_I32,
    "imm_i64": IMM_I64,
    "imm_f32": IMM_F32,
    "imm_f64": IMM_F64,
    "global": GLOBAL,
    "type": TYPE,
    "rodata": RODATA,
    "func": FUNC,
    "branch": BRANCH,
    "str16": STR16,
    "segment_sizes": SEGMENT_SIZES,
    "remap": REMAP,
    "table_size": TABLE_SIZE,
    "cases": BR_TABLE_CASES,
}


def _parse_operand(token: str) -> Operand:
    spec, name = token.split(":")
    if spec in _SIMPLE_KINDS:
        return Operand(_SIMPLE_KINDS[spec], name)
    access = {"R": "read", "W": "write"}[spec[0]]
    if spec[1:].startswith("list."):
        return Operand(REG_LIST, name, access, elem=spec[6:])
    typ, _, mv = spec[1:].partition(".")
    return Operand(_REG_KINDS[typ], name, access, move_allowed=mv == "mv")


_CORE_TABLE: tuple[tuple[int, str, str, str], ...] = (
    (0x00, "GlobalLoadI32", "vm.global.load.i32", "global:byte_offset Wi32:result"),
    (0x01, "GlobalStoreI32", "vm.global.store.i32", "global:byte_offset Ri32:value"),
    (0x02, "GlobalLoadIndirectI32", "vm.global.load.indirect.i32", "Ri32:byte_offset Wi32:result"),
    (0x03, "GlobalStoreIndirectI32", "vm.global.store.indirect.i32", "Ri32:byte_offset Ri32:value"),
    (0x04, "GlobalLoadI64", "vm.global.load.i64", "global:byte_offset Wi64:result"),
    (0x05, "GlobalStoreI64", "vm.global.store.i64", "global:byte_offset Ri64:value"),
    (0x06, "GlobalLoadIndirectI64", "vm.global.load.indirect.i64", "Ri32:byte_offset Wi64:result"),
    (0x07, "GlobalStoreIndirectI64", "vm.global.store.indirect.i64", "Ri32:byte_offset Ri64:value"),
    (0x08, "GlobalLoadRef", "vm.global.load.ref", "global:global type:type_def Wref.mv:value"),
    (0x09, "GlobalStoreRef", "vm.global.store.ref", "global:global type:type_def Rref.mv:value"),
    (0x0A, "GlobalLoadIndirectRef", "vm.global.load.indirect.ref", "Ri32:global type:type_def Wref.mv:value"),
    (
        0x0B,
        "GlobalStoreIndirectRef",
        "vm.global.store.indirect.ref",
        "Ri32:global type:type_def Rref.mv:value",
    ),
    (0x0C, "ConstI32Zero", "vm.const.i32.zero", "Wi32:result"),
    (0x0D, "ConstI32", "vm.const.i32", "imm_i32:value Wi32:result"),
    (0x0E, "ConstI64Zero", "vm.const.i64.zero", "Wi64:result"),
    (0x0F, "ConstI64", "vm.const.i64", "imm_i64:value Wi64:result"),
    (0x10, "ConstRefZero", "vm.const.ref.zero", "Wref.mv:result"),
    (0x11, "ConstRefRodata", "vm.const.ref.rodata", "rodata:rodata Wref.mv:value"),
    (0x12, "ListAlloc", "vm.list.alloc", "type:element_type Ri32:initial_capacity Wref.mv:result"),
    (0x13, "ListReserve", "vm.list.reserve", "Rref:list Ri32:minimum_capacity"),
    (0x14, "ListSize", "vm.list.size", "Rref:list Wi32:result"),
    (0x15, "ListResize", "vm.list.resize", "Rref:list Ri32:new_size"),
    (0x16, "ListGetI32", "vm.list.get.i32", "Rref:list Ri32:index Wi32:result"),
    (0x17, "ListSetI32", "vm.list.set.i32", "Rref:list Ri32:index Ri32:value"),
    (0x18, "ListGetI64", "vm.list.get.i64", "Rref:list Ri32:index Wi64:result"),
    (0x19, "ListSetI64", "vm.list.set.i64", "Rref:list Ri32:index Ri64:value"),
    (0x1A, "ListGetRef", "vm.list.get.ref", "Rref:list Ri32:index type:type_def Wref.mv:result"),
    (0x1B, "ListSetRef", "vm.list.set.ref", "Rref:list Ri32:index Rref.mv:value"),
    (0x1C, "SelectI32", "vm.select.i32", "Ri32:condition Ri32:true_value Ri32:false_value Wi32:result"),
    (0x1D, "SelectI64", "vm.select.i64", "Ri32:condition Ri64:true_value Ri64:false_value Wi64:result"),
    (
        0x1E,
        "SelectRef",
        "vm.select.ref",
        "Ri32:condition type:true_value_type_def Rref.mv:true_value Rref.mv:false_value Wref.mv:result",
    ),
    (0x1F, "SwitchI32", "vm.switch.i32", "Ri32:index Ri32:default_value Rlist.i32:values Wi32:result"),
    (0x20, "SwitchI64", "vm.switch.i64", "Ri32:index Ri64:default_value Rlist.i64:values Wi64:result"),
    (
        0x21,
        "SwitchRef",
        "vm.switch.ref",
        "Ri32:index type:type_def Rref.mv:default_value Rlist.ref:values Wref.mv:result",
    ),
    (0x22, "AddI32", "vm.add.i32", "Ri32:left Ri32:right Wi32:result"),
    (0x23, "SubI32", "vm.sub.i32", "Ri32:left Ri32:right Wi32:result"),
    (0x24, "MulI32", "vm.mul.i32", "Ri32:left Ri32:right Wi32:result"),
    (0x25, "DivI32S", "vm.div.i32.s", "Ri32:left Ri32:right Wi32:result"),
    (0x26, "DivI32U", "vm.div.i32.u", "Ri32:left Ri32:right Wi32:result"),
    (0x27, "RemI32S", "vm.rem.i32.s", "Ri32:left Ri32:right Wi32:result"),
    (0x28, "RemI32U", "vm.rem.i32.u", "Ri32:left Ri32:right Wi32:result"),
    (0x29, "FMAI32", "vm.fma.i32", "Ri32:first Ri32:second Ri32:third Wi32:result"),
    (0x2A, "AddI64", "vm.add.i64", "Ri64:left Ri64:right Wi64:result"),
    (0x2B, "SubI64", "vm.sub.i64", "Ri64:left Ri64:right Wi64:result"),
    (0x2C, "MulI64", "vm.mul.i64", "Ri64:left Ri64:right Wi64:result"),
    (0x2D, "DivI64S", "vm.div.i64.s", "Ri64:left Ri64:right Wi64:result"),
    (0x2E, "DivI64U", "vm.div.i64.u", "Ri64:left Ri64:right Wi64:result"),
    (0x2F, "RemI64S", "vm.rem.i64.s", "Ri64:left Ri64:right Wi64:result"),
    (0x30, "RemI64U", "vm.rem.i64.u", "Ri64:left Ri64:right Wi64:result"),
    (0x31, "FMAI64", "vm.fma.i64", "Ri64:first Ri64:second Ri64:third Wi64:result"),
    (0x32, "NotI32", "vm.not.i32", "Ri32:operand Wi32:result"),
    (0x33, "AndI32", "vm.and.i32", "Ri32:left Ri32:right Wi32:result"),
    (0x34, "OrI32", "vm.or.i32", "Ri32:left Ri32:right Wi32:result"),
    (0x35, "XorI32", "vm.xor.i32", "Ri32:left Ri32:right Wi32:result"),
    (0x36, "NotI64", "vm.not.i64", "Ri64:operand Wi64:result"),
    (0x37, "AndI64", "vm.and.i64", "Ri64:left Ri64:right Wi64:result"),
    (0x38, "OrI64", "vm.or.i64", "Ri64:left Ri64:right Wi64:result"),
    (0x39, "XorI64", "vm.xor.i64", "Ri64:left Ri64:right Wi64:result"),
    (0x3A, "ShlI32", "vm.shl.i32", "Ri32:operand Ri32:amount Wi32:result"),
    (0x3B, "ShrI32S", "vm.shr.i32.s", "Ri32:operand Ri32:amount Wi32:result"),
    (0x3C, "ShrI32U", "vm.shr.i32.u", "Ri32:operand Ri32:amount Wi32:result"),
    (0x3D, "ShlI64", "vm.shl.i64", "Ri64:operand Ri32:amount Wi64:result"),
    (0x3E, "ShrI64S", "vm.shr.i64.s", "Ri64:operand Ri32:amount Wi64:result"),
    (0x3F, "ShrI64U", "vm.shr.i64.u", "Ri64:operand Ri32:amount Wi64:result"),
    (0x40, "TruncI32I8", "vm.trunc.i32.i8", "Ri32:operand Wi32:result"),
    (0x41, "TruncI32I16", "vm.trunc.i32.i16", "Ri32:operand Wi32:result"),
    (0x42, "TruncI64I32", "vm.trunc.i64.i32", "Ri64:operand Wi32:result"),
    (0x43, "ExtI8I32S", "vm.ext.i8.i32.s", "Ri32:operand Wi32:result"),
    (0x44, "ExtI8I32U", "vm.ext.i8.i32.u", "Ri32:operand Wi32:result"),
    (0x45, "ExtI16I32S", "vm.ext.i16.i32.s", "Ri32:operand Wi32:result"),
    (0x46, "ExtI16I32U", "vm.ext.i16.i32.u", "Ri32:operand Wi32:result"),
    (0x47, "ExtI32I64S", "vm.ext.i32.i64.s", "Ri32:operand Wi64:result"),
    (0x48, "ExtI32I64U", "vm.ext.i32.i64.u", "Ri32:operand Wi64:result"),
    (0x49, "CmpEQI32", "vm.cmp.eq.i32", "Ri32:left Ri32:right Wi32:result"),
    (0x4A, "CmpNEI32", "vm.cmp.ne.i32", "Ri32:left Ri32:right Wi32:result"),
    (0x4B, "CmpLTI32S", "vm.cmp.lt.i32.s", "Ri32:left Ri32:right Wi32:result"),
    (0x4C, "CmpLTI32U", "vm.cmp.lt.i32.u", "Ri32:left Ri32:right Wi32:result"),
    (0x4D, "CmpNZI32", "vm.cmp.nz.i32", "Ri32:operand Wi32:result"),
    (0x4E, "CmpEQI64", "vm.cmp.eq.i64", "Ri64:left Ri64:right Wi32:result"),
    (0x4F, "CmpNEI64", "vm.cmp.ne.i64", "Ri64:left Ri64:right Wi32:result"),
    (0x50, "CmpLTI64S", "vm.cmp.lt.i64.s", "Ri64:left Ri64:right Wi32:result"),
    (0x51, "CmpLTI64U", "vm.cmp.lt.i64.u", "Ri64:left Ri64:right Wi32:result"),
    (0x52, "CmpNZI64", "vm.cmp.nz.i64", "Ri64:operand Wi32:result"),
    (0x53, "CmpEQRef", "vm.cmp.eq.ref", "Rref:left Rref:right Wi32:result"),
    (0x54, "CmpNERef", "vm.cmp.ne.ref", "Rref:left Rref:right Wi32:result"),
    (0x55, "CmpNZRef", "vm.cmp.nz.ref", "Rref:operand Wi32:result"),
    (0x56, "Branch", "vm.br", "branch:dest_pc remap:operands"),
    (
        0x57,
        "CondBranch",
        "vm.cond_br",
        "Ri32:condition branch:true_dest_pc remap:true_operands branch:false_dest_pc remap:false_operands",
    ),
    (0x58, "Call", "vm.call", "func:callee_ordinal Rlist.any:operands Wlist.any:results"),
    (
        0x59,
        "CallVariadic",
        "vm.call.variadic",
        "func:callee_ordinal segment_sizes:segment_sizes Rlist.any:operands Wlist.any:results",
    ),
    (0x5A, "Return", "vm.return", "Rlist.any:operands"),
    (0x5B, "Fail", "vm.fail", "Ri32:status str16:message"),
    (0x5C, "ImportResolved", "vm.import.resolved", "func:import_ordinal Wi32:result"),
    (0x5D, "Yield", "vm.yield", "branch:dest_pc remap:operands"),
    (0x5E, "Trace", "vm.trace", "str16:event_name Rlist.any:operands"),
    (0x5F, "Print", "vm.print", "str16:event_name Rlist.any:operands"),
    (0x60, "CondBreak", "vm.cond_break", "Ri32:condition branch:dest_pc remap:operands"),
    (0x61, "Break", "vm.break", "branch:dest_pc remap:operands"),
    (0x62, "BufferLoadI8U", "vm.buffer.load.i8.u", "Rref:source_buffer Ri64:source_offset Wi32:result"),
    (0x63, "BufferLoadI8S", "vm.buffer.load.i8.s", "Rref:source_buffer Ri64:source_offset Wi32:result"),
    (0x64, "BufferLoadI16U", "vm.buffer.load.i16.u", "Rref:source_buffer Ri64:source_offset Wi32:result"),
    (0x65, "BufferLoadI16S", "vm.buffer.load.i16.s", "Rref:source_buffer Ri64:source_offset Wi32:result"),
    (0x66, "BufferLoadI32", "vm.buffer.load.i32", "Rref:source_buffer Ri64:source_offset Wi32:result"),
    (0x67, "BufferLoadI64", "vm.buffer.load.i64", "Rref:source_buffer Ri64:source_offset Wi64:result"),
    (0x68, "BufferStoreI8", "vm.buffer.store.i8", "Rref:target_buffer Ri64:target_offset Ri32:value"),
    (0x69, "BufferStoreI16", "vm.buffer.store.i16", "Rref:target_buffer Ri64:target_offset Ri32:value"),
    (0x6A, "BufferStoreI32", "vm.buffer.store.i32", "Rref:target_buffer Ri64:target_offset Ri32:value"),
    (0x6B, "BufferStoreI64", "vm.buffer.store.i64", "Rref:target_buffer Ri64:target_offset Ri64:value"),
    (0x6C, "BufferAlloc", "vm.buffer.alloc", "Ri64:length Ri32:alignment Wref.mv:result"),
    (
        0x6D,
        "BufferClone",
        "vm.buffer.clone",
        "Rref:source Ri64:offset Ri64:length Ri32:alignment Wref.mv:result",
    ),
    (0x6E, "BufferLength", "vm.buffer.length", "Rref:buffer Wi64:result"),
    (
        0x6F,
        "BufferCopy",
        "vm.buffer.copy",
        "Rref:source_buffer Ri64:source_offset Rref:target_buffer Ri64:target_offset Ri64:length",
    ),
    (
        0x70,
        "BufferCompare",
        "vm.buffer.compare",
        "Rref:lhs_buffer Ri64:lhs_offset Rref:rhs_buffer Ri64:rhs_offset Ri64:length Wi32:result",
    ),
    (
        0x71,
        "BufferFillI8",
        "vm.buffer.fill.i8",
        "Rref:target_buffer Ri64:target_offset Ri64:length Ri32:value",
    ),
    (
        0x72,
        "BufferFillI16",
        "vm.buffer.fill.i16",
        "Rref:target_buffer Ri64:target_offset Ri64:length Ri32:value",
    ),
    (
        0x73,
        "BufferFillI32",
        "vm.buffer.fill.i32",
        "Rref:target_buffer Ri64:target_offset Ri64:length Ri32:value",
    ),
    (
        0x74,
        "BufferFillI64",
        "vm.buffer.fill.i64",
        "Rref:target_buffer Ri64:target_offset Ri64:length Ri64:value",
    ),
    (0x75, "CtlzI32", "vm.ctlz.i32", "Ri32:operand Wi32:result"),
    (0x76, "CtlzI64", "vm.ctlz.i64", "Ri64:operand Wi64:result"),
    (0x77, "AbsI32", "vm.abs.i32", "Ri32:operand Wi32:result"),
    (0x78, "AbsI64", "vm.abs.i64", "Ri64:operand Wi64:result"),
    (0x79, "Block", "", ""),
    (0x7A, "MinI32S", "vm.min.i32.s", "Ri32:left Ri32:right Wi32:result"),
    (0x7B, "MinI32U", "vm.min.i32.u", "Ri32:left Ri32:right Wi32:result"),
    (0x7C, "MaxI32S", "vm.max.i32.s", "Ri32:left Ri32:right Wi32:result"),
    (0x7D, "MaxI32U", "vm.max.i32.u", "Ri32:left Ri32:right Wi32:result"),
    (0x7E, "MinI64S", "vm.min.i64.s", "Ri64:left Ri64:right Wi64:result"),
    (0x7F, "MinI64U", "vm.min.i64.u", "Ri64:left Ri64:right Wi64:result"),
    (0x80, "MaxI64S", "vm.max.i64.s", "Ri64:left Ri64:right Wi64:result"),
    (0x81, "MaxI64U", "vm.max.i64.u", "Ri64:left Ri64:right Wi64:result"),
    (0x82, "CastAnyRef", "vm.cast.any.ref", "Rref.mv:operand type:result_type Wref.mv:result"),
    (
        0x83,
        "BranchTable",
        "vm.br_table",
        "Ri32:index branch:default_dest_pc remap:default_operands table_size:table_size cases:cases",
    ),
    (0x84, "BufferHash", "vm.buffer.hash", "Rref:source_buffer Ri64:source_offset Ri64:length Wi64:result"),
    (0x85, "DiscardRefs", "vm.discard.refs", "Rlist.any:refs"),
    (0x86, "AssignRef", "vm.assign.ref", "Rref.mv:source Wref.mv:result"),
    (
        0x87,
        "CallYieldable",
        "vm.call.yieldable",
        "func:callee_ordinal Rlist.any:operands branch:dest_pc Wlist.any:results",
    ),
    (
        0x88,
        "CallVariadicYieldable",
        "vm.call.variadic.yieldable",
        "func:callee_ordinal segment_sizes:segment_sizes Rlist.any:operands branch:dest_pc Wlist.any:results",
    ),
    (0xE0, "PrefixExtF32", "", ""),
    (0xE1, "PrefixExtF64", "", ""),
)

_EXT_F32_TABLE: tuple[tuple[int, str, str, str], ...] = (
    (0x00, "GlobalLoadF32", "vm.global.load.f32", "global:byte_offset Wf32:result"),
    (0x01, "GlobalStoreF32", "vm.global.store.f32", "global:byte_offset Rf32:value"),
    (0x02, "GlobalLoadIndirectF32", "vm.global.load.indirect.f32", "Ri32:byte_offset Wf32:result"),
    (0x03, "GlobalStoreIndirectF32", "vm.global.store.indirect.f32", "Ri32:byte_offset Rf32:value"),
    (0x04, "ConstF32Zero", "vm.const.f32.zero", "Wf32:result"),
    (0x05, "ConstF32", "vm.const.f32", "imm_f32:value Wf32:result"),
    (0x06, "ListGetF32", "vm.list.get.f32", "Rref:list Ri32:index Wf32:result"),
    (0x07, "ListSetF32", "vm.list.set.f32", "Rref:list Ri32:index Rf32:value"),
    (0x08, "SelectF32", "vm.select.f32", "Ri32:condition Rf32:true_value Rf32:false_value Wf32:result"),
    (0x09, "SwitchF32", "vm.switch.f32", "Ri32:index Rf32:default_value Rlist.f32:values Wf32:result"),
    (0x0A, "AddF32", "vm.add.f32", "Rf32:left Rf32:right Wf32:result"),
    (0x0B, "SubF32", "vm.sub.f32", "Rf32:left Rf32:right Wf32:result"),
    (0x0C, "MulF32", "vm.mul.f32", "Rf32:left Rf32:right Wf32:result"),
    (0x0D, "DivF32", "vm.div.f32", "Rf32:left Rf32:right Wf32:result"),
    (0x0E, "RemF32", "vm.rem.f32", "Rf32:left Rf32:right Wf32:result"),
    (0x0F, "FMAF32", "vm.fma.f32", "Rf32:first Rf32:second Rf32:third Wf32:result"),
    (0x10, "AbsF32", "vm.abs.f32", "Rf32:operand Wf32:result"),
    (0x11, "NegF32", "vm.neg.f32", "Rf32:operand Wf32:result"),
    (0x12, "CeilF32", "vm.ceil.f32", "Rf32:operand Wf32:result"),
    (0x13, "FloorF32", "vm.floor.f32", "Rf32:operand Wf32:result"),
    (0x14, "CastSI32F32", "vm.cast.si32.f32", "Ri32:operand Wf32:result"),
    (0x15, "CastUI32F32", "vm.cast.ui32.f32", "Ri32:operand Wf32:result"),
    (0x16, "CastF32SI32", "vm.cast.f32.si32", "Rf32:operand Wi32:result"),
    (0x17, "CastF32UI32", "vm.cast.f32.ui32", "Rf32:operand Wi32:result"),
    (0x18, "BitcastI32F32", "vm.bitcast.i32.f32", "Ri32:operand Wf32:result"),
    (0x19, "BitcastF32I32", "vm.bitcast.f32.i32", "Rf32:operand Wi32:result"),
    (0x1A, "AtanF32", "vm.atan.f32", "Rf32:operand Wf32:result"),
    (0x1B, "Atan2F32", "vm.atan2.f32", "Rf32:left Rf32:right Wf32:result"),
    (0x1C, "CosF32", "vm.cos.f32", "Rf32:operand Wf32:result"),
    (0x1D, "SinF32", "vm.sin.f32", "Rf32:operand Wf32:result"),
    (0x1E, "ExpF32", "vm.exp.f32", "Rf32:operand Wf32:result"),
    (0x1F, "Exp2F32", "vm.exp2.f32", "Rf32:operand Wf32:result"),
    (0x20, "ExpM1F32", "vm.expm1.f32", "Rf32:operand Wf32:result"),
    (0x21, "LogF32", "vm.log.f32", "Rf32:operand Wf32:result"),
    (0x22, "Log10F32", "vm.log10.f32", "Rf32:operand Wf32:result"),
    (0x23, "Log1pF32", "vm.log1p.f32", "Rf32:operand Wf32:result"),
    (0x24, "Log2F32", "vm.log2.f32", "Rf32:operand Wf32:result"),
    (0x25, "PowF32", "vm.pow.f32", "Rf32:left Rf32:right Wf32:result"),
    (0x26, "RsqrtF32", "vm.rsqrt.f32", "Rf32:operand Wf32:result"),
    (0x27, "SqrtF32", "vm.sqrt.f32", "Rf32:operand Wf32:result"),
    (0x28, "TanhF32", "vm.tanh.f32", "Rf32:operand Wf32:result"),
    (0x29, "ErfF32", "vm.erf.f32", "Rf32:operand Wf32:result"),
    (0x2A, "CmpEQF32O", "vm.cmp.eq.f32.o", "Rf32:left Rf32:right Wi32:result"),
    (0x2B, "CmpEQF32U", "vm.cmp.eq.f32.u", "Rf32:left Rf32:right Wi32:result"),
    (0x2C, "CmpNEF32O", "vm.cmp.ne.f32.o", "Rf32:left Rf32:right Wi32:result"),
    (0x2D, "CmpNEF32U", "vm.cmp.ne.f32.u", "Rf32:left Rf32:right Wi32:result"),
    (0x2E, "CmpLTF32O", "vm.cmp.lt.f32.o", "Rf32:left Rf32:right Wi32:result"),
    (0x2F, "CmpLTF32U", "vm.cmp.lt.f32.u", "Rf32:left Rf32:right Wi32:result"),
    (0x30, "CmpLTEF32O", "vm.cmp.lte.f32.o", "Rf32:left Rf32:right Wi32:result"),
    (0x31, "CmpLTEF32U", "vm.cmp.lte.f32.u", "Rf32:left Rf32:right Wi32:result"),
    (0x32, "CmpNaNF32", "vm.cmp.nan.f32", "Rf32:operand Wi32:result"),
    (0x33, "BufferLoadF32", "vm.buffer.load.f32", "Rref:source_buffer Ri64:source_offset Wf32:result"),
    (0x34, "BufferStoreF32", "vm.buffer.store.f32", "Rref:target_buffer Ri64:target_offset Rf32:value"),
    (
        0x35,
        "BufferFillF32",
        "vm.buffer.fill.f32",
        "Rref:target_buffer Ri64:target_offset Ri64:length Rf32:value",
    ),
    (0x36, "RoundF32", "vm.round.f32", "Rf32:operand Wf32:result"),
    (0x37, "MinF32", "vm.min.f32", "Rf32:left Rf32:right Wf32:result"),
    (0x38, "MaxF32", "vm.max.f32", "Rf32:left Rf32:right Wf32:result"),
    (0x39, "RoundF32Even", "vm.round.f32.even", "Rf32:operand Wf32:result"),
    (0x3A, "CastF32SI64", "vm.cast.f32.si64", "Rf32:operand Wi64:result"),
    (0x3B, "CastF32UI64", "vm.cast.f32.ui64", "Rf32:operand Wi64:result"),
    (0x3C, "CastSI64F32", "vm.cast.si64.f32", "Ri64:operand Wf32:result"),
    (0x3D, "CastUI64F32", "vm.cast.ui64.f32", "Ri64:operand Wf32:result"),
)

_EXT_F64_TABLE: tuple[tuple[int, str, str, str], ...] = (
    (0x00, "GlobalLoadF64", "vm.global.load.f64", "global:byte_offset Wf64:result"),
    (0x01, "GlobalStoreF64", "vm.global.store.f64", "global:byte_offset Rf64:value"),
    (0x02, "GlobalLoadIndirectF64", "vm.global.load.indirect.f64", "Ri32:byte_offset Wf64:result"),
    (0x03, "GlobalStoreIndirectF64", "vm.global.store.indirect.f64", "Ri32:byte_offset Rf64:value"),
    (0x04, "ConstF64Zero", "vm.const.f64.zero", "Wf64:result"),
    (0x05, "ConstF64", "vm.const.f64", "imm_f64:value Wf64:result"),
    (0x06, "ListGetF64", "vm.list.get.f64", "Rref:list Ri32:index Wf64:result"),
    (0x07, "ListSetF64", "vm.list.set.f64", "Rref:list Ri32:index Rf64:value"),
    (0x08, "SelectF64", "vm.select.f64", "Ri32:condition Rf64:true_value Rf64:false_value Wf64:result"),
    (0x09, "SwitchF64", "vm.switch.f64", "Ri32:index Rf64:default_value Rlist.f64:values Wf64:result"),
    (0x0A, "AddF64", "vm.add.f64", "Rf64:left Rf64:right Wf64:result"),
    (0x0B, "SubF64", "vm.sub.f64", "Rf64:left Rf64:right Wf64:result"),
    (0x0C, "MulF64", "vm.mul.f64", "Rf64:left Rf64:right Wf64:result"),
    (0x0D, "DivF64", "vm.div.f64", "Rf64:left Rf64:right Wf64:result"),
    (0x0E, "RemF64", "vm.rem.f64", "Rf64:left Rf64:right Wf64:result"),
    (0x0F, "FMAF64", "vm.fma.f64", "Rf64:first Rf64:second Rf64:third Wf64:result"),
    (0x10, "AbsF64", "vm.abs.f64", "Rf64:operand Wf64:result"),
    (0x11, "NegF64", "vm.neg.f64", "Rf64:operand Wf64:result"),
    (0x12, "CeilF64", "vm.ceil.f64", "Rf64:operand Wf64:result"),
    (0x13, "FloorF64", "vm.floor.f64", "Rf64:operand Wf64:result"),
    (0x14, "TruncF64F32", "vm.trunc.f64.f32", "Rf64:operand Wf32:result"),
    (0x15, "ExtF32F64", "vm.ext.f32.f64", "Rf32:operand Wf64:result"),
    (0x16, "CastSI32F64", "vm.cast.si32.f64", "Ri32:operand Wf64:result"),
    (0x17, "CastUI32F64", "vm.cast.ui32.f64", "Ri32:operand Wf64:result"),
    (0x18, "CastF64SI32", "vm.cast.f64.si32", "Rf64:operand Wi32:result"),
    (0x19, "CastF64UI32", "vm.cast.f64.ui32", "Rf64:operand Wi32:result"),
    (0x1A, "CastSI64F64", "vm.cast.si64.f64", "Ri64:operand Wf64:result"),
    (0x1B, "CastUI64F64", "vm.cast.ui64.f64", "Ri64:operand Wf64:result"),
    (0x1C, "CastF64SI64", "vm.cast.f64.si64", "Rf64:operand Wi64:result"),
    (0x1D, "CastF64UI64", "vm.cast.f64.ui64", "Rf64:operand Wi64:result"),
    (0x1E, "BitcastI64F64", "vm.bitcast.i64.f64", "Ri64:operand Wf64:result"),
    (0x1F, "BitcastF64I64", "vm.bitcast.f64.i64", "Rf64:operand Wi64:result"),
    (0x20, "AtanF64", "vm.atan.f64", "Rf64:operand Wf64:result"),
    (0x21, "Atan2F64", "vm.atan2.f64", "Rf64:left Rf64:right Wf64:result"),
    (0x22, "CosF64", "vm.cos.f64", "Rf64:operand Wf64:result"),
    (0x23, "SinF64", "vm.sin.f64", "Rf64:operand Wf64:result"),
    (0x24, "ExpF64", "vm.exp.f64", "Rf64:operand Wf64:result"),
    (0x25, "Exp2F64", "vm.exp2.f64", "Rf64:operand Wf64:result"),
    (0x26, "ExpM1F64", "vm.expm1.f64", "Rf64:operand Wf64:result"),
    (0x27, "LogF64", "vm.log.f64", "Rf64:operand Wf64:result"),
    (0x28, "Log10F64", "vm.log10.f64", "Rf64:operand Wf64:result"),
    (0x29, "Log1pF64", "vm.log1p.f64", "Rf64:operand Wf64:result"),
    (0x2A, "Log2F64", "vm.log2.f64", "Rf64:operand Wf64:result"),
    (0x2B, "PowF64", "vm.pow.f64", "Rf64:left Rf64:right Wf64:result"),
    (0x2C, "RsqrtF64", "vm.rsqrt.f64", "Rf64:operand Wf64:result"),
    (0x2D, "SqrtF64", "vm.sqrt.f64", "Rf64:operand Wf64:result"),
    (0x2E, "TanhF64", "vm.tanh.f64", "Rf64:operand Wf64:result"),
    (0x2F, "ErfF64", "vm.erf.f64", "Rf64:operand Wf64:result"),
    (0x30, "CmpEQF64O", "vm.cmp.eq.f64.o", "Rf64:left Rf64:right Wi32:result"),
    (0x31, "CmpEQF64U", "vm.cmp.eq.f64.u", "Rf64:left Rf64:right Wi32:result"),
    (0x32, "CmpNEF64O", "vm.cmp.ne.f64.o", "Rf64:left Rf64:right Wi32:result"),
    (0x33, "CmpNEF64U", "vm.cmp.ne.f64.u", "Rf64:left Rf64:right Wi32:result"),
    (0x34, "CmpLTF64O", "vm.cmp.lt.f64.o", "Rf64:left Rf64:right Wi32:result"),
    (0x35, "CmpLTF64U", "vm.cmp.lt.f64.u", "Rf64:left Rf64:right Wi32:result"),
    (0x36, "CmpLTEF64O", "vm.cmp.lte.f64.o", "Rf64:left Rf64:right Wi32:result"),
    (0x37, "CmpLTEF64U", "vm.cmp.lte.f64.u", "Rf64:left Rf64:right Wi32:result"),
    (0x38, "CmpNaNF64", "vm.cmp.nan.f64", "Rf64:operand Wi32:result"),
    (0x39, "BufferLoadF64", "vm.buffer.load.f64", "Rref:source_buffer Ri64:source_offset Wf64:result"),
    (0x3A, "BufferStoreF64", "vm.buffer.store.f64", "Rref:target_buffer Ri64:target_offset Rf64:value"),
    (
        0x3B,
        "BufferFillF64",
        "vm.buffer.fill.f64",
        "Rref:target_buffer Ri64:target_offset Ri64:length Rf64:value",
    ),
    (0x3C, "RoundF64", "vm.round.f64", "Rf64:operand Wf64:result"),
    (0x3D, "MinF64", "vm.min.f64", "Rf64:left Rf64:right Wf64:result"),
    (0x3E, "MaxF64", "vm.max.f64", "Rf64:left Rf64:right Wf64:result"),
    (0x3F, "RoundF64Even", "vm.round.f64.even", "Rf64:operand Wf64:result"),
)


def _build(set_name: str, prefix: int | None, rows) -> dict[int, Opcode]:
    return {
        code: Opcode(set_name, prefix, code, sym, mn, tuple(_parse_operand(t) for t in spec.split()))
        for code, sym, mn, spec in rows
    }


CORE: dict[int, Opcode] = _build("core", None, _CORE_TABLE)
EXT_F32: dict[int, Opcode] = _build("ext_f32", PREFIX_EXT_F32, _EXT_F32_TABLE)
EXT_F64: dict[int, Opcode] = _build("ext_f64", PREFIX_EXT_F64, _EXT_F64_TABLE)
# Opcode tables by prefix byte: None for core.
SETS: dict[int | None, dict[int, Opcode]] = {None: CORE, PREFIX_EXT_F32: EXT_F32, PREFIX_EXT_F64: EXT_F64}
ALL_OPCODES: tuple[Opcode, ...] = (*CORE.values(), *EXT_F32.values(), *EXT_F64.values())
BY_SYMBOL: dict[str, Opcode] = {op.symbol: op for op in ALL_OPCODES}
BY_MNEMONIC: dict[str, Opcode] = {op.mnemonic: op for op in ALL_OPCODES if op.mnemonic}


def opcode(symbol: str) -> Opcode:
    """The opcode with IREE symbol ``symbol`` (KeyError if there is none)."""
    return BY_SYMBOL[symbol]
