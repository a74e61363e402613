# Put tests/no_qt first on PYTHONPATH to run the engine's tests as if pyqtgraph were not installed: the
# engine must never need it (scripts/test.sh does this; napari runs its model tests without Qt alike).
raise ImportError("pyqtgraph is blocked: the engine must work without Qt")
