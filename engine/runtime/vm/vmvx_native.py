"""VMVX dispatch functions translated to native code (LLVM IR through llvmlite), run by a native loop.

In 3.13 a VMVX executable is plain VM bytecode: scalar loops of ``vm.buffer.load/store`` with i64 index
math, one instruction per element step. Interpreted in Python (5-10 M instructions/s) the first dispatch of
a CNN takes minutes; IREE's C interpreter runs the whole model in seconds. Here each dispatch function is
translated instruction by instruction into LLVM IR with the VM's own semantics (``runtime/src/iree/vm/ops.h``,
the same rules ``engine.runtime.vm.ops`` implements), compiled once per executable, and a native driver runs
every workgroup of a dispatch (z, then y, then x, as local-sync does) in one call.

Bit-identical to the interpreter by construction:

* registers are the VM's 32-bit words (an i64/f64 is a pair, low word first); f32 values are their bits;
* f32/f64 arithmetic is one IEEE operation per VM instruction, never contracted or reassociated (no
  fast-math flags); ``vm.fma.f32`` is a rounded multiply then an add (ops.h without ``FP_FAST_FMAF``);
  transcendentals and ``lroundf``-style casts call the same C library functions the interpreter calls;
* every buffer access is bounds-checked and every ref null-checked; signed division guards the two cases C
  leaves undefined. When a check fails the dispatch stops and the caller reruns the failing workgroup on the
  interpreter, which raises the VM trap with its full message and stack.

A function that uses an instruction this translator does not know (calls, lists other than the bindings,
``vm.buffer.alloc`` inside a loop...) is refused with ``NativeUnsupported``; its dispatches stay on the
interpreter.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.runtime import isa
from engine.runtime.vm.ops.constants import imm_bits
from engine.runtime.vmfb.decoder import Instruction
from engine.runtime.vmfb.module import Function, VmfbModule


class NativeUnsupported(Exception):
    """The function uses something the translator does not handle; run it on the interpreter."""


# -- the context a dispatch passes to the native driver (all 8-byte fields) -----------------------------------


class DispatchContext(ctypes.Structure):
    _fields_ = [
        ("local", ctypes.c_void_p),
        ("local_len", ctypes.c_int64),
        ("consts", ctypes.c_void_p),
        ("consts_len", ctypes.c_int64),
        ("bind_ptr", ctypes.c_void_p),  # uint8_t*[nbind]
        ("bind_len", ctypes.c_void_p),  # int64_t[nbind]
        ("nbind", ctypes.c_int64),
        ("ro_ptr", ctypes.c_void_p),  # uint8_t*[rodata segments]
        ("ro_len", ctypes.c_void_p),  # int64_t[rodata segments]
        ("steps", ctypes.c_int64),  # VM instructions executed (all workgroups)
        ("err_pc", ctypes.c_int64),  # pc of the instruction whose check failed
        ("wg_x", ctypes.c_int32),  # the workgroup that failed
        ("wg_y", ctypes.c_int32),
        ("wg_z", ctypes.c_int32),
        ("pad", ctypes.c_int32),
    ]


_CTX_OFFSETS = {name: getattr(DispatchContext, name).offset for name, _ in DispatchContext._fields_}

DRIVER_SIGNATURE = ctypes.CFUNCTYPE(
    ctypes.c_int32, ctypes.POINTER(DispatchContext), ctypes.c_int32, ctypes.c_int32, ctypes.c_int32
)

# The C library functions the VM's ops call (engine.runtime.vm.numeric uses the same ones through ctypes).
_LIBM_F32 = {
    "AtanF32": "atanf",
    "CosF32": "cosf",
    "SinF32": "sinf",
    "ExpF32": "expf",
    "Exp2F32": "exp2f",
    "ExpM1F32": "expm1f",
    "LogF32": "logf",
    "Log10F32": "log10f",
    "Log1pF32": "log1pf",
    "Log2F32": "log2f",
    "TanhF32": "tanhf",
    "ErfF32": "erff",
    "SqrtF32": "sqrtf",
    "CeilF32": "ceilf",
    "FloorF32": "floorf",
    "RoundF32": "roundf",
}
_LIBM_F64 = {k.replace("F32", "F64"): v[:-1] for k, v in _LIBM_F32.items()}

_BIN = {"Add": "add", "Sub": "sub", "Mul": "mul", "And": "and", "Or": "or", "Xor": "xor"}
_FBIN = {"Add": "fadd", "Sub": "fsub", "Mul": "fmul", "Div": "fdiv"}
_ICMP = {"CmpEQ": "eq", "CmpNE": "ne", "CmpLT{}S": "slt", "CmpLT{}U": "ult"}
# Python's comparisons as the interpreter writes them (``x != y`` is true for NaN: une, also for the O form).
_FCMP = {
    "CmpEQ{}O": "oeq",
    "CmpEQ{}U": "ueq",
    "CmpNE{}O": "une",
    "CmpNE{}U": "une",
    "CmpLT{}O": "olt",
    "CmpLT{}U": "ult",
    "CmpLTE{}O": "ole",
    "CmpLTE{}U": "ule",
}
_TERMINATORS = {"Branch", "CondBranch", "Return", "BranchTable"}
_LLTYPE = {isa.REG_I32: "i32", isa.REG_I64: "i64", isa.REG_F32: "float", isa.REG_F64: "double"}
# Loads/stores: symbol -> (bytes, LLVM memory type, register kind, extension)
_LOADS = {
    "BufferLoadI8U": (1, "i8", "i32", "zext"),
    "BufferLoadI8S": (1, "i8", "i32", "sext"),
    "BufferLoadI16U": (2, "i16", "i32", "zext"),
    "BufferLoadI16S": (2, "i16", "i32", "sext"),
    "BufferLoadI32": (4, "i32", "i32", None),
    "BufferLoadF32": (4, "i32", "i32", None),
    "BufferLoadI64": (8, "i64", "i64", None),
    "BufferLoadF64": (8, "i64", "i64", None),
}
_STORES = {
    "BufferStoreI8": (1, "i8", "i32"),
    "BufferStoreI16": (2, "i16", "i32"),
    "BufferStoreI32": (4, "i32", "i32"),
    "BufferStoreF32": (4, "i32", "i32"),
    "BufferStoreI64": (8, "i64", "i64"),
    "BufferStoreF64": (8, "i64", "i64"),
}
_LOG2 = {1: 0, 2: 1, 4: 2, 8: 3}
_MAX_ALLOC = 1 << 40  # the interpreter's limit on vm.buffer.alloc


class _FunctionWriter:
    """LLVM IR of one dispatch function (``@wg``) with the VM's registers as stack slots (promoted by LLVM)."""

    def __init__(self, function: Function, name: str, rodata_count: int):
        self.f = function
        self.name = name
        self.rodata_count = rodata_count
        self.ni = function.i32_register_count
        self.nr = function.ref_register_count
        self.lines: list[str] = []
        self.tmp = 0
        self.traps: list[tuple[str, int]] = []  # (label, pc)
        self.allocs: list[int] = []  # pcs of vm.buffer.alloc (one slot each)
        self.extern: set[str] = set()

    # -- small emitters

    def t(self) -> str:
        self.tmp += 1
        return f"%t{self.tmp}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def _ireg(self, raw: int, wide: bool = False) -> int:
        k = raw & isa.PRIMITIVE_INDEX_MASK
        if raw & isa.REF_BANK_BIT or k + (1 if wide else 0) >= self.ni:
            raise NativeUnsupported(f"register {raw:#x} outside the function's {self.ni} i32 registers")
        return k

    def _rreg(self, raw: int) -> int:
        k = raw & isa.REF_INDEX_MASK
        if k >= self.nr:
            raise NativeUnsupported(f"ref register {k} outside the function's {self.nr} refs")
        return k

    def r32(self, raw: int) -> str:
        v = self.t()
        self.emit(f"{v} = load i32, ptr %i{self._ireg(raw)}")
        return v

    def r64(self, raw: int) -> str:
        k = self._ireg(raw, wide=True)
        lo, hi, a, b, c, v = (self.t() for _ in range(6))
        self.emit(f"{lo} = load i32, ptr %i{k}")
        self.emit(f"{hi} = load i32, ptr %i{k + 1}")
        self.emit(f"{a} = zext i32 {lo} to i64")
        self.emit(f"{b} = zext i32 {hi} to i64")
        self.emit(f"{c} = shl i64 {b}, 32")
        self.emit(f"{v} = or i64 {a}, {c}")
        return v

    def w32(self, raw: int, v: str) -> None:
        self.emit(f"store i32 {v}, ptr %i{self._ireg(raw)}")

    def w64(self, raw: int, v: str) -> None:
        k = self._ireg(raw, wide=True)
        lo, s, hi = self.t(), self.t(), self.t()
        self.emit(f"{lo} = trunc i64 {v} to i32")
        self.emit(f"{s} = lshr i64 {v}, 32")
        self.emit(f"{hi} = trunc i64 {s} to i32")
        self.emit(f"store i32 {lo}, ptr %i{k}")
        self.emit(f"store i32 {hi}, ptr %i{k + 1}")

    def read(self, kind: str, raw: int) -> str:
        if kind == isa.REG_I32:
            return self.r32(raw)
        if kind == isa.REG_I64:
            return self.r64(raw)
        if kind == isa.REG_F32:
            bits, v = self.r32(raw), self.t()
            self.emit(f"{v} = bitcast i32 {bits} to float")
            return v
        if kind == isa.REG_F64:
            bits, v = self.r64(raw), self.t()
            self.emit(f"{v} = bitcast i64 {bits} to double")
            return v
        raise NativeUnsupported(f"operand kind {kind}")

    def write(self, kind: str, raw: int, v: str) -> None:
        if kind == isa.REG_I32:
            self.w32(raw, v)
        elif kind == isa.REG_I64:
            self.w64(raw, v)
        elif kind == isa.REG_F32:
            bits = self.t()
            self.emit(f"{bits} = bitcast float {v} to i32")
            self.w32(raw, bits)
        elif kind == isa.REG_F64:
            bits = self.t()
            self.emit(f"{bits} = bitcast double {v} to i64")
            self.w64(raw, bits)
        else:
            raise NativeUnsupported(f"result kind {kind}")

    def trap_if(self, cond: str, pc: int) -> None:
        """Leave the function (check failed at ``pc``) when the i1 ``cond`` holds."""
        label = f"trap{len(self.traps)}"
        self.traps.append((label, pc))
        ok = f"ok{len(self.traps)}"
        self.emit(f"br i1 {cond}, label %{label}, label %{ok}, !prof !0")
        self.label(ok)

    def set_ref(self, k: int, ptr: str, length: str, wlength: str, flags: int | str) -> None:
        self.emit(f"store ptr {ptr}, ptr %rp{k}")
        self.emit(f"store i64 {length}, ptr %rl{k}")
        self.emit(f"store i64 {wlength}, ptr %rw{k}")
        self.emit(f"store i32 {flags}, ptr %rf{k}")

    def ctx_field(self, name: str, ty: str) -> str:
        p, v = self.t(), self.t()
        self.emit(f"{p} = getelementptr i8, ptr %ctx, i64 {_CTX_OFFSETS[name]}")
        self.emit(f"{v} = load {ty}, ptr {p}")
        return v

    def add_steps(self, n: int) -> None:
        if n:
            a, b = self.t(), self.t()
            self.emit(f"{a} = load i64, ptr %steps")
            self.emit(f"{b} = add i64 {a}, {n}")
            self.emit(f"store i64 {b}, ptr %steps")

    # -- the function

    def build(self) -> str:
        ins_list: list[Instruction] = list(self.f.instructions())
        by_pc = {ins.pc: ins for ins in ins_list}
        self._check_allocs(ins_list, by_pc)
        head = [
            f"define internal i32 @{self.name}(ptr %ctx, i32 %wx, i32 %wy, i32 %wz, i32 %cx, i32 %cy, i32 %cz) {{",
            "entry:",
        ]
        self.emit("%steps = alloca i64")
        self.emit("store i64 0, ptr %steps")
        for k in range(self.ni):
            self.emit(f"%i{k} = alloca i32")
            self.emit(f"store i32 0, ptr %i{k}")
        for k in range(self.nr):
            self.emit(f"%rp{k} = alloca ptr")
            self.emit(f"%rl{k} = alloca i64")
            self.emit(f"%rw{k} = alloca i64")
            self.emit(f"%rf{k} = alloca i32")
            self.set_ref(k, "null", "0", "0", 0)
        for k in range(len(self.allocs)):
            self.emit(f"%al{k} = alloca ptr")
            self.emit(f"store ptr null, ptr %al{k}")
        # Arguments (cconv 0rrriiiiiiiii_v): local memory, constants, the bindings list; ids, sizes, counts.
        if self.nr < 3 or self.ni < 9:
            raise NativeUnsupported("dispatch function with fewer registers than its arguments")
        lp, ll = self.ctx_field("local", "ptr"), self.ctx_field("local_len", "i64")
        self.set_ref(0, lp, ll, ll, 3)
        cp, cl = self.ctx_field("consts", "ptr"), self.ctx_field("consts_len", "i64")
        self.set_ref(1, cp, cl, "0", 1)
        self.set_ref(2, "null", "0", "0", 4)  # the bindings list (only ListGetRef reads it)
        for k, v in enumerate(("%wx", "%wy", "%wz", "1", "1", "1", "%cx", "%cy", "%cz")):
            self.emit(f"store i32 {v}, ptr %i{k}")
        open_block = True
        if ins_list and ins_list[0].symbol != "Block":
            self.add_steps(self._segment_steps(ins_list, 0))
        for idx, ins in enumerate(ins_list):
            if ins.symbol == "Block":
                if open_block:
                    self.add_steps(1)  # falling into a block runs its marker; a branch skips it
                    self.emit(f"br label %L{ins.next_pc}")
                self.label(f"L{ins.next_pc}")
                open_block = True
                self.add_steps(self._segment_steps(ins_list, idx + 1))
                continue
            if not open_block:
                continue  # unreachable (after a terminator, before the next block)
            self._instruction(ins, by_pc)
            if ins.symbol in _TERMINATORS:
                open_block = False
        if open_block:
            self.emit("br label %fell")
        self.label("fell")
        self.emit("unreachable")
        for label, pc in self.traps:
            self.label(label)
            p = self.t()
            self.emit(f"{p} = getelementptr i8, ptr %ctx, i64 {_CTX_OFFSETS['err_pc']}")
            self.emit(f"store i64 {pc}, ptr {p}")
            self.emit("br label %exit_err")
        self.label("exit_err")
        self._free_allocs()
        self.emit("ret i32 1")
        return "\n".join(head + self.lines + ["}"])

    def _segment_steps(self, ins_list: list[Instruction], start: int) -> int:
        n = 0
        for ins in ins_list[start:]:
            if ins.symbol == "Block":
                break
            n += 1
            if ins.symbol in _TERMINATORS:
                break
        return n

    def _check_allocs(self, ins_list: list[Instruction], by_pc: dict) -> None:
        """Scratch buffers live until the function returns: one slot per ``vm.buffer.alloc``, so none may sit
        in a loop (each then runs at most once per call and is freed on return)."""
        sites = [ins.pc for ins in ins_list if ins.symbol == "BufferAlloc"]
        if not sites:
            return
        # Blocks: start pc (after marker) -> successor start pcs.
        starts = [0] + [ins.next_pc for ins in ins_list if ins.symbol == "Block"]
        block_of: dict[int, int] = {}
        succ: dict[int, set[int]] = {s: set() for s in starts}
        cur = 0
        for ins in ins_list:
            if ins.symbol == "Block":
                if cur is not None:
                    succ[cur].add(ins.next_pc)
                cur = ins.next_pc
                continue
            if cur is None:
                continue
            block_of[ins.pc] = cur
            for spec, value in zip(ins.opcode.operands, ins.operands):
                if spec.kind == isa.BRANCH:
                    succ[cur].add(by_pc[value].next_pc if value in by_pc else -1)
            if ins.symbol in _TERMINATORS:
                cur = None
        for pc in sites:
            b = block_of.get(pc)
            if b is None:
                continue
            seen, stack = set(), list(succ.get(b, ()))
            while stack:
                s = stack.pop()
                if s == b:
                    raise NativeUnsupported("vm.buffer.alloc inside a loop")
                if s in seen or s not in succ:
                    continue
                seen.add(s)
                stack.extend(succ[s])
        self.allocs = sites

    def _free_allocs(self) -> None:
        for k in range(len(self.allocs)):
            p = self.t()
            self.emit(f"{p} = load ptr, ptr %al{k}")
            self.emit(f"call void @free(ptr {p})")
        if self.allocs:
            self.extern.add("declare void @free(ptr)")
        steps_out, s = self.t(), self.t()
        self.emit(f"{s} = load i64, ptr %steps")
        self.emit(f"{steps_out} = getelementptr i8, ptr %ctx, i64 {_CTX_OFFSETS['steps']}")
        old, new = self.t(), self.t()
        self.emit(f"{old} = load i64, ptr {steps_out}")
        self.emit(f"{new} = add i64 {old}, {s}")
        self.emit(f"store i64 {new}, ptr {steps_out}")

    # -- one instruction

    def _remap(self, pairs) -> None:
        for src, dst in pairs:
            if src & isa.REF_BANK_BIT:
                s, d = self._rreg(src), self._rreg(dst)
                vals = []
                for bank, ty in (("rp", "ptr"), ("rl", "i64"), ("rw", "i64"), ("rf", "i32")):
                    v = self.t()
                    self.emit(f"{v} = load {ty}, ptr %{bank}{s}")
                    vals.append(v)
                if src & isa.REF_MOVE_BIT and s != d:
                    self.set_ref(s, "null", "0", "0", 0)
                self.set_ref(d, *vals)
            else:
                self.w32(dst, self.r32(src))

    def _target(self, pc: int, by_pc: dict) -> str:
        marker = by_pc.get(pc)
        if marker is None or marker.symbol != "Block":
            raise NativeUnsupported(f"branch to pc {pc:#x}, not a block")
        return f"L{marker.next_pc}"

    def _instruction(self, ins: Instruction, by_pc: dict) -> None:
        """One instruction's IR: by its symbol's entry in ``INSTRUCTIONS``, else a register operation."""
        handler = self.INSTRUCTIONS.get(ins.symbol)
        if handler is not None:
            handler(self, ins, by_pc)
        else:
            self._register_op(ins.symbol, ins.operands, ins.opcode.operands, ins.pc)

    def _branch(self, ins: Instruction, by_pc: dict) -> None:
        ops = ins.operands
        self._remap(ops[1])
        self.emit(f"br label %{self._target(ops[0], by_pc)}")

    def _cond_branch(self, ins: Instruction, by_pc: dict) -> None:
        ops, pc = ins.operands, ins.pc
        c = self.r32(ops[0])
        cond = self.t()
        self.emit(f"{cond} = icmp ne i32 {c}, 0")
        tl, fl = f"ct{pc}", f"cf{pc}"
        self.emit(f"br i1 {cond}, label %{tl}, label %{fl}")
        self.label(tl)
        self._remap(ops[2])
        self.emit(f"br label %{self._target(ops[1], by_pc)}")
        self.label(fl)
        self._remap(ops[4])
        self.emit(f"br label %{self._target(ops[3], by_pc)}")

    def _return(self, ins: Instruction, by_pc: dict) -> None:
        if ins.operands[0]:
            raise NativeUnsupported("a dispatch function returning values")
        self._free_allocs()
        self.emit("ret i32 0")

    def _discard_refs(self, ins: Instruction, by_pc: dict) -> None:
        for raw in ins.operands[0]:
            self.set_ref(self._rreg(raw), "null", "0", "0", 0)

    def _const_zero32(self, ins: Instruction, by_pc: dict) -> None:
        self.w32(ins.operands[0], "0")

    def _const_zero64(self, ins: Instruction, by_pc: dict) -> None:
        self.w64(ins.operands[0], "0")

    def _const32(self, ins: Instruction, by_pc: dict) -> None:
        self.w32(ins.operands[1], str(imm_bits(ins)))

    def _const64(self, ins: Instruction, by_pc: dict) -> None:
        self.w64(ins.operands[1], str(imm_bits(ins)))

    def _const_ref_zero(self, ins: Instruction, by_pc: dict) -> None:
        self.set_ref(self._rreg(ins.operands[0]), "null", "0", "0", 0)

    def _const_ref_rodata(self, ins: Instruction, by_pc: dict) -> None:
        ordinal, w = ins.operands
        if not 0 <= ordinal < self.rodata_count:
            raise NativeUnsupported(f"rodata ordinal {ordinal} out of range")
        p, ln = self._table_entry("ro_ptr", "ro_len", str(ordinal))
        self.set_ref(self._rreg(w), p, ln, "0", 1)

    def _table_entry(self, pointers: str, lengths: str, index: str) -> tuple[str, str]:
        """Entry ``index`` (an i64 value) of the context's pointer and length tables: (pointer, length)."""
        base_p, base_l = self.ctx_field(pointers, "ptr"), self.ctx_field(lengths, "ptr")
        pp, lp, p, ln = self.t(), self.t(), self.t(), self.t()
        self.emit(f"{pp} = getelementptr ptr, ptr {base_p}, i64 {index}")
        self.emit(f"{p} = load ptr, ptr {pp}")
        self.emit(f"{lp} = getelementptr i64, ptr {base_l}, i64 {index}")
        self.emit(f"{ln} = load i64, ptr {lp}")
        return p, ln

    def _list_get_ref(self, ins: Instruction, by_pc: dict) -> None:
        (lraw, xraw, _type, wraw), pc = ins.operands, ins.pc
        if wraw & isa.REF_MOVE_BIT:
            raise NativeUnsupported("moving a ref out of the bindings list")
        lk, w = self._rreg(lraw), self._rreg(wraw)
        flags, islist = self.t(), self.t()
        self.emit(f"{flags} = load i32, ptr %rf{lk}")
        bit = self.t()
        self.emit(f"{bit} = and i32 {flags}, 4")
        self.emit(f"{islist} = icmp eq i32 {bit}, 0")
        self.trap_if(islist, pc)
        k = self.r32(xraw)
        k64, n, oob = self.t(), self.ctx_field("nbind", "i64"), self.t()
        self.emit(f"{k64} = zext i32 {k} to i64")
        self.emit(f"{oob} = icmp uge i64 {k64}, {n}")
        self.trap_if(oob, pc)
        p, ln = self._table_entry("bind_ptr", "bind_len", k64)
        self.set_ref(w, p, ln, ln, 3)

    def _memory_access(self, ins: Instruction, by_pc: dict) -> None:
        self._memory(ins.symbol, ins.operands, ins.pc)

    def _buffer_length(self, ins: Instruction, by_pc: dict) -> None:
        ops, pc = ins.operands, ins.pc
        b = self._rreg(ops[0])
        flags, bit, null, ln = self.t(), self.t(), self.t(), self.t()
        self.emit(f"{flags} = load i32, ptr %rf{b}")
        self.emit(f"{bit} = and i32 {flags}, 1")
        self.emit(f"{null} = icmp eq i32 {bit}, 0")
        self.trap_if(null, pc)
        self.emit(f"{ln} = load i64, ptr %rl{b}")
        self.w64(ops[1], ln)

    def _buffer_alloc(self, ins: Instruction, by_pc: dict) -> None:
        ops, pc = ins.operands, ins.pc
        length = self.r64(ops[0])
        big = self.t()
        self.emit(f"{big} = icmp ugt i64 {length}, {_MAX_ALLOC}")
        self.trap_if(big, pc)
        self.extern.add("declare ptr @calloc(i64, i64)")
        n1, p, slot = self.t(), self.t(), self.allocs.index(pc)
        self.emit(f"{n1} = add i64 {length}, 1")  # never calloc(0): a null result means failure
        self.emit(f"{p} = call ptr @calloc(i64 {n1}, i64 1)")
        failed = self.t()
        self.emit(f"{failed} = icmp eq ptr {p}, null")
        self.trap_if(failed, pc)
        self.emit(f"store ptr {p}, ptr %al{slot}")
        self.set_ref(self._rreg(ops[2]), p, length, length, 3)

    def _select(self, ins: Instruction, by_pc: dict) -> None:
        ops = ins.operands
        wide = ins.symbol.endswith("64")
        c = self.r32(ops[0])
        a = self.r64(ops[1]) if wide else self.r32(ops[1])
        b = self.r64(ops[2]) if wide else self.r32(ops[2])
        cond, v = self.t(), self.t()
        self.emit(f"{cond} = icmp ne i32 {c}, 0")
        self.emit(f"{v} = select i1 {cond}, {'i64' if wide else 'i32'} {a}, {'i64' if wide else 'i32'} {b}")
        (self.w64 if wide else self.w32)(ops[3], v)

    def _bitcast32(self, ins: Instruction, by_pc: dict) -> None:
        self.w32(ins.operands[1], self.r32(ins.operands[0]))

    def _bitcast64(self, ins: Instruction, by_pc: dict) -> None:
        self.w64(ins.operands[1], self.r64(ins.operands[0]))

    def _memory(self, sym: str, ops, pc: int) -> None:
        load = sym in _LOADS
        if load:
            size, mem, reg_ty, ext = _LOADS[sym]
        else:
            size, mem, reg_ty = _STORES[sym]
            ext = None
        b = self._rreg(ops[0])
        off = self.r64(ops[1])
        # In bounds iff (offset + 1) * size <= length, i.e. offset < length >> log2(size) (no overflow).
        # A null ref has length 0 and a read-only buffer a writable length of 0, so one compare checks all.
        ln, lim, bad = self.t(), self.t(), self.t()
        self.emit(f"{ln} = load i64, ptr %{'rl' if load else 'rw'}{b}")
        self.emit(f"{lim} = lshr i64 {ln}, {_LOG2[size]}")
        self.emit(f"{bad} = icmp uge i64 {off}, {lim}")
        self.trap_if(bad, pc)
        base, addr = self.t(), self.t()
        self.emit(f"{base} = load ptr, ptr %rp{b}")
        self.emit(f"{addr} = getelementptr {mem}, ptr {base}, i64 {off}")
        if load:
            v = self.t()
            self.emit(f"{v} = load {mem}, ptr {addr}, align 1")
            if ext:
                x = self.t()
                self.emit(f"{x} = {ext} {mem} {v} to {reg_ty}")
                v = x
            (self.w64 if reg_ty == "i64" else self.w32)(ops[2], v)
        else:
            v = self.r64(ops[2]) if reg_ty == "i64" else self.r32(ops[2])
            if mem != reg_ty:
                x = self.t()
                self.emit(f"{x} = trunc {reg_ty} {v} to {mem}")
                v = x
            self.emit(f"store {mem} {v}, ptr {addr}, align 1")

    def _register_op(self, sym: str, ops, specs, pc: int) -> None:
        """An operation on registers writing one register: its IR from ``_REGISTER_OPS``."""
        reads = [(s.kind, raw) for s, raw in zip(specs, ops) if s.access == "read"]
        writes = [(s.kind, raw) for s, raw in zip(specs, ops) if s.access == "write"]
        if len(writes) != 1 or any(k not in _LLTYPE for k, _ in reads + writes):
            raise NativeUnsupported(f"instruction {sym}")
        wkind, wraw = writes[0]
        if sym in _FLOAT_BITS:  # bit operations on float registers (NaN payloads kept)
            self._float_bits(sym, reads[0][1], wraw)
            return
        emit = _REGISTER_OPS.get(sym)
        if emit is None:
            raise NativeUnsupported(f"instruction {sym}")
        xs = [self.read(k, raw) for k, raw in reads]
        v = self.t()
        emit(self, _Operation(sym, _LLTYPE[wkind], xs, _LLTYPE[reads[0][0]] if reads else "", v, pc))
        self.write(wkind, wraw, v)

    def _float_bits(self, sym: str, raw: int, wraw: int) -> None:
        """fabs and neg as bit operations (min/max likewise copy bits)."""
        wide = sym.endswith("64")
        x = self.r64(raw) if wide else self.r32(raw)
        ty = "i64" if wide else "i32"
        sign = "9223372036854775808" if wide else "2147483648"
        v = self.t()
        if sym.startswith("Abs"):
            self.emit(f"{v} = and {ty} {x}, {'9223372036854775807' if wide else '2147483647'}")
        else:
            self.emit(f"{v} = xor {ty} {x}, {'-' + sign}")
        (self.w64 if wide else self.w32)(wraw, v)

    # Instructions other than register operations: symbol -> the writer's method translating it.
    INSTRUCTIONS = {
        "Branch": _branch,
        "CondBranch": _cond_branch,
        "Return": _return,
        "DiscardRefs": _discard_refs,
        "ConstI32Zero": _const_zero32,
        "ConstF32Zero": _const_zero32,
        "ConstI64Zero": _const_zero64,
        "ConstF64Zero": _const_zero64,
        "ConstI32": _const32,
        "ConstF32": _const32,
        "ConstI64": _const64,
        "ConstF64": _const64,
        "ConstRefZero": _const_ref_zero,
        "ConstRefRodata": _const_ref_rodata,
        "ListGetRef": _list_get_ref,
        **dict.fromkeys((*_LOADS, *_STORES), _memory_access),  # (a comprehension cannot see class names)
        "BufferLength": _buffer_length,
        "BufferAlloc": _buffer_alloc,
        **dict.fromkeys(("SelectI32", "SelectF32", "SelectI64", "SelectF64"), _select),
        "BitcastI32F32": _bitcast32,
        "BitcastF32I32": _bitcast32,
        "BitcastI64F64": _bitcast64,
        "BitcastF64I64": _bitcast64,
    }


@dataclass(frozen=True)
class _Operation:
    """A register operation being translated: its symbol, the written register's LLVM type, the operands'
    values, the first operand's LLVM type, the result's name and the instruction's pc (for traps)."""

    sym: str
    ty: str
    xs: list[str]
    operand_ty: str
    v: str
    pc: int


def _int_binary(w: _FunctionWriter, op: _Operation) -> None:
    w.emit(f"{op.v} = {_BIN[op.sym[:-3]]} {op.ty} {op.xs[0]}, {op.xs[1]}")


def _int_fma(w: _FunctionWriter, op: _Operation) -> None:
    m = w.t()
    w.emit(f"{m} = mul {op.ty} {op.xs[0]}, {op.xs[1]}")
    w.emit(f"{op.v} = add {op.ty} {m}, {op.xs[2]}")


def _int_not(w: _FunctionWriter, op: _Operation) -> None:
    w.emit(f"{op.v} = xor {op.ty} {op.xs[0]}, -1")


def _int_abs(w: _FunctionWriter, op: _Operation) -> None:
    neg, c = w.t(), w.t()
    w.emit(f"{neg} = sub {op.ty} 0, {op.xs[0]}")
    w.emit(f"{c} = icmp slt {op.ty} {op.xs[0]}, 0")
    w.emit(f"{op.v} = select i1 {c}, {op.ty} {neg}, {op.ty} {op.xs[0]}")


def _int_min_max(w: _FunctionWriter, op: _Operation) -> None:
    pred = ("s" if op.sym.endswith("S") else "u") + "lt"
    _select_less(w, op, f"icmp {pred}")


def _float_min_max(w: _FunctionWriter, op: _Operation) -> None:
    _select_less(w, op, "fcmp olt")


def _select_less(w: _FunctionWriter, op: _Operation, compare: str) -> None:
    """min: y if y < x else x; max: y if x < y else x (the interpreter's order, NaN and -0 included)."""
    c = w.t()
    x, y = op.xs[0], op.xs[1]
    w.emit(f"{c} = {compare} {op.ty} {y}, {x}" if op.sym.startswith("Min") else f"{c} = {compare} {op.ty} {x}, {y}")
    w.emit(f"{op.v} = select i1 {c}, {op.ty} {y}, {op.ty} {x}")


def _shift(w: _FunctionWriter, op: _Operation) -> None:
    amount = op.xs[1]
    mask = 31 if op.sym.endswith(("I32", "I32S", "I32U")) else 63
    if op.ty == "i64":
        z = w.t()
        w.emit(f"{z} = zext i32 {amount} to i64")
        amount = z
    m = w.t()
    w.emit(f"{m} = and {op.ty} {amount}, {mask}")
    name = "shl" if op.sym.startswith("Shl") else ("ashr" if op.sym.endswith("S") else "lshr")
    w.emit(f"{op.v} = {name} {op.ty} {op.xs[0]}, {m}")


def _div_rem(w: _FunctionWriter, op: _Operation) -> None:
    ty, xs, v = op.ty, op.xs, op.v
    zero = w.t()
    w.emit(f"{zero} = icmp eq {ty} {xs[1]}, 0")
    w.trap_if(zero, op.pc)  # the interpreter raises (C: SIGFPE)
    is_div = op.sym.startswith("Div")
    if op.sym.endswith("U"):
        w.emit(f"{v} = {'udiv' if is_div else 'urem'} {ty} {xs[0]}, {xs[1]}")
        return
    # c_div/c_rem truncate toward zero; y == -1 gives -x (wrapping) and remainder 0, where C's sdiv/srem of
    # INT_MIN by -1 is undefined.
    m1, safe, q, alt = w.t(), w.t(), w.t(), w.t()
    w.emit(f"{m1} = icmp eq {ty} {xs[1]}, -1")
    w.emit(f"{safe} = select i1 {m1}, {ty} 1, {ty} {xs[1]}")
    w.emit(f"{q} = {'sdiv' if is_div else 'srem'} {ty} {xs[0]}, {safe}")
    w.emit(f"{alt} = sub {ty} 0, {xs[0]}" if is_div else f"{alt} = add {ty} 0, 0")
    w.emit(f"{v} = select i1 {m1}, {ty} {alt}, {ty} {q}")


def _compare(condition: str):
    """A comparison writing 0 or 1: ``condition`` is the compare, formatted with the operands' type and
    values (``{t}``, ``{x}``, ``{y}``)."""

    def emit(w: _FunctionWriter, op: _Operation) -> None:
        c = w.t()
        y = op.xs[1] if len(op.xs) > 1 else op.xs[0]
        w.emit(f"{c} = " + condition.format(t=op.operand_ty, x=op.xs[0], y=y))
        w.emit(f"{op.v} = zext i1 {c} to i32")

    return emit


def _float_binary(w: _FunctionWriter, op: _Operation) -> None:
    w.emit(f"{op.v} = {_FBIN[op.sym[:-3]]} {op.ty} {op.xs[0]}, {op.xs[1]}")


def _float_fma(w: _FunctionWriter, op: _Operation) -> None:
    # ops.h without FP_FAST_FMA: the product rounded, then the sum (two IEEE operations, not fused).
    m = w.t()
    w.emit(f"{m} = fmul {op.ty} {op.xs[0]}, {op.xs[1]}")
    w.emit(f"{op.v} = fadd {op.ty} {m}, {op.xs[2]}")


def _libm(w: _FunctionWriter, op: _Operation) -> None:
    fn = _LIBM_F32.get(op.sym) or _LIBM_F64[op.sym]
    w.extern.add(f"declare {op.ty} @{fn}({op.ty})")
    w.emit(f"{op.v} = call {op.ty} @{fn}({op.ty} {op.xs[0]})")


def _rsqrt(w: _FunctionWriter, op: _Operation) -> None:
    fn = "sqrtf" if op.ty == "float" else "sqrt"
    w.extern.add(f"declare {op.ty} @{fn}({op.ty})")
    s = w.t()
    w.emit(f"{s} = call {op.ty} @{fn}({op.ty} {op.xs[0]})")
    w.emit(f"{op.v} = fdiv {op.ty} 1.0, {s}")


def _convert(instruction: str):
    """A one-operand conversion: ``instruction`` formatted with the operand's type and value and the
    result's type (``{t}``, ``{x}``, ``{ty}``)."""

    def emit(w: _FunctionWriter, op: _Operation) -> None:
        w.emit(f"{op.v} = " + instruction.format(t=op.operand_ty, x=op.xs[0], ty=op.ty))

    return emit


def _f32_to_i32(w: _FunctionWriter, op: _Operation) -> None:
    # (int32_t)lroundf(x): the low 32 bits of llroundf (NaN/out of range: LONG_MIN, as on x86-64).
    w.extern.add("declare i64 @llroundf(float)")
    r = w.t()
    w.emit(f"{r} = call i64 @llroundf(float {op.xs[0]})")
    w.emit(f"{op.v} = trunc i64 {r} to i32")


def _f32_to_i64(w: _FunctionWriter, op: _Operation) -> None:
    w.extern.add("declare i64 @llroundf(float)")
    w.emit(f"{op.v} = call i64 @llroundf(float {op.xs[0]})")


def _sign_extend_small(w: _FunctionWriter, op: _Operation) -> None:
    small, x = ("i8" if "8" in op.sym else "i16"), w.t()
    w.emit(f"{x} = trunc i32 {op.xs[0]} to {small}")
    w.emit(f"{op.v} = sext {small} {x} to i32")


def _icmp_predicate(sym: str) -> str | None:
    for pattern, pred in _ICMP.items():
        for w in ("I32", "I64"):
            if sym == (pattern.format(w) if "{}" in pattern else pattern + w):
                return pred
    return None


def _fcmp_predicate(sym: str) -> str | None:
    for pattern, pred in _FCMP.items():
        for w in ("F32", "F64"):
            if sym == pattern.format(w):
                return pred
    return None


def _icmp(w: _FunctionWriter, op: _Operation) -> None:
    _compare(f"icmp {_icmp_predicate(op.sym)} {{t}} {{x}}, {{y}}")(w, op)


def _fcmp(w: _FunctionWriter, op: _Operation) -> None:
    _compare(f"fcmp {_fcmp_predicate(op.sym)} {{t}} {{x}}, {{y}}")(w, op)


# Register operations, in order: the first rule whose test takes a symbol translates it.
_REGISTER_RULES: list[tuple[Callable[[str], bool], Callable[[_FunctionWriter, _Operation], None]]] = [
    (lambda s: s.endswith(("I32", "I64")) and s[:-3] in _BIN, _int_binary),
    (lambda s: s in ("FMAI32", "FMAI64"), _int_fma),
    (lambda s: s in ("NotI32", "NotI64"), _int_not),
    (lambda s: s in ("AbsI32", "AbsI64"), _int_abs),
    (lambda s: s[:-1] in ("MinI32", "MaxI32", "MinI64", "MaxI64"), _int_min_max),
    (lambda s: s in ("ShlI32", "ShrI32S", "ShrI32U", "ShlI64", "ShrI64S", "ShrI64U"), _shift),
    (lambda s: s[:-1] in ("DivI32", "RemI32", "DivI64", "RemI64"), _div_rem),
    (lambda s: s in ("CmpNZI32", "CmpNZI64"), _compare("icmp ne {t} {x}, 0")),
    (lambda s: _icmp_predicate(s) is not None, _icmp),
    (lambda s: _fcmp_predicate(s) is not None, _fcmp),
    (lambda s: s in ("CmpNaNF32", "CmpNaNF64"), _compare("fcmp uno {t} {x}, {x}")),
    (lambda s: s[-3:] in ("F32", "F64") and s[:-3] in _FBIN, _float_binary),
    (lambda s: s in ("FMAF32", "FMAF64"), _float_fma),
    (lambda s: s in ("MinF32", "MaxF32", "MinF64", "MaxF64"), _float_min_max),
    (lambda s: s in _LIBM_F32 or s in _LIBM_F64, _libm),
    (lambda s: s in ("RsqrtF32", "RsqrtF64"), _rsqrt),
    (lambda s: s in ("CastSI32F32", "CastSI64F32", "CastSI32F64", "CastSI64F64"), _convert("sitofp {t} {x} to {ty}")),
    (lambda s: s in ("CastUI32F32", "CastUI64F32", "CastUI32F64", "CastUI64F64"), _convert("uitofp {t} {x} to {ty}")),
    (lambda s: s in ("CastF32SI32", "CastF32UI32"), _f32_to_i32),
    (lambda s: s == "CastF32SI64", _f32_to_i64),
    (lambda s: s == "ExtI32I64S", _convert("sext i32 {x} to i64")),
    (lambda s: s == "ExtI32I64U", _convert("zext i32 {x} to i64")),
    (lambda s: s == "TruncI64I32", _convert("trunc i64 {x} to i32")),
    (lambda s: s in ("TruncI32I8", "ExtI8I32U"), _convert("and i32 {x}, 255")),
    (lambda s: s in ("TruncI32I16", "ExtI16I32U"), _convert("and i32 {x}, 65535")),
    (lambda s: s in ("ExtI8I32S", "ExtI16I32S"), _sign_extend_small),
    (lambda s: s == "ExtF32F64", _convert("fpext float {x} to double")),
    (lambda s: s == "TruncF64F32", _convert("fptrunc double {x} to float")),
]


def _register_ops() -> dict[str, Callable[[_FunctionWriter, _Operation], None]]:
    table: dict[str, Callable[[_FunctionWriter, _Operation], None]] = {}
    for sym in isa.BY_SYMBOL:
        for test, emit in _REGISTER_RULES:
            if test(sym):
                table[sym] = emit
                break
    return table


_REGISTER_OPS = _register_ops()  # symbol -> emitter(writer, _Operation)
_FLOAT_BITS = ("AbsF32", "NegF32", "AbsF64", "NegF64")



def _driver(name: str, wg: str) -> str:
    """Every workgroup, z then y then x; stops at the first failed check and says which workgroup."""
    o = _CTX_OFFSETS
    return f"""
define i32 @{name}(ptr %ctx, i32 %cx, i32 %cy, i32 %cz) {{
entry:
  br label %z.head
z.head:
  %z = phi i32 [0, %entry], [%z.next, %y.done]
  %z.more = icmp ult i32 %z, %cz
  br i1 %z.more, label %y.head, label %done
y.head:
  %y = phi i32 [0, %z.head], [%y.next, %x.done]
  %y.more = icmp ult i32 %y, %cy
  br i1 %y.more, label %x.head, label %y.done
x.head:
  %x = phi i32 [0, %y.head], [%x.next, %x.body]
  %x.more = icmp ult i32 %x, %cx
  br i1 %x.more, label %x.call, label %x.done
x.call:
  %rc = call i32 @{wg}(ptr %ctx, i32 %x, i32 %y, i32 %z, i32 %cx, i32 %cy, i32 %cz)
  %failed = icmp ne i32 %rc, 0
  br i1 %failed, label %fail, label %x.body
x.body:
  %x.next = add i32 %x, 1
  br label %x.head
x.done:
  %y.next = add i32 %y, 1
  br label %y.head
y.done:
  %z.next = add i32 %z, 1
  br label %z.head
fail:
  %px = getelementptr i8, ptr %ctx, i64 {o["wg_x"]}
  store i32 %x, ptr %px
  %py = getelementptr i8, ptr %ctx, i64 {o["wg_y"]}
  store i32 %y, ptr %py
  %pz = getelementptr i8, ptr %ctx, i64 {o["wg_z"]}
  store i32 %z, ptr %pz
  ret i32 %rc
done:
  ret i32 0
}}
"""


@dataclass
class NativeExecutable:
    """The native drivers of one VMVX executable's dispatch functions (None where one was refused)."""

    drivers: dict[int, object]  # function ordinal -> DRIVER_SIGNATURE callable
    refused: dict[int, str]  # function ordinal -> why it stays on the interpreter
    engine: object  # keeps the JIT's code alive


_lock = threading.Lock()


@functools.cache
def _llvm():
    from engine.substitute.llvm_ir import initialize_llvm

    llvm = initialize_llvm()
    for lib in ("m", "c"):
        path = ctypes.util.find_library(lib)
        if path:
            llvm.load_library_permanently(path)
    return llvm


def compile_module(module: VmfbModule, ordinals: list[int]) -> NativeExecutable:
    """Translate the dispatch functions ``ordinals`` of a VMVX executable's module and compile them."""
    parts: list[str] = []
    extern: set[str] = set()
    refused: dict[int, str] = {}
    names: dict[int, str] = {}
    rodata_count = len(module.rodata_segments)
    for ordinal in ordinals:
        writer = _FunctionWriter(module.functions[ordinal], f"wg{ordinal}", rodata_count)
        try:
            text = writer.build()
        except NativeUnsupported as e:
            refused[ordinal] = str(e)
            continue
        parts.append(text)
        parts.append(_driver(f"dispatch{ordinal}", f"wg{ordinal}"))
        extern |= writer.extern
        names[ordinal] = f"dispatch{ordinal}"
    if not names:
        return NativeExecutable({}, refused, None)
    ir = "\n".join(['!0 = !{!"branch_weights", i32 1, i32 2000}', *sorted(extern), *parts])
    with _lock:
        llvm = _llvm()
        mod = llvm.parse_assembly(ir)
        mod.verify()
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2
        )
        pto = llvm.create_pipeline_tuning_options(speed_level=2)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        drivers = {o: DRIVER_SIGNATURE(engine.get_function_address(n)) for o, n in names.items()}
    return NativeExecutable(drivers, refused, engine)


def pointer_table(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Base addresses and byte lengths of uint8 arrays, as the context's pointer and length tables."""
    ptrs = np.fromiter((a.ctypes.data if a.size else 0 for a in arrays), dtype=np.uint64, count=len(arrays))
    lens = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    return ptrs, lens
