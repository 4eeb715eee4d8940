#!/usr/bin/env bash
# The offline bundle for the lent GPU machine (Python 3.12, x86_64, no network, no Docker
# Engine): the wheels of scripts/gpu-machine.requirements that scripts/gpu-machine.have says
# it lacks, and the static Docker Engine kit. scripts/gpu-machine.sh installs it from .bundle/
# (git-ignored); carry .bundle in the device call (at most 64 MiB of ignored paths).
#   scripts/gpu-bundle.sh [DIR]          # default .bundle
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.bundle}
scripts/offline-bundle.sh build "$dir" 3.12 manylinux_2_28_x86_64 --docker static \
  --requirements scripts/gpu-machine.requirements --have scripts/gpu-machine.have \
  --not-needed scripts/gpu-machine.not-needed
size=$(du -sb "$dir" | cut -f1)
echo "gpu-bundle: $dir is $((size / 1024 / 1024)) MiB (a device call carries at most 64 MiB)"
if [ "$size" -gt $((64 * 1024 * 1024)) ]; then
  echo "gpu-bundle: error: $dir exceeds 64 MiB: leave out more (scripts/gpu-machine.have)" >&2
  exit 1
fi
