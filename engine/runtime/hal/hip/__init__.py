"""AMD GPUs through the HIP runtime (``libamdhip64``): the debug engine's HIP device."""
