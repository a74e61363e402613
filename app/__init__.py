"""IREE Lens, the Qt application (the only package that imports Qt)."""
