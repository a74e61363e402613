"""The opcode table and the decoder: counts from the facts note, and an encode/decode round trip of every
opcode with an encoder written here from the encoding rules (not from the decoder)."""

from __future__ import annotations

import random
import struct

import pytest

from engine.errors import VmfbFormatError
from engine.runtime import isa
from engine.runtime.vmfb.decoder import decode, iter_instructions


def test_table_sizes_match_isa_json():
    # 139 core entries (2 prefixes included), 62 ext_f32, 64 ext_f64 (docs/iree-3.13-runtime-facts.md §2).
    assert (len(isa.CORE), len(isa.EXT_F32), len(isa.EXT_F64)) == (139, 62, 64)
    assert len(isa.BY_SYMBOL) == len(isa.ALL_OPCODES)


def test_known_entries():
    assert isa.opcode("AddI32").code == 0x22 and isa.opcode("AddI32").mnemonic == "vm.add.i32"
    assert isa.opcode("CastUI64F32").encoding == b"\xe0\x3d"
    assert isa.opcode("RoundF64Even").encoding == b"\xe1\x3f"
    assert [o.kind for o in isa.opcode("SwitchRef").operands] == [
        isa.REG_I32,
        isa.TYPE,
        isa.REG_REF,
        isa.REG_LIST,
        isa.REG_REF,
    ]
    assert isa.opcode("Block").is_block_marker and isa.opcode("Return").is_terminator


def _encode(op: isa.Opcode, rng: random.Random, base: int) -> tuple[bytes, list]:
    """Encode ``op`` with random operands following the docs/iree-3.13-runtime-facts.md §2.2; returns bytes and the values."""
    out = bytearray(op.encoding)
    values: list = []
    table_size = 0

    def align():
        if (base + len(out)) & 1:  # alignment is relative to the function start
            out.append(0)

    def remap():
        align()
        n = rng.randint(0, 3)
        pairs = tuple((rng.getrandbits(16), rng.getrandbits(16)) for _ in range(n))
        out.extend(struct.pack("<H", n))
        for s, d in pairs:
            out.extend(struct.pack("<HH", s, d))
        return pairs

    for spec in op.operands:
        k = spec.kind
        if k in isa.REGISTER_KINDS:
            v = rng.getrandbits(16)
            out.extend(struct.pack("<H", v))
        elif k == isa.IMM_I32:
            v = rng.randint(-(2**31), 2**31 - 1)
            out.extend(struct.pack("<i", v))
        elif k == isa.IMM_I64:
            v = rng.randint(-(2**63), 2**63 - 1)
            out.extend(struct.pack("<q", v))
        elif k == isa.IMM_F32:
            v = struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]
            out.extend(struct.pack("<f", v))
        elif k == isa.IMM_F64:
            v = rng.uniform(-1e300, 1e300)
            out.extend(struct.pack("<d", v))
        elif k in (isa.GLOBAL, isa.TYPE, isa.RODATA, isa.FUNC, isa.BRANCH):
            v = rng.getrandbits(32)
            out.extend(struct.pack("<I", v))
        elif k == isa.STR16:
            v = "".join(rng.choice("abc xyz") for _ in range(rng.randint(0, 9)))
            out.extend(struct.pack("<H", len(v)) + v.encode())
        elif k in (isa.REG_LIST, isa.SEGMENT_SIZES):
            align()
            n = rng.randint(0, 4)
            v = tuple(rng.getrandbits(16) for _ in range(n))
            out.extend(struct.pack(f"<H{n}H", n, *v))
            if k == isa.SEGMENT_SIZES:
                v = tuple(x - 65536 if x >= 32768 else x for x in v)
        elif k == isa.REMAP:
            v = remap()
        elif k == isa.TABLE_SIZE:
            table_size = v = rng.randint(0, 3)
            out.extend(struct.pack("<H", v))
        elif k == isa.BR_TABLE_CASES:
            cases = []
            for _ in range(table_size):
                t = rng.getrandbits(32)
                out.extend(struct.pack("<I", t))
                cases.append((t, remap()))
            v = tuple(cases)
        else:
            raise AssertionError(k)
        values.append(v)
    return bytes(out), values


@pytest.mark.parametrize("op", [o for o in isa.ALL_OPCODES if not o.is_prefix], ids=lambda o: o.symbol)
def test_round_trip_every_opcode(op):
    rng = random.Random(op.symbol)
    for start in (0, 1):  # odd and even starts exercise the 2-byte list alignment
        for _ in range(5):
            body, values = _encode(op, random.Random(rng.random()), start)
            code = b"\x79" * start + body
            ins = decode(code, start)
            assert ins.opcode is op
            assert list(ins.operands) == values
            assert ins.next_pc == len(code)


def test_truncated_and_unknown_opcodes_raise_format_errors():
    with pytest.raises(VmfbFormatError, match="unknown opcode 0x89"):
        decode(b"\x89", 0)
    with pytest.raises(VmfbFormatError, match="unknown opcode 0xe0 0x3e"):
        decode(b"\xe0\x3e", 0)
    with pytest.raises(VmfbFormatError, match="pc 0x0001"):
        decode(b"\x79\x0d\x01\x00", 1)  # const.i32 cut short
    with pytest.raises(VmfbFormatError):
        list(iter_instructions(b"\x79\x5b\x00\x00\xff\x00ab"))  # fail message longer than the code
