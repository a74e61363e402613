#!/usr/bin/env bash
# Set up (if needed) and open IREE Lens on a bundled sample (or on the file given as argument).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
if [[ $# -gt 0 ]]; then
  exec .venv/bin/iree-lens "$@"
fi
# The bundled sample is compiled with the real iree-compile on first start.
sample=resources/samples/mlp.mlir
out=build/samples/mlp.llvm-cpu.vmfb
if [[ ! -f $out || $sample -nt $out ]]; then
  mkdir -p build/samples
  .venv/bin/iree-compile "$sample" --iree-hal-target-device=local \
    --iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=host -o "$out"
fi
exec .venv/bin/iree-lens "$out"
