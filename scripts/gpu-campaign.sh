#!/usr/bin/env bash
# One visit of a GPU campaign: whole blocks (repetitions) only, so that no block is split
# between two machines. On the GPU machine:
#   scripts/gpu-campaign.sh config/h100.yaml 1-3     # then 4-6 on the next visit
# Brings the raw records up to date in results/<campaign>/raw (commit them), with this
# visit's ledger, schedule and system facts in raw/visits/<UTC time>/.
# CONTAINERTAX_WORKDIR=/some/dir puts results/ there instead of in this checkout (for a
# machine whose checkout is replaced between calls); copy its raw/ back. CORES=N runs N
# lanes (config `lanes`) at once.
set -euo pipefail
cd "$(dirname "$0")/.."
cfg=$(realpath "$1") reps=$2
workdir=${CONTAINERTAX_WORKDIR:-$PWD}
mkdir -p "$workdir"
source scripts/gpu-machine.sh
(cd "$workdir" && python3 -m containertax check "$cfg")
mapfile -t targets < <(cd "$workdir" && python3 -m containertax targets "$cfg" --reps "$reps")
sm=(python3 -m snakemake --cores "${CORES:-1}" --snakefile "$PWD/Snakefile" --directory "$workdir")
"${sm[@]}" --unlock "${targets[@]}" --configfile "$cfg" >/dev/null 2>&1 || true
status=0
"${sm[@]}" "${targets[@]}" --configfile "$cfg" || status=$?
root=$(cd "$workdir" && python3 -c "import sys; from containertax.campaign import config; print(config.load_file(sys.argv[1]).root.resolve())" "$cfg")
visit="$root/raw/visits/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$visit"
for f in "$root"/ledger*.jsonl "$root"/schedule.csv "$root"/system.json; do
  if [ -f "$f" ]; then cp "$f" "$visit/"; fi
done
exit $status
