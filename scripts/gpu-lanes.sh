#!/usr/bin/env bash
# Two lanes against one on the two-GPU machine (device kind nvidia-h200-x2):
#   scripts/gpu-lanes.sh OUT
# runs config/h200x2-lanes.yaml (GPU 0 and GPU 1 side by side, --cores 2), then
# config/h200x2-onelane.yaml (the same cells on GPU 0 alone), and writes to OUT:
#   <campaign>/raw/...               the raw records (commit under results/<campaign>/raw)
#   <campaign>/raw/visits/<time>/    every lane's ledger, schedule.csv, system.json
#   <campaign>/status.json           containertax status (per lane, wall-time estimates)
#   walltime.json                    each campaign's wall time, measured around snakemake
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mkdir -p "${1:?usage: scripts/gpu-lanes.sh OUT}" && cd "$1" && pwd)
source scripts/gpu-machine.sh
nvidia-smi -L > "$out/gpus.txt" || true
base=$(mktemp -d /tmp/containertax-lanes.XXXXXX)
echo "{" > "$out/walltime.json"
sep=""
status=0
# LANES_SPECS: other CONFIG:CORES pairs (e.g. a CPU rehearsal of this script)
for spec in ${LANES_SPECS:-config/h200x2-lanes.yaml:2 config/h200x2-onelane.yaml:1}; do
  cfg=$(realpath "${spec%%:*}") cores=${spec##*:}
  name=$(python3 -c "import sys; from containertax.campaign import config; print(config.load_file(sys.argv[1]).name)" "$cfg")
  work=$base/$name
  mkdir -p "$work"
  t0=$(date +%s.%N)
  # each campaign at most LANES_TIMEOUT s (default 230), so both fit one 8-minute call
  timeout "${LANES_TIMEOUT:-230}" python3 -m snakemake cells --cores "$cores" \
    --snakefile "$PWD/Snakefile" \
    --directory "$work" --configfile "$cfg" > "$out/$name.snakemake.log" 2>&1 || status=$?
  t1=$(date +%s.%N)
  printf '%s "%s": {"lanes": %s, "wall_s": %s}\n' "$sep" "$name" "$cores" \
    "$(python3 -c "print(round($t1 - $t0, 1))")" >> "$out/walltime.json"
  sep=","
  root=$work/results/$name
  visit="$root/raw/visits/$(date -u +%Y%m%dT%H%M%SZ)"
  mkdir -p "$visit"
  for f in "$root"/ledger*.jsonl "$root"/schedule.csv "$root"/system.json; do
    if [ -f "$f" ]; then cp "$f" "$visit/"; fi
  done
  mkdir -p "$out/$name"
  cp -r "$root/raw" "$out/$name/"
  (cd "$work" && python3 -m containertax status "$cfg" --json --lanes 1 --lanes 2) \
    > "$out/$name/status.json" || true
done
echo "}" >> "$out/walltime.json"
cat "$out/walltime.json"
exit $status
