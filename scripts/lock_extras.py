"""Print the distributions installed in this environment that the lock file does not name.

setup.sh removes them, so that the environment is exactly the lock. pip, and the project itself, stay.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

KEEP = {"pip", "iree-lens"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_names(lock_text: str) -> set[str]:
    return {canonical(m.group(1)) for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", lock_text, re.M)}


def main(lock_path: str) -> None:
    with open(lock_path, encoding="utf-8") as f:
        locked = locked_names(f.read())
    installed = {canonical(d.metadata["Name"]) for d in metadata.distributions() if d.metadata["Name"]}
    print(" ".join(sorted(installed - locked - KEEP)))


if __name__ == "__main__":
    main(sys.argv[1])
