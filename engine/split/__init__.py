"""Every dispatch a unit test: ``split`` (splitter.py, extract.py), ``split --check`` (check.py), ``reduce``."""
