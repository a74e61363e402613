#!/usr/bin/env bash
# Refresh requirements.lock: every Python package IREE Lens and its tests use, direct and transitive,
# at an exact version with the hashes of its files, for Linux x86_64 (glibc 2.36, Debian 12) and
# CPython 3.11. Resolved by uv (https://docs.astral.sh/uv/) from pyproject.toml's ranges plus the
# build backend (setuptools, which setup.sh uses to install the project itself without build
# isolation). Run it after changing a dependency in pyproject.toml, then run the test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
uv="${UV:-uv}"
if ! command -v "$uv" >/dev/null; then
  echo "lock: uv is not installed; install it with: python3 -m pip install --user uv (or pipx install uv)" >&2
  exit 1
fi
# uv keeps the versions of the existing lock where the ranges allow, so adding a dependency changes only
# what it needs; `scripts/lock.sh --upgrade` resolves everything afresh (newest versions in range).
"$uv" pip compile pyproject.toml scripts/build-requirements.in --extra test --generate-hashes \
  --python-version 3.11 --python-platform x86_64-manylinux_2_36 \
  --custom-compile-command "scripts/lock.sh" -o requirements.lock "$@"
