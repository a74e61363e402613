#!/usr/bin/env bash
# Set up IREE Lens on a fresh Debian/Ubuntu machine: system libraries for Qt and Vulkan (lavapipe),
# the virtual environment .venv in the repository root, and the Python packages.
# Idempotent: a second run only checks what is already there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Qt offscreen/xcb needs these shared libraries; Vulkan on the CPU needs the loader and Mesa's lavapipe;
# spirv-tools gives spirv-dis for the SPIR-V disassembly view.
apt_packages=(
  libglib2.0-0 libegl1 libgl1 libx11-6 libxkbcommon0 libfontconfig1 libfreetype6 libdbus-1-3
  fonts-dejavu-core libx11-xcb1 libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
  libxcb-image0 libxcb-randr0 libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1
  libvulkan1 mesa-vulkan-drivers spirv-tools
)
# `setup.sh --tests` (what test.sh runs): OpenSSH too, for the tests of `--remote='ssh HOST ...'`, which
# start their own sshd on a loopback port (the system's sshd service is not started by the install).
with_tests=0
[[ "${1:-}" == "--tests" ]] && with_tests=1
if ((with_tests)); then
  apt_packages+=(openssh-server openssh-client)
fi
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "setup: installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Packages with services (openssh-server) must not start them: a policy-rc.d that says no, as in
    # containers, unless the machine has its own.
    own_policy=1
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
      own_policy=0
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    ((own_policy)) || rm -f /usr/sbin/policy-rc.d
  else
    echo "setup: these system packages are missing; install them with:" >&2
    echo "  sudo apt-get install ${missing[*]}" >&2
    echo "setup: continuing; Qt or Vulkan features that need them will report what is missing." >&2
  fi
fi

py="${PYTHON:-python3}"
# CI proves the lock alone makes a working environment: a new .venv every run, no pip cache.
if [[ "${CI:-}" == "true" ]]; then
  rm -rf .venv
  export PIP_NO_CACHE_DIR=1
fi
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  "$py" -m venv .venv
fi
# requirements.lock pins every package, direct and transitive, with its hashes (scripts/lock.sh makes
# it from pyproject.toml); --require-hashes makes pip refuse anything the lock does not name.
stamp=.venv/.lens-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp || requirements.lock -nt $stamp ]]; then
  echo "setup: installing the locked Python packages into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check --require-hashes -r requirements.lock
  # The project itself: its dependencies are the lock's, and its build backend too (no isolation).
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
  # The environment is the lock, nothing more: packages installed by hand earlier are removed.
  extra=$(.venv/bin/python scripts/lock_extras.py requirements.lock)
  if [[ -n $extra ]]; then
    echo "setup: removing packages the lock does not name: $extra"
    # shellcheck disable=SC2086
    .venv/bin/python -m pip uninstall -q -y $extra
  fi
  .venv/bin/python -m pip check
  touch "$stamp"
fi
