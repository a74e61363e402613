"""The native loop that runs a batch of prepared CPU dispatches: one ctypes call for the whole batch.

Built once per process at run time with llvmlite (LLVM's JIT, already a dependency): a loop over an array
of dispatch descriptors, each four 64-bit words ``(dispatch function, environment, dispatch state,
workgroup state)`` of IREE's executable library ABI (``cpu_abi``), calling the workgroup loop of
``machine_code.run_workgroups`` for each (z, y, x order, denormals flushed, stop at the first non-zero
return, like local-sync). A ctypes call per dispatch costs about a microsecond of Python; here Python
runs once per batch.

    i64 run_batch(u64* descriptors, i64 count, i32 mxcsr_bits, run_workgroups_fn, i64* progress, i64* times)
      -> -1 when every dispatch returned 0, else (index << 32) | (u32) code of the first that did not

A descriptor whose function word is 0 is a transfer on host memory, run in the same loop so that a command
buffer's fills and copies do not cut it into several native calls: its second word is ``TRANSFER_FILL`` or
``TRANSFER_COPY`` and its third the address of a record of four words ``(target, length, source address or
fill pattern, pattern size 1/2/4)`` (checked by the caller: a copy is a ``memmove``, a fill stores the
pattern ``length / size`` times). Transfers never fail and are not counted: indices are dispatch indices.

``times`` (NULL: none) gets, at the index of each dispatch that returned 0, the CLOCK_MONOTONIC time in
nanoseconds (Python's ``time.perf_counter_ns`` on Linux) just after it: profiles get one zone per dispatch
without running them one at a time.

``*progress`` is the index of the dispatch running (written before each): a session in a child process
keeps it in shared memory, so when a kernel takes the process down its parent can name the dispatch.

A plan's binding pointers change with every binding table; ``relocate`` writes them (a loop of a few
thousand stores takes a few microseconds; numpy's gather and scatter took 20):

    void relocate(i64 count, i64* word_at, i64* source, i64* offset, i64* addresses, i64* words)
      -> words[word_at[i]] = addresses[source[i]] + offset[i] for each i < count
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

from engine.errors import HalError

DESCRIPTOR_WORDS = 4  # (function, environment, dispatch state, workgroup state)
BATCH_OK = -1
TRANSFER_FILL, TRANSFER_COPY = 1, 2  # a transfer descriptor's second word
TRANSFER_WORDS = 4  # (target, length, source or pattern, pattern size)

_IR = r"""
declare void @llvm.memmove.p0i8.p0i8.i64(i8*, i8*, i64, i1)
declare void @llvm.memset.p0i8.i64(i8*, i8, i64, i1)
declare i32 @clock_gettime(i32, { i64, i64 }*)

define i64 @run_batch(i64* %descs, i64 %count, i32 %mxcsr, i64 %run_workgroups, i64* %progress, i64* %times) {
entry:
  %ts = alloca { i64, i64 }
  %timed = icmp ne i64* %times, null
  %rw = inttoptr i64 %run_workgroups to i32 (i64, i64, i64, i64, i32)*
  %iv = alloca i64
  %dv = alloca i64
  store i64 0, i64* %iv
  store i64 0, i64* %dv
  br label %loop
loop:
  %i = load i64, i64* %iv
  %more = icmp slt i64 %i, %count
  br i1 %more, label %body, label %done
body:
  %base = mul i64 %i, 4
  %p0 = getelementptr i64, i64* %descs, i64 %base
  %fn = load i64, i64* %p0
  %b1 = add i64 %base, 1
  %p1 = getelementptr i64, i64* %descs, i64 %b1
  %env = load i64, i64* %p1
  %b2 = add i64 %base, 2
  %p2 = getelementptr i64, i64* %descs, i64 %b2
  %ds = load i64, i64* %p2
  %is_transfer = icmp eq i64 %fn, 0
  br i1 %is_transfer, label %transfer, label %dispatch
dispatch:
  %d = load i64, i64* %dv
  store volatile i64 %d, i64* %progress
  %b3 = add i64 %base, 3
  %p3 = getelementptr i64, i64* %descs, i64 %b3
  %ws = load i64, i64* %p3
  %code = call i32 %rw(i64 %fn, i64 %env, i64 %ds, i64 %ws, i32 %mxcsr)
  %failed = icmp ne i32 %code, 0
  br i1 %failed, label %fail, label %dispatched
dispatched:
  %d1 = add i64 %d, 1
  store i64 %d1, i64* %dv
  br i1 %timed, label %clock, label %next
clock:
  %cg = call i32 @clock_gettime(i32 1, { i64, i64 }* %ts)
  %tsp = getelementptr { i64, i64 }, { i64, i64 }* %ts, i32 0, i32 0
  %sec = load i64, i64* %tsp
  %tnp = getelementptr { i64, i64 }, { i64, i64 }* %ts, i32 0, i32 1
  %nsec = load i64, i64* %tnp
  %secns = mul i64 %sec, 1000000000
  %now = add i64 %secns, %nsec
  %tq = getelementptr i64, i64* %times, i64 %d
  store i64 %now, i64* %tq
  br label %next
transfer:
  %rec = inttoptr i64 %ds to i64*
  %dst_i = load i64, i64* %rec
  %r1 = getelementptr i64, i64* %rec, i64 1
  %len = load i64, i64* %r1
  %r2 = getelementptr i64, i64* %rec, i64 2
  %src_i = load i64, i64* %r2
  %r3 = getelementptr i64, i64* %rec, i64 3
  %size = load i64, i64* %r3
  %dst = inttoptr i64 %dst_i to i8*
  %is_fill = icmp eq i64 %env, 1
  br i1 %is_fill, label %fill, label %copy
copy:
  %src = inttoptr i64 %src_i to i8*
  call void @llvm.memmove.p0i8.p0i8.i64(i8* %dst, i8* %src, i64 %len, i1 false)
  br label %next
fill:
  switch i64 %size, label %fill4 [ i64 1, label %fill1
                                  i64 2, label %fill2 ]
fill1:
  %byte = trunc i64 %src_i to i8
  call void @llvm.memset.p0i8.i64(i8* %dst, i8 %byte, i64 %len, i1 false)
  br label %next
fill2:
  %half = trunc i64 %src_i to i16
  %n2 = lshr i64 %len, 1
  %dst2 = bitcast i8* %dst to i16*
  br label %loop2
loop2:
  %j2 = phi i64 [ 0, %fill2 ], [ %j2n, %body2 ]
  %more2 = icmp ult i64 %j2, %n2
  br i1 %more2, label %body2, label %next
body2:
  %q2 = getelementptr i16, i16* %dst2, i64 %j2
  store i16 %half, i16* %q2, align 1
  %j2n = add i64 %j2, 1
  br label %loop2
fill4:
  %word = trunc i64 %src_i to i32
  %n4 = lshr i64 %len, 2
  %dst4 = bitcast i8* %dst to i32*
  br label %loop4
loop4:
  %j4 = phi i64 [ 0, %fill4 ], [ %j4n, %body4 ]
  %more4 = icmp ult i64 %j4, %n4
  br i1 %more4, label %body4, label %next
body4:
  %q4 = getelementptr i32, i32* %dst4, i64 %j4
  store i32 %word, i32* %q4, align 1
  %j4n = add i64 %j4, 1
  br label %loop4
next:
  %inext = add i64 %i, 1
  store i64 %inext, i64* %iv
  br label %loop
fail:
  %hi = shl i64 %d, 32
  %lo = zext i32 %code to i64
  %packed = or i64 %hi, %lo
  ret i64 %packed
done:
  ret i64 -1
}
"""

_RELOCATE_IR = r"""
define void @relocate(i64 %count, i64* %word_at, i64* %source, i64* %offset, i64* %addresses, i64* %words) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %inext, %body ]
  %more = icmp slt i64 %i, %count
  br i1 %more, label %body, label %done
body:
  %pw = getelementptr i64, i64* %word_at, i64 %i
  %w = load i64, i64* %pw
  %ps = getelementptr i64, i64* %source, i64 %i
  %s = load i64, i64* %ps
  %po = getelementptr i64, i64* %offset, i64 %i
  %o = load i64, i64* %po
  %pa = getelementptr i64, i64* %addresses, i64 %s
  %a = load i64, i64* %pa
  %v = add i64 %a, %o
  %pt = getelementptr i64, i64* %words, i64 %w
  store i64 %v, i64* %pt
  %inext = add i64 %i, 1
  br label %loop
done:
  ret void
}
"""

RELOCATE_FN = ctypes.CFUNCTYPE(
    None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)

BATCH_FN = ctypes.CFUNCTYPE(
    ctypes.c_int64,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_uint32,
    ctypes.c_uint64,
    ctypes.c_void_p,
    ctypes.c_void_p,
)


@dataclass(frozen=True)
class NativeLoop:
    """The JIT-compiled batch loop; ``engine`` keeps its code alive for the life of the process."""

    run_batch: ctypes._CFuncPtr
    address: int
    relocate: ctypes._CFuncPtr
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
        module.link_in(llvm.parse_assembly(_RELOCATE_IR))
        module.verify()
        target = llvm.Target.from_default_triple().create_target_machine(opt=2)
        engine = llvm.create_mcjit_compiler(module, target)
        engine.finalize_object()
        address = engine.get_function_address("run_batch")
        if not address:  # pragma: no cover
            raise HalError("LLVM's JIT did not give the native batch loop an address")
        relocate = engine.get_function_address("relocate")
        if not relocate:  # pragma: no cover
            raise HalError("LLVM's JIT did not give the binding relocation loop an address")
        _loop = NativeLoop(BATCH_FN(address), address, RELOCATE_FN(relocate), (engine, module, target))
        return _loop
