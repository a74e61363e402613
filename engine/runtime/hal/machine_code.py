"""Tiny x86-64 machine-code helpers, called through ctypes: MXCSR, CPUID, an import thunk, a workgroup loop.

Python cannot read or set the SSE control register (MXCSR) nor execute CPUID, and a ctypes call per
workgroup costs about a microsecond. Rather than ship a compiled extension or need a compiler at run
time, the few instructions needed are kept here as bytes, copied into one anonymous page that is then
made read+execute, and called through ctypes ``CFUNCTYPE`` pointers (which release the GIL).

The bytes were assembled from the listing in ``_ASSEMBLY`` (GNU ``as``, Intel syntax) and checked with
``objdump -d``; the listing is the source of truth, the bytes its translation.
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import threading
from dataclasses import dataclass

from engine.errors import HalError

_ASSEMBLY = """
get_mxcsr:      stmxcsr [rsp-4]; mov eax, [rsp-4]; ret                        ; u32 get_mxcsr(void)
set_mxcsr:      mov [rsp-4], edi; ldmxcsr [rsp-4]; ret                        ; void set_mxcsr(u32)
cpuid_count:    push rbx; mov eax, edi; mov ecx, esi; mov r8, rdx; cpuid      ; void cpuid_count(u32 leaf,
                mov [r8], eax; mov [r8+4], ebx; mov [r8+8], ecx                ;   u32 subleaf, u32 out[4])
                mov [r8+12], edx; pop rbx; ret
import_thunk:   mov rax, rdi; mov rdi, rsi; mov rsi, rdx; mov rdx, rcx; jmp rax
                ; int import_thunk(fn, params, context, reserved) { return fn(params, context, reserved); }
run_workgroups: ; int run_workgroups(fn, env, dispatch_state, workgroup_state, u32 mxcsr_or_bits)
                push rbp; push rbx; push r12; push r13; push r14; push r15; sub rsp, 24
                mov r12, rdi; mov r13, rsi; mov r14, rdx; mov r15, rcx
                stmxcsr [rsp]; mov eax, [rsp]; or eax, r8d; mov [rsp+4], eax; ldmxcsr [rsp+4]
                xor eax, eax; mov dword ptr [rsp+8], 0                         ; z = 0
  .Lz:          movzx ecx, word ptr [r14+20]; cmp [rsp+8], ecx; jae .Ldone     ; z < workgroup_count_z
                mov ecx, [rsp+8]; mov [r15+8], cx; xor ebp, ebp                ; ws.id_z = z; y = 0
  .Ly:          cmp ebp, [r14+16]; jae .Lynext; mov [r15+4], ebp; xor ebx, ebx ; ws.id_y = y; x = 0
  .Lx:          cmp ebx, [r14+12]; jae .Lxnext; mov [r15], ebx                 ; ws.id_x = x
                mov rdi, r13; mov rsi, r14; mov rdx, r15; call r12
                test eax, eax; jnz .Ldone; inc ebx; jmp .Lx                    ; stop at the first non-zero
  .Lxnext:      inc ebp; jmp .Ly
  .Lynext:      inc dword ptr [rsp+8]; jmp .Lz
  .Ldone:       ldmxcsr [rsp]; add rsp, 24                                     ; restore the caller's MXCSR
                pop r15; pop r14; pop r13; pop r12; pop rbx; pop rbp; ret
"""

_CODE = bytes.fromhex(
    "0fae5c24fc8b4424fcc3"  # get_mxcsr @0x00
    "897c24fc0fae5424fcc3"  # set_mxcsr @0x0a
    "5389f889f14989d00fa241890041895804418948084189500c5bc3"  # cpuid_count @0x14
    "4889f84889f74889d64889caffe0"  # import_thunk @0x2f
    # run_workgroups @0x3d
    "555341544155415641574883ec184989fc4989f54989d64989cf0fae1c248b04244409c0894424040fae54240431c0"
    "c744240800000000410fb74e14394c2408733e8b4c24086641894f0831ed413b6e10732741896f0431db413b5e0c73"
    "1741891f4c89ef4c89f64c89fa41ffd485c0750effc3ebe3ffc5ebd3ff442408ebb70fae14244883c418415f415e41"
    "5d415c5b5dc3"
)
_OFFSETS = {
    "get_mxcsr": 0x00,
    "set_mxcsr": 0x0A,
    "cpuid_count": 0x14,
    "import_thunk": 0x2F,
    "run_workgroups": 0x3D,
}

# MXCSR bits IREE sets for IREE_FPU_STATE_FLAG_FLUSH_DENORMALS_TO_ZERO: FTZ (bit 15) | DAZ (bit 6).
MXCSR_FLUSH_DENORMALS = 0x8040

DISPATCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


@dataclass(frozen=True)
class MachineCode:
    """The callable helpers; addresses stay valid for the life of the process."""

    get_mxcsr: ctypes._CFuncPtr
    set_mxcsr: ctypes._CFuncPtr
    cpuid_count: ctypes._CFuncPtr
    import_thunk_address: int
    run_workgroups: ctypes._CFuncPtr
    run_workgroups_address: int  # for native callers (the batch loop of ``native_loop``)


_lock = threading.Lock()
_machine_code: MachineCode | None = None
_page: mmap.mmap | None = None  # kept alive forever: the functions live in it


def is_supported_host() -> bool:
    """Whether this host can run the helpers (and IREE's x86-64 CPU executables): x86-64 Linux."""
    return platform.system() == "Linux" and platform.machine().lower() in ("x86_64", "amd64")


def machine_code() -> MachineCode:
    """The helpers, placed in an executable page on first use."""
    global _machine_code, _page
    with _lock:
        if _machine_code is not None:
            return _machine_code
        if not is_supported_host():
            raise HalError(f"CPU executables run only on x86-64 Linux hosts; this is {platform.machine()}")
        page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        page.write(_CODE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(page))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        # Write, then flip to read+execute: never writable and executable at once (W^X policies).
        if libc.mprotect(base, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
            raise HalError(f"cannot make the machine-code page executable (errno {ctypes.get_errno()})")
        _page = page

        def fn(name: str, restype, *argtypes):
            return ctypes.CFUNCTYPE(restype, *argtypes)(base + _OFFSETS[name])

        _machine_code = MachineCode(
            get_mxcsr=fn("get_mxcsr", ctypes.c_uint32),
            set_mxcsr=fn("set_mxcsr", None, ctypes.c_uint32),
            cpuid_count=fn(
                "cpuid_count", None, ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32)
            ),
            import_thunk_address=base + _OFFSETS["import_thunk"],
            run_workgroups=fn(
                "run_workgroups",
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_uint32,
            ),
            run_workgroups_address=base + _OFFSETS["run_workgroups"],
        )
        return _machine_code


def cpuid(leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
    """The CPUID instruction: ``(eax, ebx, ecx, edx)`` for ``leaf``/``subleaf``."""
    out = (ctypes.c_uint32 * 4)()
    machine_code().cpuid_count(leaf, subleaf, out)
    return out[0], out[1], out[2], out[3]


def get_mxcsr() -> int:
    return machine_code().get_mxcsr()


def set_mxcsr(value: int) -> None:
    machine_code().set_mxcsr(value)


class FlushDenormals:
    """Context manager: MXCSR with FTZ|DAZ set inside, the caller's MXCSR restored after.

    The same as IREE's ``iree_fpu_state_push(IREE_FPU_STATE_FLAG_FLUSH_DENORMALS_TO_ZERO)`` around a
    dispatch; the MXCSR is per thread, so this affects only the calling thread.
    """

    def __enter__(self) -> FlushDenormals:
        code = machine_code()
        self._saved = code.get_mxcsr()
        code.set_mxcsr(self._saved | MXCSR_FLUSH_DENORMALS)
        return self

    def __exit__(self, *exc) -> None:
        machine_code().set_mxcsr(self._saved)
