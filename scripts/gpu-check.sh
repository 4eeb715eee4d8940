#!/usr/bin/env bash
# Checks and measurements that need a real NVIDIA GPU; run on the GPU machine
# (`make gpu-check OUT=folder`). Writes JSON into OUT (default gpu-check/):
#   gpu_check.json     NVML identity and sample cost, sampler perturbation (10 Hz on vs off,
#                      one run), cooling after load, the real NVML gate
#   passthrough.json   a CUDA program in chroot and Docker, with and without the driver
#                      passed in (environments gpu / nvidia_devices + nvidia_libraries)
#   workloads.json     every workload of config/h100.yaml once, native and in Docker, and
#                      plain vs static-cache vs compiled decoding of one LLM
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check}
mkdir -p "$out"
source scripts/gpu-machine.sh
export PYTHONUNBUFFERED=1
status=0
if [ -z "${SKIP_SAMPLER_CHECK:-}" ]; then
  python3 tools/gpu/gpu_check.py --out "$out/gpu_check.json" || status=1
fi
python3 tools/gpu/gpu_passthrough.py --out "$out/passthrough.json" || status=1
python3 tools/gpu/gpu_workloads.py config/h100.yaml --out "$out/workloads.json" \
  --decoding-model qwen2-0.5b ${DOCKER_MODELS:+--docker-models $DOCKER_MODELS} || status=1
exit $status
