#!/usr/bin/env bash
# Set up (if needed) and open IREE Lens on a bundled sample (or on the file given as argument).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
if [[ $# -gt 0 ]]; then
  exec .venv/bin/iree-lens "$@"
fi
# The bundled sample: the window compiles it (progress in the status bar) and opens its phases.
exec .venv/bin/iree-lens resources/samples/mlp.mlir
