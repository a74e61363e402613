"""The native loop that runs a batch of prepared CPU dispatches: one ctypes call for the whole batch.

Built once per process at run time with llvmlite (LLVM's JIT, already a dependency): a loop over an array
of dispatch descriptors, each four 64-bit words ``(dispatch function, environment, dispatch state,
workgroup state)`` of IREE's executable library ABI (``cpu_abi``), calling the workgroup loop of
``machine_code.run_workgroups`` for each (z, y, x order, denormals flushed, stop at the first non-zero
return, like local-sync). A ctypes call per dispatch costs about a microsecond of Python; here Python
runs once per batch.

    i64 run_batch(u64* descriptors, i64 count, i32 mxcsr_bits, run_workgroups_fn, i64* progress)
      -> -1 when every dispatch returned 0, else (index << 32) | (u32) code of the first that did not

``*progress`` is the index of the dispatch running (written before each): a session in a child process
keeps it in shared memory, so when a kernel takes the process down its parent can name the dispatch.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

from engine.errors import HalError

DESCRIPTOR_WORDS = 4  # (function, environment, dispatch state, workgroup state)
BATCH_OK = -1

_IR = r"""
define i64 @run_batch(i64* %descs, i64 %count, i32 %mxcsr, i64 %run_workgroups, i64* %progress) {
entry:
  %rw = inttoptr i64 %run_workgroups to i32 (i64, i64, i64, i64, i32)*
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %ok ]
  %more = icmp slt i64 %i, %count
  br i1 %more, label %body, label %done
body:
  store volatile i64 %i, i64* %progress
  %base = mul i64 %i, 4
  %p0 = getelementptr i64, i64* %descs, i64 %base
  %fn = load i64, i64* %p0
  %b1 = add i64 %base, 1
  %p1 = getelementptr i64, i64* %descs, i64 %b1
  %env = load i64, i64* %p1
  %b2 = add i64 %base, 2
  %p2 = getelementptr i64, i64* %descs, i64 %b2
  %ds = load i64, i64* %p2
  %b3 = add i64 %base, 3
  %p3 = getelementptr i64, i64* %descs, i64 %b3
  %ws = load i64, i64* %p3
  %code = call i32 %rw(i64 %fn, i64 %env, i64 %ds, i64 %ws, i32 %mxcsr)
  %failed = icmp ne i32 %code, 0
  br i1 %failed, label %fail, label %ok
ok:
  %next = add i64 %i, 1
  br label %loop
fail:
  %hi = shl i64 %i, 32
  %lo = zext i32 %code to i64
  %packed = or i64 %hi, %lo
  ret i64 %packed
done:
  ret i64 -1
}
"""

BATCH_FN = ctypes.CFUNCTYPE(
    ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
)


@dataclass(frozen=True)
class NativeLoop:
    """The JIT-compiled batch loop; ``engine`` keeps its code alive for the life of the process."""

    run_batch: ctypes._CFuncPtr
    address: int
    engine: object


_lock = threading.Lock()
_loop: NativeLoop | None = None


def native_loop() -> NativeLoop:
    """The batch loop, compiled on first use (a few milliseconds)."""
    global _loop
    with _lock:
        if _loop is not None:
            return _loop
        try:
            import llvmlite.binding as llvm
        except ImportError as e:  # pragma: no cover - llvmlite is a dependency
            raise HalError(f"the native batch loop needs llvmlite: {e}") from None
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        module = llvm.parse_assembly(_IR)
        module.verify()
        target = llvm.Target.from_default_triple().create_target_machine(opt=2)
        engine = llvm.create_mcjit_compiler(module, target)
        engine.finalize_object()
        address = engine.get_function_address("run_batch")
        if not address:  # pragma: no cover
            raise HalError("LLVM's JIT did not give the native batch loop an address")
        _loop = NativeLoop(BATCH_FN(address), address, (engine, module, target))
        return _loop
