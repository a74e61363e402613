"""Whether a compiled program needs the ``check`` module (its imports name ``check.*``)."""

from __future__ import annotations

import os

CHECK_MODULE_NAME = "check"


def imports_check_module(module_path: str | os.PathLike) -> bool:
    """True when the ``.vmfb`` imports any ``check.*`` function.

    The check imports are optional: a program run without the module skips its expectations silently, so a
    runner must add the module whenever the program asks for it.
    """
    from engine.runtime.vmfb.module import open_vmfb

    module = open_vmfb(module_path)
    try:
        return any(i.full_name.split(".", 1)[0] == CHECK_MODULE_NAME for i in module.imports)
    finally:
        module.close()
