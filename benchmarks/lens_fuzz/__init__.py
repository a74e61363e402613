"""Fuzzing of IREE Lens's file readers (kept out of the shipped package).

``readers``: every reader as a target and valid seed inputs; ``mutate``: random mutations;
``bounded``: cases run in worker processes under a time and memory limit, failures saved with the
command reproducing them (``reproduce.py``). Imported by ``tests/test_fuzz_*.py`` and ``benchmarks/fuzz_*.py``.
"""
