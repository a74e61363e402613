"""Reading IREE ``.vmfb`` modules: the container, the FlatBuffer, the bytecode and its disassembly."""
