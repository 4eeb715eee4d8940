#!/usr/bin/env bash
# Issue #40's H100 visit (config/h100-parity.yaml): native, its A/A replica, Docker with the
# compile cache at its host path and Docker with it at /containertax/cache, whole blocks.
# The first visit on a machine primes the compile cache natively (unmeasured); every visit
# lists the cache's .best_config files before and after, tabulates each run's first
# compiled step, whole process and autotuning lookups, and leaves at most 6 files under
# $OUT (a device call returns 8): campaign.log, table.txt, census.txt, raw.tgz (the records
# to commit under results/h100-parity/raw), logs.tgz (logs, ledger, schedule, cache lists).
# Stops the campaign by 560 s of the call (an unfinished block reruns on the next visit).
#   bash scripts/gpu-parity-visit.sh 1-3     (then 4-6; or 1-2, 3-4, 5-6)
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD cfg=$PWD/config/h100-parity.yaml blocks=${1:-1-3}
export CONTAINERTAX_WORKDIR=/tmp/parity
work=/tmp/parity root=/tmp/parity/results/h100-parity keep=/tmp/parity/keep
mkdir -p $work "$OUT" $keep
source scripts/gpu-machine.sh
list() { find $root/compile-cache -name '*.best_config' -printf '%T@ %s %p\n' 2>/dev/null | sort > "$keep/$1.txt"; wc -l < "$keep/$1.txt"; }
if [ ! -d $root/compile-cache ]; then
  (cd $work && timeout 200 python3 $repo/tools/gpu/prime_compile_cache.py $cfg) > "$keep/prime.log" 2>&1
  echo "prime exit $? at ${SECONDS}s"
fi
echo "before blocks $blocks: $(list before-$blocks) .best_config files"
left=$((560 - SECONDS))
timeout $left bash scripts/gpu-campaign.sh $cfg "$blocks" > "$OUT/campaign.log" 2>&1
echo "campaign exit $? at ${SECONDS}s; after: $(list after-$blocks) .best_config files"
python3 tools/gpu/parity_table.py $root | tee "$OUT/table.txt"
python3 tools/gpu/autotune_census.py $root > "$OUT/census.txt" 2>&1
cp $root/ledger*.jsonl $root/schedule.csv $root/system.json $keep/ 2>/dev/null
tar czf "$OUT/raw.tgz" -C $root raw 2>/dev/null
tar czf "$OUT/logs.tgz" -C $root logs -C $keep . 2>/dev/null
ls "$OUT"
