"""LLVM IR of a CPU executable -> an embedded-ELF executable library, through llvmlite and IREE's iree-lld.

IREE 3.13 writes LLVM 24 syntax; llvmlite 0.50 parses LLVM 22. ``normalize_llvm24`` rewrites what differs
in IREE's output (the differences listed in docs/iree-3.13-tooling-probe.md), one line at a time so error lines stay put:

* ``f0x`` hexadecimal literals (LLVM 24) -> the legacy ``0x``/``0xH``/``0xR``/``0xK``/``0xL`` forms, with a
  ``float``'s single-precision bits widened exactly to double (how older LLVM spells float constants);
* ``qnan``/``snan``/``inf`` keywords -> their hexadecimal bit patterns;
* decimal ``half``/``bfloat``/``float`` literals that are not exact in the type (LLVM 22 rejects them) ->
  rounded to the type, then exact hex;
* ``target_mem: X`` in ``memory(...)`` attributes -> ``target_mem0: X, target_mem1: X`` (LLVM 24 merged them).

The object is linked with the exact command IREE's llvm-cpu target uses, so the result is what IREE would
have embedded.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.substitute.errors import EditCompileError, SourceDiagnostic, SubstitutionError

_FP_TYPES = ("half", "bfloat", "float", "double", "x86_fp80", "fp128", "ppc_fp128")
_TYPE_WORD = re.compile(r"\b(half|bfloat|float|double|x86_fp80|fp128|ppc_fp128)\b")
_HEX24 = re.compile(r"(?<![\w.])(-?)f0x([0-9A-Fa-f]+)\b")
# LLVM 24 spells special values with a sign (`+inf`, `-qnan`), a NaN with a payload as `+nan(0x1)` (quiet) or
# `-snan(0x2)` (signalling); older IR spells some without the sign.
_SPECIAL = re.compile(r"(?<![\w%@.$\"+-])([+-]?)(qnan|snan|nan|inf)\b(?:\((0x[0-9A-Fa-f]+|\d+)\))?")
# LLVM prints FP decimals as %e (1.500000e+00), with or without their type right before them.
_DECIMAL = re.compile(r"(?<![\w.%@#$\"-])(-?\d+\.\d+[eE][+-]?\d+)(?![\w.])")
_TARGET_MEM = re.compile(r"\btarget_mem:\s*(\w+)")
_STRING = re.compile(r'c?"[^"]*"')


def _double_hex(value: float) -> str:
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


def _convert_hex(bits: str, fp_type: str | None, negate: bool) -> str:
    """An ``f0x`` literal of ``fp_type`` as legacy LLVM text."""
    value = int(bits, 16)
    n = len(bits)
    if fp_type is None:  # guess from the width
        fp_type = {4: "half", 8: "float", 16: "double", 20: "x86_fp80", 32: "fp128"}.get(n, "double")
    if fp_type == "float":
        f = np.frombuffer(struct.pack("<I", value & 0xFFFFFFFF), dtype="<f4")[0]
        if np.isnan(f):  # keep the payload: float NaN bits widened like LLVM does (mantissa shifted)
            sign = (value >> 31) & 1
            mant = value & 0x7FFFFF
            text = "0x%016X" % ((sign << 63) | (0x7FF << 52) | (mant << 29))
        else:
            text = _double_hex(float(f))
    elif fp_type == "double":
        text = "0x%016X" % value
    elif fp_type == "half":
        text = "0xH%04X" % value
    elif fp_type == "bfloat":
        text = "0xR%04X" % value
    elif fp_type == "x86_fp80":
        text = "0xK%020X" % value
    elif fp_type == "fp128":
        text = "0xL%032X" % value
    else:  # ppc_fp128
        text = "0xM%032X" % value
    return _negate(text) if negate else text


def _negate(text: str) -> str:
    # A leading '-' on a hex literal is not valid LLVM: flip the sign bit instead.
    prefix, digits = (text[:3], text[3:]) if text[2] in "HRKLM" else (text[:2], text[2:])
    width = len(digits) * 4
    return prefix + format(int(digits, 16) ^ (1 << (width - 1)), f"0{len(digits)}X")


# IEEE layouts: (exponent bits, stored mantissa bits, hex digits of the whole value). x86_fp80 stores the
# integer bit explicitly (the top mantissa bit, set for infinities and NaNs).
_LAYOUTS = {
    "half": (5, 10, 4),
    "bfloat": (8, 7, 4),
    "float": (8, 23, 8),
    "double": (11, 52, 16),
    "x86_fp80": (15, 64, 20),
    "fp128": (15, 112, 32),
}


def _special_text(fp_type: str, kind: str, negative: bool, payload: int | None) -> str:
    """Legacy hex text of an infinity or NaN of ``fp_type`` (``kind``: inf, qnan, nan, snan)."""
    exp_bits, mant_bits, digits = _LAYOUTS.get(fp_type, _LAYOUTS["double"])
    explicit = fp_type == "x86_fp80"
    fraction_bits = mant_bits - 1 if explicit else mant_bits  # below the explicit integer bit
    quiet_bit = 1 << (fraction_bits - 1)
    if kind == "inf":
        mantissa = 0
    elif kind == "snan":
        mantissa = (payload or 0) & (quiet_bit - 1) or 1  # a signalling NaN needs a payload bit
    else:  # qnan, nan: the quiet bit, and the payload below it
        mantissa = quiet_bit | ((payload or 0) & (quiet_bit - 1))
    if explicit:
        mantissa |= 1 << fraction_bits
    bits = (int(negative) << (exp_bits + mant_bits)) | (((1 << exp_bits) - 1) << mant_bits) | mantissa
    if fp_type == "fp128":  # the legacy 0xL form prints the low 64 bits first
        return "0xL%016X%016X" % (bits & (2**64 - 1), bits >> 64)
    return _convert_hex(format(bits, f"0{digits}X"), fp_type if fp_type in _LAYOUTS else "double", False)


def _round_decimal(fp_type: str, text: str) -> str:
    value = float(text)
    if fp_type == "float":
        return _double_hex(float(np.float32(value)))
    if fp_type == "half":
        return "0xH%04X" % int(np.array(value, dtype=np.float16).view(np.uint16))
    # bfloat: round to nearest even on the top 16 bits of the float.
    bits = int(np.array(value, dtype=np.float32).view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return "0xR%04X" % (bits & 0xFFFF)


def _exact(fp_type: str, text: str) -> bool:
    value = float(text)
    if fp_type == "float":
        try:
            return struct.unpack("<f", struct.pack("<f", value))[0] == value
        except OverflowError:
            return False
    if fp_type == "half":
        return float(np.float16(value)) == value
    return False


def _type_before(line: str, pos: int) -> str | None:
    found = None
    for m in _TYPE_WORD.finditer(line, 0, pos):
        found = m.group(1)
    return found


def normalize_llvm24(text: str) -> str:
    """IREE 3.13's LLVM IR text in the syntax llvmlite's LLVM 22 parses (line count unchanged).

    Works on the whole text (a line-by-line pass costs ~0.5 s on a 120 KiB library); only literals whose
    type is not given by their width (half/bfloat hex, NaN/infinity keywords) look at their line.
    """

    def line_of(pos: int) -> tuple[str, int]:
        start = text.rfind("\n", 0, pos) + 1
        return text[start:pos], pos - start

    def hex_sub(m: re.Match) -> str:
        bits = m.group(2)
        fp_type = None
        if len(bits) in (4, 32):  # half or bfloat; fp128 or ppc_fp128: the nearest type keyword decides
            line, col = line_of(m.start())
            fp_type = _type_before(line, col)
        return _convert_hex(bits, fp_type, bool(m.group(1)))

    def special_sub(m: re.Match) -> str:
        line, col = line_of(m.start())
        if line.lstrip().startswith(";") or line.count('"') % 2:
            return m.group(0)  # in a comment or a string
        payload = int(m.group(3), 0) if m.group(3) else None
        fp_type = _type_before(line, col) or "double"
        return _special_text(fp_type, m.group(2), m.group(1) == "-", payload)

    def decimal_sub(m: re.Match) -> str:
        line, col = line_of(m.start())
        fp_type = _type_before(line, col)
        if fp_type not in ("half", "bfloat", "float") or _exact(fp_type, m.group(1)):
            return m.group(0)
        if line.lstrip().startswith(";") or line.count('"') % 2:
            return m.group(0)
        return _round_decimal(fp_type, m.group(1))

    if "f0x" in text:
        text = _HEX24.sub(hex_sub, text)
    if "nan" in text or "inf" in text:
        text = _SPECIAL.sub(special_sub, text)
    text = _DECIMAL.sub(decimal_sub, text)
    if "target_mem:" in text:
        text = _TARGET_MEM.sub(lambda m: f"target_mem0: {m.group(1)}, target_mem1: {m.group(1)}", text)
    return text


# -- building -------------------------------------------------------------------------------------------

LINK_FLAGS = (
    "-flavor", "gnu", "--build-id=none", "-nostdlib", "-static", "-shared", "--no-undefined",
    "--no-allow-shlib-undefined", "--allow-multiple-definition", "--gc-sections", "-z", "now", "-z", "relro",
    "--discard-all", "--icf=all", "--ignore-data-address-equality", "--ignore-function-address-equality",
    "--hash-style=sysv",
)  # fmt: skip


def iree_lld() -> Path:
    """IREE's bundled linker (``iree/compiler/_mlir_libs/iree-lld``)."""
    try:
        import iree.compiler as ic
    except ImportError as e:
        raise SubstitutionError(f"IREE's compiler package is not installed: {e}") from None
    path = Path(ic.__file__).parent / "_mlir_libs" / "iree-lld"
    if not path.exists():
        raise SubstitutionError(f"iree-lld not found at {path}")
    return path


def link_object(
    obj: bytes, *, extra_flags: tuple[str, ...] = (), objects: Sequence[Path] = (), system: bool = False
) -> bytes:
    """Link one relocatable object into an embedded-ELF executable library (IREE's command line), with the
    ``objects`` the executable's source names (``hal.executable.object``: code IREE did not generate).
    ``system``: a system library's code (IREE's system-ELF and static builds), which may call the C library's
    math functions (``fmaf`` on a CPU without FMA): left to the loader, which finds them in this process."""
    flags = (*LINK_FLAGS[:2], "-shared", "--build-id=none") if system else LINK_FLAGS
    with tempfile.TemporaryDirectory(prefix="iree-lens-lld-") as d:
        o = Path(d) / "executable.o"
        so = Path(d) / "executable.so"
        o.write_bytes(obj)
        proc = subprocess.run(
            [str(iree_lld()), *flags[:2], "-o", str(so), *flags[2:], *extra_flags, str(o),
             *map(str, objects)],  # fmt: skip
            capture_output=True,
            text=True,
            env={**os.environ, "LLD_VERSION": "IREE"},
            timeout=120,
        )
        if proc.returncode != 0:
            raise SubstitutionError(f"iree-lld failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return so.read_bytes()


QUERY_FUNCTION = "iree_hal_executable_library_query"
CpuTarget = tuple[str, str]  # IREE's (cpu, cpu_features) of an llvm-cpu executable target
_SYSTEM_TRIPLE = re.compile(r'^target triple = "[^"]*-linux-[^"]*"', re.M)
_LLVM_DIAG = re.compile(r"^<string>:(\d+):(\d+): (error|warning|note): (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class LlvmBuild:
    """An executable library built from LLVM IR, with the time each step took (seconds)."""

    library: bytes
    parse_s: float
    optimize_s: float
    codegen_s: float
    link_s: float


def initialize_llvm():
    import llvmlite.binding as llvm

    try:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
    except RuntimeError:
        pass  # already initialised
    return llvm


def parse_llvm_ir(text: str, path: str = "<llvm ir>"):
    """An llvmlite module of ``text`` (normalised), or ``EditCompileError`` with the line of the fault."""
    llvm = initialize_llvm()
    try:
        module = llvm.parse_assembly(normalize_llvm24(text))
        module.verify()
    except RuntimeError as e:
        message = str(e)
        diagnostics = [
            SourceDiagnostic(path, int(m.group(1)), int(m.group(2)), m.group(3), m.group(4))
            for m in _LLVM_DIAG.finditer(message)
        ]
        if not diagnostics:
            first = message.strip().splitlines()[0] if message.strip() else "invalid LLVM IR"
            diagnostics = [SourceDiagnostic(path, 0, 0, "error", first)]
        raise EditCompileError(path, diagnostics, message) from None
    return module


def object_from_module(
    module, *, optimize: bool, keep_all: bool = False, cpu: CpuTarget | None = None
) -> tuple[bytes, float, float]:
    """Machine code of an llvmlite module for its own triple, for ``cpu`` (the ``(cpu, cpu_features)`` its
    executable was built for: IREE keeps them in the target machine, not in the IR; ``""`` is IREE's default,
    LLVM's generic CPU) or, not given, this host's CPU (like ``cpu=host``). Another CPU than the build's may
    contract a multiply and an add the build kept apart: other bits."""
    llvm = initialize_llvm()
    triple = module.triple or "x86_64-unknown-unknown-eabi-elf"
    target = llvm.Target.from_triple(triple)
    name, features = (llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()) if cpu is None else cpu
    tm = target.create_target_machine(
        cpu=name or "generic",
        features=features,
        opt=3,
        reloc="pic",
        codemodel="default",
    )
    t0 = time.perf_counter()
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pb = llvm.create_pass_builder(tm, pto)
    if not keep_all:
        # IREE keeps its runtime library (musl, libdevice: ~40 functions, hidden or internal) in the IR whether
        # used or not; internalising all but the exported query function and dropping what nothing uses
        # makes optimisation and code generation 2-5x faster and changes no kept function.
        pm = llvm.create_new_module_pass_manager()
        pm.add_internalize_pass()
        pm.add_global_dead_code_eliminate_pass()
        pm.run(module, pb)
        if not any(f.name == QUERY_FUNCTION for f in module.functions):
            raise SubstitutionError("undefined symbol: the query function did not survive internalisation")
    if optimize:
        pb.getModulePassManager().run(module, pb)
    t1 = time.perf_counter()
    obj = tm.emit_object(module)
    return obj, t1 - t0, time.perf_counter() - t1


def build_from_llvm_ir(
    text: str, path: str = "<llvm ir>", *, optimize: bool | None = None, objects: Sequence[Path] = (),
    cpu: CpuTarget | None = None,
) -> LlvmBuild:
    """An embedded-ELF library from IREE's LLVM IR of one executable (``*.linked.ll``/``*.optimized.ll``),
    linked with the object files its source names (``objects``), for ``cpu`` (``object_from_module``).

    ``optimize`` runs LLVM's O2 pipeline first (default: unless the file is IREE's ``optimized`` stage).
    """
    if optimize is None:
        optimize = ".optimized." not in Path(path).name
    system = bool(_SYSTEM_TRIPLE.search(text[:4096]))  # IREE's system-ELF and static builds: "...-linux-gnu"
    t0 = time.perf_counter()
    module = parse_llvm_ir(text, path)
    parse_s = time.perf_counter() - t0
    if not any(f.name == "iree_hal_executable_library_query" for f in module.functions):
        raise SubstitutionError(
            f"{path}: no iree_hal_executable_library_query function; give IREE's linked or optimized .ll of a "
            "whole executable (the codegen stage is not linked yet)"
        )
    try:
        obj, optimize_s, codegen_s = object_from_module(module, optimize=optimize, cpu=cpu)
        t1 = time.perf_counter()
        library = link_object(obj, objects=objects, system=system)
    except SubstitutionError as e:
        if "undefined symbol" not in str(e):
            raise
        # Code generation called a runtime function (memcpy, a libcall) that dead-code elimination dropped:
        # build again keeping every function, as IREE does.
        module = parse_llvm_ir(text, path)
        obj, optimize_s, codegen_s = object_from_module(module, optimize=optimize, keep_all=True, cpu=cpu)
        t1 = time.perf_counter()
        library = link_object(obj, objects=objects, system=system)
    return LlvmBuild(library, parse_s, optimize_s, codegen_s, time.perf_counter() - t1)
