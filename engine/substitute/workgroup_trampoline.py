"""An edit that wants another workgroup count than the module's host code dispatches, run by IREE's runtime.

IREE's runtime calls an export once per workgroup of the count the host code computed (the compiled
tiling's). An edit can change the tiling, so its kernel expects another grid. This rewrites the edit's LLVM IR
(IREE's ``*.optimized.ll`` of the edit's library) so that each such export is a trampoline: called for
workgroup ``h`` of the host's grid ``H``, it runs the edit's kernel for the workgroups ``h, h + |H|, h + 2|H|,
...`` of the edit's grid ``N``, with a copy of the dispatch state that says ``N`` and a copy of the workgroup
state that names each one. Workgroups of one dispatch are independent (IREE may run them in any order, in
parallel), so any partition of ``N`` over the host's workgroups computes the same result.
"""

from __future__ import annotations

import re

from engine.runtime.hal.cpu_abi import DispatchStateStruct, WorkgroupStateStruct
from engine.substitute.errors import SubstitutionError

_DS_SIZE = 48
_WS_SIZE = 32


def _quoted(name: str) -> str:
    return name if re.fullmatch(r"[-a-zA-Z$._][-a-zA-Z$._0-9]*", name) and "$" not in name else f'"{name}"'


def _trampoline(name: str, inner: str, host: tuple[int, int, int], edited: tuple[int, int, int]) -> str:
    hx, hy, hz = host
    nx, ny, nz = edited
    ds, ws = DispatchStateStruct, WorkgroupStateStruct
    return f"""
define internal i32 @{name}(ptr %env, ptr %ds, ptr %ws) {{
entry:
  %nds = alloca [{_DS_SIZE} x i8], align 16
  %nws = alloca [{_WS_SIZE} x i8], align 16
  call void @llvm.memcpy.p0.p0.i64(ptr %nds, ptr %ds, i64 {_DS_SIZE}, i1 false)
  call void @llvm.memcpy.p0.p0.i64(ptr %nws, ptr %ws, i64 {_WS_SIZE}, i1 false)
  %cx = getelementptr i8, ptr %nds, i64 {ds.workgroup_count_x.offset}
  store i32 {nx}, ptr %cx, align 4
  %cy = getelementptr i8, ptr %nds, i64 {ds.workgroup_count_y.offset}
  store i32 {ny}, ptr %cy, align 4
  %cz = getelementptr i8, ptr %nds, i64 {ds.workgroup_count_z.offset}
  store i16 {nz}, ptr %cz, align 2
  %px = getelementptr i8, ptr %ws, i64 {ws.workgroup_id_x.offset}
  %ix = load i32, ptr %px, align 4
  %py = getelementptr i8, ptr %ws, i64 {ws.workgroup_id_y.offset}
  %iy = load i32, ptr %py, align 4
  %pz = getelementptr i8, ptr %ws, i64 {ws.workgroup_id_z.offset}
  %iz16 = load i16, ptr %pz, align 2
  %ix64 = zext i32 %ix to i64
  %iy64 = zext i32 %iy to i64
  %iz64 = zext i16 %iz16 to i64
  %t0 = mul i64 %iz64, {hy}
  %t1 = add i64 %t0, %iy64
  %t2 = mul i64 %t1, {hx}
  %first = add i64 %t2, %ix64
  %ox = getelementptr i8, ptr %nws, i64 {ws.workgroup_id_x.offset}
  %oy = getelementptr i8, ptr %nws, i64 {ws.workgroup_id_y.offset}
  %oz = getelementptr i8, ptr %nws, i64 {ws.workgroup_id_z.offset}
  br label %loop
loop:
  %k = phi i64 [ %first, %entry ], [ %next, %cont ]
  %done = icmp uge i64 %k, {nx * ny * nz}
  br i1 %done, label %exit, label %body
body:
  %x = urem i64 %k, {nx}
  %rest = udiv i64 %k, {nx}
  %y = urem i64 %rest, {ny}
  %z = udiv i64 %rest, {ny}
  %x32 = trunc i64 %x to i32
  %y32 = trunc i64 %y to i32
  %z16 = trunc i64 %z to i16
  store i32 %x32, ptr %ox, align 4
  store i32 %y32, ptr %oy, align 4
  store i16 %z16, ptr %oz, align 2
  %r = call i32 @{inner}(ptr %env, ptr %nds, ptr %nws)
  %failed = icmp ne i32 %r, 0
  br i1 %failed, label %fail, label %cont
cont:
  %next = add i64 %k, {hx * hy * hz}
  br label %loop
fail:
  ret i32 %r
exit:
  ret i32 0
}}
"""


def retile_llvm_ir(text: str, changes: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]]) -> str:
    """``text`` with each export of ``changes`` (name -> (host's count, edit's count)) behind a trampoline."""
    added = []
    for name, (host, edited) in changes.items():
        quoted = _quoted(name)
        inner = _quoted(f"{name}.edited")
        pattern = re.compile(r"^(define [^@\n]*)@" + re.escape(quoted) + r"\(", re.M)
        text, n = pattern.subn(lambda m, inner=inner: f"{m.group(1)}@{inner}(", text, count=1)
        if n != 1:
            raise SubstitutionError(f"the edit's LLVM IR has no function {name}")
        added.append(_trampoline(quoted, inner, host, edited))
    if "declare void @llvm.memcpy.p0.p0.i64" not in text:
        added.append("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)\n")
    return text + "\n" + "\n".join(added)


def retiled_library(
    llvm_ir: str, changes: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]], cpu=None
) -> bytes:
    """The edit's library rebuilt from its optimized LLVM IR with the trampolines (``llvm_ir`` route), for the
    ``(cpu, cpu_features)`` the edit was built for (None: the host's)."""
    from engine.substitute.llvm_ir import build_from_llvm_ir

    return build_from_llvm_ir(retile_llvm_ir(llvm_ir, changes), "edit.optimized.ll", optimize=False, cpu=cpu).library
