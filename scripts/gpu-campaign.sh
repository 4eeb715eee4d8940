#!/usr/bin/env bash
# One visit of a GPU campaign: whole blocks (repetitions) only, so that no block is split
# between two machines. On the GPU machine:
#   scripts/gpu-campaign.sh config/h100.yaml 1-3     # then 4-6 on the next visit
# Brings the raw records up to date in results/<campaign>/raw (commit them), with this
# visit's ledger, schedule and system facts in raw/visits/<UTC time>/.
set -euo pipefail
cd "$(dirname "$0")/.."
cfg=$1 reps=$2
source scripts/gpu-machine.sh
mapfile -t targets < <(python3 -m containertax targets "$cfg" --reps "$reps")
python3 -m snakemake --cores 1 --unlock "${targets[@]}" --configfile "$cfg" >/dev/null 2>&1 || true
status=0
python3 -m snakemake --cores 1 "${targets[@]}" --configfile "$cfg" || status=$?
root=$(python3 -c "import sys; from containertax import config; print(config.load_file(sys.argv[1]).root)" "$cfg")
visit="$root/raw/visits/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$visit"
for f in ledger.jsonl schedule.csv system.json; do
  if [ -f "$root/$f" ]; then cp "$root/$f" "$visit/$f"; fi
done
exit $status
