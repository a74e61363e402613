"""Kernel stepping: one workgroup of one dispatch, statement by statement (issue 31).

A dispatch's workgroup is recorded whole, then walked: VMVX builds are interpreted by our VM with a trace
hook (``vmvx_stepper.py``); llvm-cpu builds are rebuilt from their LLVM IR with every value of interest and
every store appended to a trace buffer, run on the dispatch's real inputs, and the buffer decoded
(``llvm_recorder.py``). Either way the result is a ``KernelTrace`` (``trace.py``): stepping back is free.
"""
