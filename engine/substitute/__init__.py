"""Executable substitution: replace one executable (or one export) of a module by an edited one.

``build`` parses ``NAME=FILE`` (``SubstitutionSpec``) and turns FILE (an MLIR ``hal.executable``, LLVM IR
of a CPU executable (``llvm_ir``), SPIR-V binary or text (``spirv``)) into the binary the module's device
format needs; ``interface`` checks that the replacement takes the same bindings and constants;
``elf_merge`` merges one export into a library; ``apply`` builds them all, swaps them into a device or
writes a patched module (``binary_patch``: the rodata and VKE1 rewrites); ``live`` swaps executables
inside the emulated HAL (the debug engine) and reruns a dispatch; ``benchmark`` times a dispatch before and
after; ``session_queries`` answers the session protocol's substitution queries; ``documents`` lists the
editable sources of a compile; ``sources_batch`` rebuilds many edited sources in one compile.
"""
