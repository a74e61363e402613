"""Executable substitution: replace one executable (or one export) of a module by an edited one.

``spec`` parses ``NAME=FILE``; ``build`` turns FILE (an MLIR ``hal.executable``, LLVM IR of a CPU
executable, SPIR-V binary or text) into the binary the module's device format needs; ``interface`` checks
that the replacement takes the same bindings and constants; ``vmfb_patch`` writes a module with the new
binary (IREE's runtime); ``live`` swaps executables inside the emulated HAL (the debug engine).
"""
