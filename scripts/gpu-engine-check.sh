#!/usr/bin/env bash
# On the GPU machine, under 8 minutes (no run starts that would end after 7.5): the
# engine-grade LLM workload's roofline fraction and run-to-run CV, and fixed vs adaptive
# cooldown on the same runs, for Llama-3-8B from config/h100-engine-gqa.yaml
# (benchmarks/gpu_engine.py says how). Writes OUT/engine.json, OUT/engine.log and
# OUT/compile-cache (the compiled code the runs share).
#   bash scripts/gpu-engine-check.sh "$OUT"
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-engine}
mkdir -p "$out"
# the project importable by the machine's Python (and the carried bundle's wheels); Docker is
# not needed here
CONTAINERTAX_NO_DOCKER=1 source scripts/gpu-machine.sh
export PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
timeout 475 python3 benchmarks/gpu_engine.py config/h100-engine-gqa.yaml --model llama3-8b \
  --out "$out" 2>&1 | tee "$out/engine.log"
