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

    def _instruction(self, ins: Instruction, by_pc: dict) -> None:  # noqa: C901 - one table of cases
        sym, ops, pc = ins.symbol, ins.operands, ins.pc
        specs = ins.opcode.operands
        if sym == "Branch":
            self._remap(ops[1])
            self.emit(f"br label %{self._target(ops[0], by_pc)}")
            return
        if sym == "CondBranch":
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
            return
        if sym == "Return":
            if ops[0]:
                raise NativeUnsupported("a dispatch function returning values")
            self._free_allocs()
            self.emit("ret i32 0")
            return
        if sym == "DiscardRefs":
            for raw in ops[0]:
                self.set_ref(self._rreg(raw), "null", "0", "0", 0)
            return
        if sym in ("ConstI32Zero", "ConstF32Zero"):
            self.w32(ops[0], "0")
            return
        if sym in ("ConstI64Zero", "ConstF64Zero"):
            self.w64(ops[0], "0")
            return
        if sym in ("ConstI32", "ConstF32", "ConstI64", "ConstF64"):
            bits = imm_bits(ins)
            if sym in ("ConstI32", "ConstF32"):
                self.w32(ops[1], str(bits))
            else:
                self.w64(ops[1], str(bits))
            return
        if sym == "ConstRefZero":
            self.set_ref(self._rreg(ops[0]), "null", "0", "0", 0)
            return
        if sym == "ConstRefRodata":
            ordinal, w = ops
            if not 0 <= ordinal < self.rodata_count:
                raise NativeUnsupported(f"rodata ordinal {ordinal} out of range")
            base_p, base_l = self.ctx_field("ro_ptr", "ptr"), self.ctx_field("ro_len", "ptr")
            pp, lp, p, ln = self.t(), self.t(), self.t(), self.t()
            self.emit(f"{pp} = getelementptr ptr, ptr {base_p}, i64 {ordinal}")
            self.emit(f"{p} = load ptr, ptr {pp}")
            self.emit(f"{lp} = getelementptr i64, ptr {base_l}, i64 {ordinal}")
            self.emit(f"{ln} = load i64, ptr {lp}")
            self.set_ref(self._rreg(w), p, ln, "0", 1)
            return
        if sym == "ListGetRef":
            lraw, xraw, _type, wraw = ops
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
            base_p, base_l = self.ctx_field("bind_ptr", "ptr"), self.ctx_field("bind_len", "ptr")
            pp, lp, p, ln = self.t(), self.t(), self.t(), self.t()
            self.emit(f"{pp} = getelementptr ptr, ptr {base_p}, i64 {k64}")
            self.emit(f"{p} = load ptr, ptr {pp}")
            self.emit(f"{lp} = getelementptr i64, ptr {base_l}, i64 {k64}")
            self.emit(f"{ln} = load i64, ptr {lp}")
            self.set_ref(w, p, ln, ln, 3)
            return
        if sym in _LOADS or sym in _STORES:
            self._memory(sym, ops, pc)
            return
        if sym == "BufferLength":
            b = self._rreg(ops[0])
            flags, bit, null, ln = self.t(), self.t(), self.t(), self.t()
            self.emit(f"{flags} = load i32, ptr %rf{b}")
            self.emit(f"{bit} = and i32 {flags}, 1")
            self.emit(f"{null} = icmp eq i32 {bit}, 0")
            self.trap_if(null, pc)
            self.emit(f"{ln} = load i64, ptr %rl{b}")
            self.w64(ops[1], ln)
            return
        if sym == "BufferAlloc":
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
            return
        if sym in ("SelectI32", "SelectF32", "SelectI64", "SelectF64"):
            wide = sym.endswith("64")
            c = self.r32(ops[0])
            a = self.r64(ops[1]) if wide else self.r32(ops[1])
            b = self.r64(ops[2]) if wide else self.r32(ops[2])
            cond, v = self.t(), self.t()
            self.emit(f"{cond} = icmp ne i32 {c}, 0")
            self.emit(
                f"{v} = select i1 {cond}, {'i64' if wide else 'i32'} {a}, {'i64' if wide else 'i32'} {b}"
            )
            (self.w64 if wide else self.w32)(ops[3], v)
            return
        if sym in ("BitcastI32F32", "BitcastF32I32"):
            self.w32(ops[1], self.r32(ops[0]))
            return
        if sym in ("BitcastI64F64", "BitcastF64I64"):
            self.w64(ops[1], self.r64(ops[0]))
            return
        self._register_op(sym, ops, specs, pc)

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

    def _register_op(self, sym: str, ops, specs, pc: int) -> None:  # noqa: C901
        reads = [(s.kind, raw) for s, raw in zip(specs, ops) if s.access == "read"]
        writes = [(s.kind, raw) for s, raw in zip(specs, ops) if s.access == "write"]
        if len(writes) != 1 or any(k not in _LLTYPE for k, _ in reads + writes):
            raise NativeUnsupported(f"instruction {sym}")
        wkind, wraw = writes[0]
        # Bit operations on float registers (fabs, neg, min/max copy bits: NaN payloads kept).
        if sym in ("AbsF32", "NegF32", "AbsF64", "NegF64"):
            wide = sym.endswith("64")
            x = self.r64(reads[0][1]) if wide else self.r32(reads[0][1])
            ty = "i64" if wide else "i32"
            sign = "9223372036854775808" if wide else "2147483648"
            v = self.t()
            if sym.startswith("Abs"):
                self.emit(f"{v} = and {ty} {x}, {'9223372036854775807' if wide else '2147483647'}")
            else:
                self.emit(f"{v} = xor {ty} {x}, {'-' + sign if wide else '-' + sign}")
            (self.w64 if wide else self.w32)(wraw, v)
            return
        xs = [self.read(k, raw) for k, raw in reads]
        ty = _LLTYPE[wkind]
        v = self.t()
        base, width = sym[:-3], sym[-3:]
        if sym.endswith(("I32", "I64")) and base in _BIN:
            self.emit(f"{v} = {_BIN[base]} {ty} {xs[0]}, {xs[1]}")
        elif sym in ("FMAI32", "FMAI64"):
            m = self.t()
            self.emit(f"{m} = mul {ty} {xs[0]}, {xs[1]}")
            self.emit(f"{v} = add {ty} {m}, {xs[2]}")
        elif sym in ("NotI32", "NotI64"):
            self.emit(f"{v} = xor {ty} {xs[0]}, -1")
        elif sym in ("AbsI32", "AbsI64"):
            neg, c = self.t(), self.t()
            self.emit(f"{neg} = sub {ty} 0, {xs[0]}")
            self.emit(f"{c} = icmp slt {ty} {xs[0]}, 0")
            self.emit(f"{v} = select i1 {c}, {ty} {neg}, {ty} {xs[0]}")
        elif sym[:-1] in ("MinI32", "MaxI32", "MinI64", "MaxI64"):
            pred = ("s" if sym.endswith("S") else "u") + "lt"
            c = self.t()
            if sym.startswith("Min"):  # y if y < x else x
                self.emit(f"{c} = icmp {pred} {ty} {xs[1]}, {xs[0]}")
            else:  # y if x < y else x
                self.emit(f"{c} = icmp {pred} {ty} {xs[0]}, {xs[1]}")
            self.emit(f"{v} = select i1 {c}, {ty} {xs[1]}, {ty} {xs[0]}")
        elif sym in ("ShlI32", "ShrI32S", "ShrI32U", "ShlI64", "ShrI64S", "ShrI64U"):
            amount = xs[1]
            mask = 31 if sym.endswith(("I32", "I32S", "I32U")) else 63
            if ty == "i64":
                z = self.t()
                self.emit(f"{z} = zext i32 {amount} to i64")
                amount = z
            m = self.t()
            self.emit(f"{m} = and {ty} {amount}, {mask}")
            op = "shl" if sym.startswith("Shl") else ("ashr" if sym.endswith("S") else "lshr")
            self.emit(f"{v} = {op} {ty} {xs[0]}, {m}")
        elif sym[:-1] in ("DivI32", "RemI32", "DivI64", "RemI64"):
            zero = self.t()
            self.emit(f"{zero} = icmp eq {ty} {xs[1]}, 0")
            self.trap_if(zero, pc)  # the interpreter raises (C: SIGFPE)
            is_div = sym.startswith("Div")
            if sym.endswith("U"):
                self.emit(f"{v} = {'udiv' if is_div else 'urem'} {ty} {xs[0]}, {xs[1]}")
            else:
                # c_div/c_rem truncate toward zero; y == -1 gives -x (wrapping) and remainder 0, where C's
                # sdiv/srem of INT_MIN by -1 is undefined.
                m1, safe, q, alt = self.t(), self.t(), self.t(), self.t()
                self.emit(f"{m1} = icmp eq {ty} {xs[1]}, -1")
                self.emit(f"{safe} = select i1 {m1}, {ty} 1, {ty} {xs[1]}")
                self.emit(f"{q} = {'sdiv' if is_div else 'srem'} {ty} {xs[0]}, {safe}")
                if is_div:
                    self.emit(f"{alt} = sub {ty} 0, {xs[0]}")
                else:
                    self.emit(f"{alt} = add {ty} 0, 0")
                self.emit(f"{v} = select i1 {m1}, {ty} {alt}, {ty} {q}")
        elif sym in ("CmpNZI32", "CmpNZI64"):
            c = self.t()
            self.emit(f"{c} = icmp ne {_LLTYPE[reads[0][0]]} {xs[0]}, 0")
            self.emit(f"{v} = zext i1 {c} to i32")
        elif any(sym == p.format(w) if "{}" in p else sym == p + w for p in _ICMP for w in ("I32", "I64")):
            pred = next(
                pr
                for p, pr in _ICMP.items()
                for w in ("I32", "I64")
                if sym == (p.format(w) if "{}" in p else p + w)
            )
            c = self.t()
            self.emit(f"{c} = icmp {pred} {_LLTYPE[reads[0][0]]} {xs[0]}, {xs[1]}")
            self.emit(f"{v} = zext i1 {c} to i32")
        elif any(sym == p.format(w) for p in _FCMP for w in ("F32", "F64")):
            pred = next(pr for p, pr in _FCMP.items() for w in ("F32", "F64") if sym == p.format(w))
            c = self.t()
            self.emit(f"{c} = fcmp {pred} {_LLTYPE[reads[0][0]]} {xs[0]}, {xs[1]}")
            self.emit(f"{v} = zext i1 {c} to i32")
        elif sym in ("CmpNaNF32", "CmpNaNF64"):
            c = self.t()
            self.emit(f"{c} = fcmp uno {_LLTYPE[reads[0][0]]} {xs[0]}, {xs[0]}")
            self.emit(f"{v} = zext i1 {c} to i32")
        elif width in ("F32", "F64") and base in _FBIN:
            self.emit(f"{v} = {_FBIN[base]} {ty} {xs[0]}, {xs[1]}")
        elif sym in ("FMAF32", "FMAF64"):
            # ops.h without FP_FAST_FMA: the product rounded, then the sum (two IEEE operations, not fused).
            m = self.t()
            self.emit(f"{m} = fmul {ty} {xs[0]}, {xs[1]}")
            self.emit(f"{v} = fadd {ty} {m}, {xs[2]}")
        elif sym in ("MinF32", "MaxF32", "MinF64", "MaxF64"):
            c = self.t()
            if sym.startswith("Min"):  # y if y < x else x
                self.emit(f"{c} = fcmp olt {ty} {xs[1]}, {xs[0]}")
            else:
                self.emit(f"{c} = fcmp olt {ty} {xs[0]}, {xs[1]}")
            self.emit(f"{v} = select i1 {c}, {ty} {xs[1]}, {ty} {xs[0]}")
        elif sym in _LIBM_F32 or sym in _LIBM_F64:
            fn = _LIBM_F32.get(sym) or _LIBM_F64[sym]
            self.extern.add(f"declare {ty} @{fn}({ty})")
            self.emit(f"{v} = call {ty} @{fn}({ty} {xs[0]})")
        elif sym in ("RsqrtF32", "RsqrtF64"):
            fn = "sqrtf" if ty == "float" else "sqrt"
            self.extern.add(f"declare {ty} @{fn}({ty})")
            s = self.t()
            self.emit(f"{s} = call {ty} @{fn}({ty} {xs[0]})")
            self.emit(f"{v} = fdiv {ty} 1.0, {s}")
        elif sym in ("CastSI32F32", "CastSI64F32", "CastSI32F64", "CastSI64F64"):
            self.emit(f"{v} = sitofp {_LLTYPE[reads[0][0]]} {xs[0]} to {ty}")
        elif sym in ("CastUI32F32", "CastUI64F32", "CastUI32F64", "CastUI64F64"):
            self.emit(f"{v} = uitofp {_LLTYPE[reads[0][0]]} {xs[0]} to {ty}")
        elif sym in ("CastF32SI32", "CastF32UI32"):
            # (int32_t)lroundf(x): the low 32 bits of llroundf (NaN/out of range: LONG_MIN, as on x86-64).
            self.extern.add("declare i64 @llroundf(float)")
            r = self.t()
            self.emit(f"{r} = call i64 @llroundf(float {xs[0]})")
            self.emit(f"{v} = trunc i64 {r} to i32")
        elif sym in ("CastF32SI64",):
            self.extern.add("declare i64 @llroundf(float)")
            self.emit(f"{v} = call i64 @llroundf(float {xs[0]})")
        elif sym in ("ExtI32I64S", "ExtI32I64U"):
            self.emit(f"{v} = {'sext' if sym.endswith('S') else 'zext'} i32 {xs[0]} to i64")
        elif sym == "TruncI64I32":
            self.emit(f"{v} = trunc i64 {xs[0]} to i32")
        elif sym in ("TruncI32I8", "TruncI32I16", "ExtI8I32U", "ExtI16I32U"):
            self.emit(f"{v} = and i32 {xs[0]}, {'255' if '8' in sym else '65535'}")
        elif sym in ("ExtI8I32S", "ExtI16I32S"):
            small, x = ("i8" if "8" in sym else "i16"), self.t()
            self.emit(f"{x} = trunc i32 {xs[0]} to {small}")
            self.emit(f"{v} = sext {small} {x} to i32")
        elif sym == "ExtF32F64":
            self.emit(f"{v} = fpext float {xs[0]} to double")
        elif sym == "TruncF64F32":
            self.emit(f"{v} = fptrunc double {xs[0]} to float")
        else:
            raise NativeUnsupported(f"instruction {sym}")
        self.write(wkind, wraw, v)


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
