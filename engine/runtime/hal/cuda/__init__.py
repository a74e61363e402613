"""The debug engine's CUDA pieces: the driver API through ctypes (``driver``) and IREE's CUDA kernel
argument layout (``abi``). Importing this package never loads ``libcuda``."""
