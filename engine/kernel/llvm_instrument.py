"""Instrument one kernel of IREE's LLVM IR: after every value of interest and every store of the export's
function, a call appends ``(probe id, address, value bytes)`` to a trace buffer at a fixed host address.

The buffer (``TraceBuffer``) is host memory of this process; its address is written into the IR as a
constant, so the library's ABI (bindings, constants) is untouched. Inserted calls return nothing, so the IR's
numbered values keep their numbers. Record layout: ``u32 id, u32 payload bytes, u64 address, payload``
(padded to 8 bytes); the header is ``u64 write position, u64 capacity, u64 overflowed``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from engine.kernel.dispatch_run import KernelStepError

HEADER_BYTES = 64
_SCALAR_BYTES = {"float": 4, "double": 8, "half": 2, "bfloat": 2}
_SCALAR_DTYPE = {"float": "<f4", "double": "<f8", "half": "<f2", "bfloat": "bfloat"}
_VECTOR = re.compile(r"^<(\d+) x (\w+)>$")
_INT = re.compile(r"^i(\d+)$")
_DBG = re.compile(r"!dbg !(\d+)")
_RESULT = re.compile(r"^\s+(%[\w.$-]+|%\d+)\s*=")
# Integer work that is address or loop arithmetic, not the kernel's data: left out of the record.
_INDEX_OPS = {"getelementptr", "alloca", "icmp", "ptrtoint", "inttoptr"}
# A product LLVM may contract into a multiply-add with its one user: recording it would give it a second use,
# keep it apart and round it twice, so the recorded kernel would no longer compute what the module's does.
# Its value shows in the add that uses it. A product no add or subtraction uses (bf16 emulation: a bitcast of
# it) cannot be contracted, and is recorded.
_CONTRACTS = re.compile(r"=\s*fmul\s+(?:\w+\s+)*?(?:contract|fast)\b")
_CONTRACTING_USER = re.compile(r"=\s*(?:fadd|fsub|fneg)\b(.*)")
_VALUE_NAME = re.compile(r"%[-\w.$]+")


@dataclass(frozen=True)
class Probe:
    """One recording point: the instruction it follows, what it records and how to read its bytes."""

    id: int
    kind: str  # "value", "store" or "mask" (the lanes of the masked store just before)
    llvm_type: str
    dtype: str  # numpy dtype of one lane ("bfloat": the upper half of a float)
    lanes: int
    dbg: int | None  # the instruction's !dbg metadata number
    text: str  # the instruction's line


def type_layout(llvm_type: str) -> tuple[str, int, int] | None:
    """``(numpy dtype, lanes, bytes)`` of a recordable type (scalars and vectors of floats and integers up to
    64 bits; a vector of i1 is recorded as bytes), or None."""
    m = _VECTOR.match(llvm_type)
    lanes, scalar = (int(m.group(1)), m.group(2)) if m else (1, llvm_type)
    if scalar in _SCALAR_BYTES:
        return _SCALAR_DTYPE[scalar], lanes, lanes * _SCALAR_BYTES[scalar]
    im = _INT.match(scalar)
    if im is None:
        return None
    bits = int(im.group(1))
    if bits > 64 or (m and bits == 1) or (m and bits % 8):
        return None
    size = 1 if bits <= 8 else 2 if bits <= 16 else 4 if bits <= 32 else 8
    return f"<i{size}" if bits > 1 else "|u1", lanes, lanes * size


def split_top(text: str) -> list[str]:
    """Split at commas outside brackets: ``<16 x float> %47, ptr %48, align 64`` -> three parts."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _mangle(llvm_type: str) -> str:
    return re.sub(r"[^\w]", "_", llvm_type)


def _helper(llvm_type: str, size: int, trace_address: int) -> str:
    name = _mangle(llvm_type)
    total = 16 + ((size + 7) & ~7)
    return f"""
define internal void @__lens_rec_{name}(i32 %id, ptr %addr, {llvm_type} %v) {{
entry:
  %tb = inttoptr i64 {trace_address} to ptr
  %pos = load i64, ptr %tb, align 8
  %capp = getelementptr i8, ptr %tb, i64 8
  %cap = load i64, ptr %capp, align 8
  %end = add i64 %pos, {total}
  %ok = icmp ule i64 %end, %cap
  br i1 %ok, label %write, label %full
write:
  %p = getelementptr i8, ptr %tb, i64 %pos
  store i32 %id, ptr %p, align 4
  %p4 = getelementptr i8, ptr %p, i64 4
  store i32 {size}, ptr %p4, align 4
  %p8 = getelementptr i8, ptr %p, i64 8
  store ptr %addr, ptr %p8, align 8
  %p16 = getelementptr i8, ptr %p, i64 16
  store {llvm_type} %v, ptr %p16, align 1
  store i64 %end, ptr %tb, align 8
  ret void
full:
  %ovp = getelementptr i8, ptr %tb, i64 16
  store i64 1, ptr %ovp, align 8
  ret void
}}
"""


def defines_function(line: str, export: str) -> bool:
    """Whether ``line`` is the ``define`` of ``@export`` (LLVM quotes a name with ``$``: ``@"main$async_…"``)."""
    return line.startswith("define") and (f"@{export}(" in line or f'@"{export}"(' in line)


def _function_lines(lines: list[str], export: str) -> tuple[int, int]:
    """First and last line index of ``define ... @export(`` ... ``}``."""
    for i, line in enumerate(lines):
        if defines_function(line, export):
            for j in range(i + 1, len(lines)):
                if lines[j].startswith("}"):
                    return i, j
    raise KernelStepError(f"the LLVM IR defines no function @{export}")


def instrument(text: str, export: str, trace_address: int) -> tuple[str, list[Probe]]:
    """``text`` (normalised IREE LLVM IR) with ``export``'s values and stores recorded; and the probes."""
    from engine.substitute.llvm_ir import parse_llvm_ir

    module = parse_llvm_ir(text)
    try:
        function = module.get_function(export)
    except NameError:
        raise KernelStepError(f"the LLVM IR defines no function @{export}") from None
    instructions = [ins for block in function.blocks for ins in block.instructions]
    lines = text.splitlines()
    first, last = _function_lines(lines, export)
    body = [k for k in range(first + 1, last) if lines[k].startswith("  ") and not lines[k].lstrip().startswith(";")]
    if len(body) != len(instructions):
        raise KernelStepError(
            f"cannot line up @{export}'s {len(instructions)} instructions with its {len(body)} lines of text"
        )
    # Values an add, subtraction or negation uses: a contractible product among them is not recorded.
    summed = {name for k in body if (m := _CONTRACTING_USER.search(lines[k])) for name in _VALUE_NAME.findall(m.group(1))}
    probes: list[Probe] = []
    helpers: dict[str, int] = {}
    inserted: dict[int, list[str]] = {}  # line index -> lines to insert after it
    pending_phis: list[str] = []
    last_phi_line = None

    def probe(kind: str, llvm_type: str, layout, dbg, line_text: str) -> int:
        dtype, lanes, size = layout
        helpers.setdefault(llvm_type, size)
        p = Probe(len(probes), kind, llvm_type, dtype, lanes, dbg, line_text.strip())
        probes.append(p)
        return p.id

    for k, ins in zip(body, instructions):
        line = lines[k]
        opcode = ins.opcode
        dbg_m = _DBG.search(line)
        dbg = int(dbg_m.group(1)) if dbg_m else None
        if pending_phis and opcode != "phi":
            inserted.setdefault(last_phi_line, []).extend(pending_phis)
            pending_phis = []
        if opcode == "store":
            parts = split_top(line.strip()[len("store "):])
            vtype = str(list(ins.operands)[0].type)
            layout = type_layout(vtype)
            if layout is None or len(parts) < 2 or not parts[0].startswith(vtype + " "):
                continue
            value = parts[0][len(vtype) + 1 :]
            addr = re.sub(r"^ptr\s+(?:align\s+\d+\s+)?", "", parts[1])
            pid = probe("store", vtype, layout, dbg, line)
            inserted.setdefault(k, []).append(f"  call void @__lens_rec_{_mangle(vtype)}(i32 {pid}, ptr {addr}, {vtype} {value})")
            continue
        if opcode == "call" and "@llvm.masked.store." in line:
            args = split_top(line[line.index("(", line.index("@llvm.masked.store.")) + 1 : line.rindex(")")])
            # LLVM 24: (value, ptr align N %p, mask); older: (value, ptr %p, i32 N, mask).
            if len(args) not in (3, 4):
                continue
            operands = list(ins.operands)
            vtype = str(operands[0].type)
            layout = type_layout(vtype)
            mask_type = str(operands[len(args) - 1].type)
            m = _VECTOR.match(mask_type)
            if layout is None or m is None:
                continue
            value = args[0][len(vtype) + 1 :]
            addr = re.sub(r"^ptr\s+(?:align\s+\d+\s+)?", "", args[1])
            mask = args[-1][len(mask_type) + 1 :]
            bytes_type = f"<{m.group(1)} x i8>"
            pid = probe("store", vtype, layout, dbg, line)
            mid = probe("mask", bytes_type, type_layout(bytes_type), dbg, line)
            inserted.setdefault(k, []).extend([
                f"  call void @__lens_rec_{_mangle(vtype)}(i32 {pid}, ptr {addr}, {vtype} {value})",
                f"  %__lens_mask{mid} = zext {mask_type} {mask} to {bytes_type}",
                f"  call void @__lens_rec_{_mangle(bytes_type)}(i32 {mid}, ptr null, {bytes_type} %__lens_mask{mid})",
            ])  # fmt: skip
            continue
        result = _RESULT.match(line)
        if result is None or opcode in _INDEX_OPS:
            continue
        if opcode == "fmul" and _CONTRACTS.search(line) and result.group(1) in summed:
            continue
        rtype = str(ins.type)
        layout = type_layout(rtype)
        if layout is None or (opcode not in ("load", "call", "phi") and rtype == "i64"):
            continue
        pid = probe("value", rtype, layout, dbg, line)
        call = f"  call void @__lens_rec_{_mangle(rtype)}(i32 {pid}, ptr null, {rtype} {result.group(1)})"
        if opcode == "phi":
            pending_phis.append(call)
            last_phi_line = k
        else:
            inserted.setdefault(k, []).append(call)
    out = []
    for k, line in enumerate(lines):
        out.append(line)
        out.extend(inserted.get(k, ()))
    out.extend(_helper(t, size, trace_address) for t, size in helpers.items())
    return "\n".join(out) + "\n", probes


class TraceBuffer:
    """Host memory the instrumented kernel appends its records to."""

    def __init__(self, capacity: int):
        self.data = np.zeros(capacity, dtype=np.uint8)
        self.header = self.data[:24].view("<u8")
        self.header[0], self.header[1] = HEADER_BYTES, capacity

    @property
    def address(self) -> int:
        return int(self.data.ctypes.data)

    @property
    def overflowed(self) -> bool:
        return bool(self.header[2])

    def records(self):
        """Each record as ``(probe id, address, payload bytes)``, in the order written."""
        end = int(self.header[0])
        data = self.data
        pos = HEADER_BYTES
        while pos < end:
            pid, size = (int(v) for v in data[pos : pos + 8].view("<u4"))
            address = int(data[pos + 8 : pos + 16].view("<u8")[0])
            yield pid, address, data[pos + 16 : pos + 16 + size]
            pos += 16 + ((size + 7) & ~7)
