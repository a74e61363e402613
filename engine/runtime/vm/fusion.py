"""Fused code: a function's straight-line VM code run as Python source, its loops inside one Python call.

The interpreter's fast loop pays, per instruction, a closure call plus its own bookkeeping (the next pc, the
step count, the step limit). Here the runs of instructions that cannot change the call stack (arithmetic,
constants, selects, buffer and list access), each up to its branch, become the blocks of one generated
function per VM function, ``region(i, r, t, pc, budget) -> (pc, steps)``: the arithmetic rows inlined with
their registers as numbers (``ops.arith.inline_source``: the very expressions the closures evaluate), the
other instructions as calls of their closures, the branches with their register remaps inline and a jump to
the next block inside the same call. It returns at the first pc that is not a block (a call, a return, an
import...), which the interpreter's loop then runs as before.

What stays exact:

* steps: a block runs only when all its instructions fit in ``budget``; the loop then steps instruction by
  instruction, so ``run(n)`` still stops after exactly ``n`` instructions;
* traps: an exception inside ``region`` is mapped back, by its source line, to the instruction that raised
  (``FusedCode.fault``), so the trap names that pc and the steps before it count;
* breakpoints: blocks covering a pc with a breakpoint stub are left out (``FusedCode.exclude``), so the loop
  reaches the stub instruction by instruction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.runtime import isa
from engine.runtime.vm.ops import arith
from engine.runtime.vm.ops.constants import imm_bits

# Instructions whose closures always return the next pc and touch no call stack: safe inside a block.
_CALL_THROUGH_PREFIXES = ("Const", "Select", "Switch", "Buffer", "List", "AssignRef", "CastAnyRef")
_MAX_BLOCK = 200  # instructions per block (longer straight-line code is split)
_CHAIN = 4  # blocks tested one after another at the leaves of the pc search tree


@dataclass(frozen=True)
class Block:
    """Straight-line code from ``start``: ``count`` instructions (``covered`` pcs), then ``next_pcs``."""

    start: int
    count: int
    covered: tuple[int, ...]
    lines: tuple[tuple[str, int | None], ...]  # (statement at block level, index in covered)


def _fusable(symbol: str) -> str | None:
    """How an instruction goes into a block: 'inline', 'call', 'marker', 'branch', or None (ends it)."""
    if symbol in arith.ROWS:
        return "inline"
    if symbol == "Block":
        return "marker"
    if symbol in ("Branch", "CondBranch"):
        return "branch"
    if symbol.startswith(_CALL_THROUGH_PREFIXES):
        return "call"
    return None


def _inline_plain(ins) -> list[str] | None:
    """Statements for the constant and select instructions (their closures' bodies, registers as numbers)."""
    sym, ops = ins.opcode.symbol, ins.operands
    if sym in ("ConstI32Zero", "ConstF32Zero"):
        return [f"i[{ops[0] & 0x7FFF}] = 0"]
    if sym in ("ConstI64Zero", "ConstF64Zero"):
        w = ops[0] & 0x7FFF
        return [f"i[{w}] = 0; i[{w + 1}] = 0"]
    if sym in ("ConstI32", "ConstF32"):
        return [f"i[{ops[1] & 0x7FFF}] = {imm_bits(ins)}"]
    if sym in ("ConstI64", "ConstF64"):
        v, w = imm_bits(ins), ops[1] & 0x7FFF
        return [f"i[{w}] = {v & 0xFFFFFFFF}; i[{w + 1}] = {v >> 32}"]
    if sym in ("SelectI32", "SelectF32"):
        c, a, b, w = (x & 0x7FFF for x in ops)
        return [f"i[{w}] = i[{a}] if i[{c}] else i[{b}]"]
    if sym in ("SelectI64", "SelectF64"):
        c, a, b, w = (x & 0x7FFF for x in ops)
        return [f"if i[{c}]:", f"    i[{w}] = i[{a}]; i[{w + 1}] = i[{a + 1}]", "else:",
                f"    i[{w}] = i[{b}]; i[{w + 1}] = i[{b + 1}]"]  # fmt: skip
    return None


def _remap_lines(pairs) -> list[str]:
    out = []
    for src, dst in pairs:
        if src & isa.REF_BANK_BIT:
            s, d = src & isa.REF_INDEX_MASK, dst & isa.REF_INDEX_MASK
            if src & isa.REF_MOVE_BIT and s != d:
                out.append(f"v = r[{s}]; r[{s}] = None; r[{d}] = v")
            else:
                out.append(f"r[{d}] = r[{s}]")
        else:
            out.append(f"i[{dst & 0x7FFF}] = i[{src & 0x7FFF}]")
    return out


def leaders(instructions: dict) -> set[int]:
    """Where blocks start: the entry, branch destinations (past their marker) and every pc after an
    instruction that cannot be in a block (a call returns there)."""
    out = {0}
    for ins in instructions.values():
        kind = _fusable(ins.opcode.symbol)
        if kind is None or kind == "branch":
            out.add(ins.next_pc)
        for spec, value in zip(ins.opcode.operands, ins.operands):
            if spec.kind == isa.BRANCH and value in instructions:
                out.add(instructions[value].next_pc)
            elif spec.kind == isa.BR_TABLE_CASES:
                out.update(instructions[t].next_pc for t, _ in value if t in instructions)
    return out


def build_block(instructions: dict, closures: list, start: int, namespace: dict) -> Block | None:
    """The block at ``start`` (None when fewer than two instructions would be in it: nothing to gain).
    Closures it calls are added to ``namespace``; its statements jump with ``pc = X; n += count; continue``."""
    lines: list[tuple[str, int | None]] = []
    covered: list[int] = []
    pc = start
    tail: list[tuple[str, int | None]] | None = None

    def add(texts: list[str], index: int | None, indent: str = "") -> None:
        lines.extend((indent + t, index) for t in texts)

    while pc in instructions and len(covered) < _MAX_BLOCK:
        ins = instructions[pc]
        kind = _fusable(ins.opcode.symbol)
        if kind is None:
            break
        k = len(covered)
        if kind == "branch":
            ops = ins.operands
            if ins.opcode.symbol == "Branch":
                target = instructions.get(ops[0])
                if target is None:
                    break
                covered.append(pc)
                add(_remap_lines(ops[1]), k)
                tail = [(f"pc = {target.next_pc}", k)]
            else:
                t_target, f_target = instructions.get(ops[1]), instructions.get(ops[3])
                if t_target is None or f_target is None:
                    break
                covered.append(pc)
                add([f"if i[{ops[0] & 0x7FFF}]:"], k)
                add(_remap_lines(ops[2]), k, "    ")
                add([f"pc = {t_target.next_pc}"], k, "    ")
                add(["JUMP"], None, "    ")
                add(_remap_lines(ops[4]), k)
                tail = [(f"pc = {f_target.next_pc}", k)]
            pc = ins.next_pc
            break
        covered.append(pc)
        if kind == "inline":
            add([s.strip() for s in arith.inline_source(ins.opcode.symbol, ins.operands)], k)
        elif kind == "call" and (plain := _inline_plain(ins)) is not None:
            add(plain, k)
        elif kind == "call":
            name = f"c{start}_{k}"
            namespace[name] = closures[pc]
            add([f"{name}(i, r, t)"], k)
        pc = ins.next_pc
    if len(covered) < 2:
        return None
    n = len(covered)
    if tail is None:  # ends before an instruction that runs alone: leave the region there
        lines.append((f"return {pc}, n + {n}", None))
    else:
        lines.extend(tail)
        lines.append(("JUMP", None))
    jump = f"n += {n}; continue"
    return Block(start, n, tuple(covered), tuple((t.replace("JUMP", jump), k) for t, k in lines))


_REGISTER = re.compile(r"(?<![\w.\]])i\[(\d+)\]")
_REGISTER_WRITE = re.compile(r"(?<![\w.\]])i\[(\d+)\] = ")


def _promote_registers(source: list[str], owners: dict[int, tuple[int, int]]) -> list[str]:
    """The region with its i32 registers held in Python locals (``i5`` for ``i[5]``): loaded once when the
    region is entered, written back to the frame's registers at each ``return`` and when an instruction
    raises (a trap shows the registers as the instructions before it left them). A local costs a fraction
    of a list item's load or store, and loops between blocks then touch no list at all. Left as it is
    when a block calls an instruction's closure (it reads and writes the registers itself) or indexes a
    register some other way. ``owners`` (source line -> instruction) moves with the lines."""
    text = "\n".join(source[2:])
    if "(i, r, t)" in text or "i[" in _REGISTER.sub("", text):
        return source
    touched = sorted({int(m) for m in _REGISTER.findall(text)})
    written = sorted({int(m) for m in _REGISTER_WRITE.findall(text)})
    if not touched:
        return source
    flush = "; ".join(f"i[{k}] = i{k}" for k in written)

    def promoted(line: str) -> str:
        line = _REGISTER.sub(lambda m: f"i{m.group(1)}", line)
        stripped = line.lstrip()
        if flush and stripped.startswith("return "):
            line = f"{line[: len(line) - len(stripped)]}{flush}; {stripped}"
        return "    " + line

    head = [*source[:2], "    " + "; ".join(f"i{k} = i[{k}]" for k in touched), "    try:"]
    tail = ["    except BaseException:", f"        {flush or 'pass'}", "        raise"]
    lines = [*head, *(promoted(line) for line in source[2:]), *tail]
    shift = len(head) - 2  # the lines added above the loop
    moved = {line + shift: owner for line, owner in owners.items()}
    return _propagate_operands(lines, moved, owners)


_OPERAND_LOAD = re.compile(r"^\s*([xyz]) = (i\d+)$")
_ASSIGNED = re.compile(r"(?:^|;)\s*(\w+) = ")


def _propagate_operands(lines: list[str], owners: dict[int, tuple[int, int]], out_owners: dict) -> list[str]:
    """Drop an instruction's operand copies (``x = i3``) where its statements can read the register itself:
    no statement of the instruction but the last assigns a register, and that one assigns one name.
    ``owners`` maps 1-based line numbers of ``lines`` to instructions; ``out_owners`` gets the new map."""
    keep = [True] * len(lines)
    text = list(lines)
    number = 1
    while number <= len(lines):
        owner = owners.get(number)
        end = number
        while owners.get(end + 1) == owner and owner is not None:
            end += 1
        if owner is not None:
            group = list(range(number, end + 1))  # 1-based
            loads = []
            while group and (m := _OPERAND_LOAD.match(lines[group[0] - 1])):
                loads.append((group.pop(0), m.group(1), m.group(2)))
            rest = [lines[g - 1] for g in group]
            assigned = [_ASSIGNED.findall(line) for line in rest]
            names = {v for v, _ in [(v, r) for _, v, r in loads]}
            registers = {r for _, _, r in loads}
            ok = bool(loads and rest) and all(
                not registers.intersection(a) and not names.intersection(a) for a in assigned[:-1]
            )
            ok = ok and len(assigned[-1]) == 1 and ";" not in rest[-1] and not names.intersection(assigned[-1])
            if ok:
                for g, _, _ in loads:
                    keep[g - 1] = False
                for g in group:
                    line = text[g - 1]
                    for _, var, register in loads:
                        line = re.sub(rf"\b{var}\b", register, line)
                    text[g - 1] = line
        number = end + 1
    out: list[str] = []
    out_owners.clear()
    for k, line in enumerate(text, 1):
        if keep[k - 1]:
            out.append(line)
            if k in owners:
                out_owners[len(out)] = owners[k]
    return out


class FusedCode:
    """One function's blocks and the ``region`` function made of those not excluded (by breakpoints)."""

    def __init__(self, instructions: dict, closures: list, name: str):
        self.name = name
        self.namespace = dict(arith.NAMESPACE)
        self.blocks: dict[int, Block] = {}
        for start in sorted(leaders(instructions)):
            if start < len(closures):
                block = build_block(instructions, closures, start, self.namespace)
                if block is not None:
                    self.blocks[start] = block
        self.excluded: set[int] = set()  # pcs with a breakpoint
        self.starts: list = []  # by pc: True where an enabled block starts (the loop's cheap test)
        self.region = None
        self.size = len(closures)
        self._lines: dict[int, tuple[int, int]] = {}
        self._code = None
        self.source = ""
        self._build()

    def exclude(self, pcs: set[int]) -> None:
        """Leave out every block covering one of ``pcs`` (the breakpoints of the function) and rebuild."""
        if pcs != self.excluded:
            self.excluded = set(pcs)
            self._build()

    def _build(self) -> None:
        enabled = [b for b in self.blocks.values() if not self.excluded.intersection(b.covered)]
        starts: list = [None] * self.size
        for b in enabled:
            starts[b.start] = True
        source = ["def region(i, r, t, pc, budget):", "    n = 0", "    while True:"]
        owners: dict[int, tuple[int, int]] = {}

        def emit_block(b: Block, indent: str) -> None:
            source.append(f"{indent}if n + {b.count} > budget:")
            source.append(f"{indent}    return pc, n")
            for text, k in b.lines:
                source.append(indent + text)
                if k is not None:
                    owners[len(source)] = (b.start, k)

        def tree(blocks: list[Block], indent: str) -> None:
            if len(blocks) <= _CHAIN:
                for j, b in enumerate(blocks):
                    source.append(f"{indent}{'if' if j == 0 else 'elif'} pc == {b.start}:")
                    emit_block(b, indent + "    ")
                source.append(f"{indent}return pc, n")
                return
            mid = len(blocks) // 2
            source.append(f"{indent}if pc < {blocks[mid].start}:")
            tree(blocks[:mid], indent + "    ")
            source.append(f"{indent}else:")
            tree(blocks[mid:], indent + "    ")

        tree(sorted(enabled, key=lambda b: b.start), "        ")
        source = _promote_registers(source, owners)
        self.source = "\n".join(source)  # what a debugger of this module may want to read
        exec(compile(self.source, f"<vm region {self.name}>", "exec"), self.namespace)
        self.region = self.namespace["region"]
        self._code = self.region.__code__
        self._lines = owners
        self.starts[:] = starts  # in place: a running loop holds this list

    def fault(self, tb) -> tuple[int, int] | None:
        """(pc, instructions the region completed before it) of the instruction that raised in ``region``."""
        frame_line = None
        while tb is not None:
            if tb.tb_frame.f_code is self._code:
                frame_line = (tb.tb_frame, tb.tb_lineno)
            tb = tb.tb_next
        if frame_line is None:
            return None
        frame, line = frame_line
        owner = self._lines.get(line)
        if owner is None:
            return None
        start, k = owner
        return self.blocks[start].covered[k], int(frame.f_locals.get("n", 0)) + k
