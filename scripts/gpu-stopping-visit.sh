#!/usr/bin/env bash
# One visit of a campaign with a stopping rule on the lent GPU machine: runs the whole
# campaign (snakemake `cells`: every cell the looks so far allow, the interim checkpoints
# deciding the rest) for at most LIMIT seconds, then packs what it has under $OUT. A later
# visit on the same warm machine (CONTAINERTAX_WORKDIR kept), or one whose workdir holds the
# committed raw records, resumes; a killed cell reruns. raw/visits/<UTC>/ keeps its ledger.
#   scripts/gpu-stopping-visit.sh config/h100-stopping.yaml [LIMIT]
set -uo pipefail
cd "$(dirname "$0")/.."
cfg=$(realpath "$1") limit=${2:-520}
workdir=${CONTAINERTAX_WORKDIR:-/tmp/ctw}
mkdir -p "$workdir"
source scripts/gpu-machine.sh
sm=(python3 -m snakemake --cores 1 --snakefile "$PWD/Snakefile" --directory "$workdir")
"${sm[@]}" --unlock cells --configfile "$cfg" >/dev/null 2>&1 || true
timeout "$limit" "${sm[@]}" cells --configfile "$cfg" >"$workdir/visit.log" 2>&1
echo "snakemake exit: $?"
grep -E "Finished job|interim|Error|error" "$workdir/visit.log" | tail -15
name=$(basename "$cfg" .yaml)
root="$workdir/results/$name"
ls "$root" "$root/interim" 2>/dev/null
# this visit's ledger, schedule, pin, system facts and look decisions (their sha256 in
# hashes.jsonl), kept beside the records
visit="$root/raw/visits/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$visit"
for f in "$root"/ledger*.jsonl "$root"/hashes.jsonl "$root"/schedule.csv "$root"/system.json \
  "$root"/campaign.pin.json; do
  if [ -f "$f" ]; then cp "$f" "$visit/"; fi
done
if [ -d "$root/interim" ]; then cp -r "$root/interim" "$visit/"; fi
cp "$workdir/visit.log" "$visit/" 2>/dev/null || true
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/campaign.tgz" -C "$root" --exclude=work --exclude=compile-cache --exclude=compile-cache-arms --exclude=ledger.lock --exclude=hashes.lock . 2>/dev/null
  cp "$workdir/visit.log" "$OUT/" 2>/dev/null
fi
