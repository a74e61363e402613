"""An executable plugin for tests, written in LLVM IR and linked as IREE links a standalone (embedded-ELF)
plugin: IREE's samples/custom_dispatch/cpu/plugin/standalone_plugin.c, without a C compiler.

It provides ``simple_mul_workgroup`` (``binding2[o2 + i] = binding0[o0 + i] * binding1[o1 + i]`` for the
params' ``size`` elements, the sample's params struct) to executables that import it, and counts its calls
in the state its ``load`` hands out (passed back as each call's context).
"""

from __future__ import annotations

from pathlib import Path

SYMBOL = "simple_mul_workgroup"

# binding2[o2 + i] = binding0[o0 + i] * binding1[o1 + i] for i in [begin, end): the sample's work, shared by
# the plugin here and the object file of test_custom_dispatch.
MUL_ELEMENTS_IR = r"""
define internal void @mul_elements(ptr noalias %b0, i64 %o0, ptr noalias %b1, i64 %o1, ptr noalias %b2, i64 %o2,
                                   i64 %begin, i64 %end) {
entry:
  br label %check
check:
  %i = phi i64 [ %begin, %entry ], [ %next, %body ]
  %more = icmp ult i64 %i, %end
  br i1 %more, label %body, label %done
body:
  %i0 = add i64 %o0, %i
  %i1 = add i64 %o1, %i
  %i2 = add i64 %o2, %i
  %p0 = getelementptr float, ptr %b0, i64 %i0
  %p1 = getelementptr float, ptr %b1, i64 %i1
  %p2 = getelementptr float, ptr %b2, i64 %i2
  %v0 = load float, ptr %p0
  %v1 = load float, ptr %p1
  %product = fmul float %v0, %v1
  store float %product, ptr %p2
  %next = add i64 %i, 1
  br label %check
done:
  ret void
}
"""

PLUGIN_IR = r"""
%header = type { i32, ptr, ptr, i32, i32, [8 x i64] }
%plugin = type { ptr, ptr, ptr, ptr }
%resolve_params = type { i64, ptr, ptr, ptr }
%params = type { ptr, i64, ptr, i64, ptr, i64, i64, i64, i32, ptr }

@name = private constant [12 x i8] c"lens_sample\00"
@description = private constant [32 x i8] c"IREE Lens test plugin (LLVM IR)\00"
@symbol = private constant [21 x i8] c"simple_mul_workgroup\00"
@header = internal constant %header { i32 1, ptr @name, ptr @description, i32 1, i32 0, [8 x i64] zeroinitializer }
@plugin = internal constant %plugin { ptr @header, ptr @load, ptr @unload, ptr @resolve }
@calls = internal global i64 0

define ptr @iree_hal_executable_plugin_query(i32 %max_version, ptr %reserved) {
  %known = icmp ule i32 %max_version, 1
  %answer = select i1 %known, ptr @plugin, ptr null
  ret ptr %answer
}

define internal ptr @load(ptr %environment, i64 %count, ptr %params, ptr %out_self) {
  store ptr @calls, ptr %out_self
  ret ptr null
}

define internal void @unload(ptr %self) {
  ret void
}

; 1 when the C string at %a (a leading '?', the optional mark, skipped) is "simple_mul_workgroup".
define internal i1 @is_symbol(ptr %given) {
entry:
  %first = load i8, ptr %given
  %optional = icmp eq i8 %first, 63
  %skip = zext i1 %optional to i64
  %a = getelementptr i8, ptr %given, i64 %skip
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %same ]
  %pa = getelementptr i8, ptr %a, i64 %i
  %pb = getelementptr i8, ptr @symbol, i64 %i
  %ca = load i8, ptr %pa
  %cb = load i8, ptr %pb
  %eq = icmp eq i8 %ca, %cb
  br i1 %eq, label %same, label %differ
same:
  %end = icmp eq i8 %ca, 0
  %next = add i64 %i, 1
  br i1 %end, label %match, label %loop
match:
  ret i1 true
differ:
  ret i1 false
}

define internal ptr @resolve(ptr %self, ptr %params, ptr %out_resolution) {
entry:
  store i32 0, ptr %out_resolution
  %count = load i64, ptr %params
  %names_at = getelementptr %resolve_params, ptr %params, i32 0, i32 1
  %names = load ptr, ptr %names_at
  %fns_at = getelementptr %resolve_params, ptr %params, i32 0, i32 2
  %fns = load ptr, ptr %fns_at
  %contexts_at = getelementptr %resolve_params, ptr %params, i32 0, i32 3
  %contexts = load ptr, ptr %contexts_at
  br label %check
check:
  %i = phi i64 [ 0, %entry ], [ %next, %advance ]
  %missing = phi i1 [ false, %entry ], [ %missing_next, %advance ]
  %more = icmp ult i64 %i, %count
  br i1 %more, label %body, label %done
body:
  %fn_slot = getelementptr ptr, ptr %fns, i64 %i
  %fn = load ptr, ptr %fn_slot
  %taken = icmp ne ptr %fn, null
  br i1 %taken, label %keep, label %look
look:
  %name_slot = getelementptr ptr, ptr %names, i64 %i
  %name = load ptr, ptr %name_slot
  %ours = call i1 @is_symbol(ptr %name)
  br i1 %ours, label %provide, label %other
provide:
  store ptr @simple_mul_workgroup, ptr %fn_slot
  %context_slot = getelementptr ptr, ptr %contexts, i64 %i
  store ptr %self, ptr %context_slot
  br label %keep
other:
  %mark = load i8, ptr %name
  %required = icmp ne i8 %mark, 63
  br i1 %required, label %lacking, label %optional
optional:
  store i32 1, ptr %out_resolution
  br label %keep
lacking:
  br label %advance
keep:
  br label %advance
advance:
  %missing_next = phi i1 [ true, %lacking ], [ %missing, %keep ]
  %next = add i64 %i, 1
  br label %check
done:
  %status = select i1 %missing, i64 5, i64 0
  %result = inttoptr i64 %status to ptr
  ret ptr %result
}

define internal i32 @simple_mul_workgroup(ptr %params, ptr %context, ptr %reserved) {
entry:
  %calls = load i64, ptr %context
  %more_calls = add i64 %calls, 1
  store i64 %more_calls, ptr %context
  %b0 = load ptr, ptr %params
  %o0_at = getelementptr %params, ptr %params, i32 0, i32 1
  %o0 = load i64, ptr %o0_at
  %b1_at = getelementptr %params, ptr %params, i32 0, i32 2
  %b1 = load ptr, ptr %b1_at
  %o1_at = getelementptr %params, ptr %params, i32 0, i32 3
  %o1 = load i64, ptr %o1_at
  %b2_at = getelementptr %params, ptr %params, i32 0, i32 4
  %b2 = load ptr, ptr %b2_at
  %o2_at = getelementptr %params, ptr %params, i32 0, i32 5
  %o2 = load i64, ptr %o2_at
  %size_at = getelementptr %params, ptr %params, i32 0, i32 6
  %size = load i64, ptr %size_at
  call void @mul_elements(ptr %b0, i64 %o0, ptr %b1, i64 %o1, ptr %b2, i64 %o2, i64 0, i64 %size)
  ret i32 0
}
""" + MUL_ELEMENTS_IR


def object_file(ir: str) -> bytes:
    """An x86-64 ELF relocatable object of ``ir`` (position independent, as embedded ELF links need)."""
    import llvmlite.binding as llvm

    from engine.substitute.llvm_ir import initialize_llvm

    initialize_llvm()
    module = llvm.parse_assembly(ir)
    module.triple = "x86_64-unknown-unknown-elf"
    module.verify()
    machine = llvm.Target.from_triple(module.triple).create_target_machine(cpu="x86-64", reloc="pic")
    return machine.emit_object(module)


def build_plugin(path: Path) -> Path:
    """Write the plugin to ``path`` (``.sos``: IREE's runtime loads it with its embedded-ELF loader)."""
    from engine.substitute.llvm_ir import link_object

    path.write_bytes(link_object(object_file(PLUGIN_IR)))
    return path
