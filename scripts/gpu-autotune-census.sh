#!/usr/bin/env bash
# Issue #32: why a Docker run benchmarks Triton autotuning configurations that a native run
# finds in the shared compile cache. Primes the cache natively, runs block 1 of
# config/h100-autotune-census.yaml (native, Docker, Docker with the cache at its host path;
# every record's detail.autotune_census lists its kernels' lookups), lists the cache's
# .best_config files before and after, and leaves records, ledger and logs under $OUT as
# three files (census.txt, campaign.log, census.tgz): a device call returns at most 8.
#   cd .dev-census && bash scripts/gpu-autotune-census.sh [BLOCKS]   (default 1-1)
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD cfg=$PWD/config/h100-autotune-census.yaml blocks=${1:-1-1}
export CONTAINERTAX_WORKDIR=/tmp/census
work=/tmp/census root=/tmp/census/results/h100-autotune-census
keep=$work/keep  # everything but the two texts goes into one tarball under $OUT
mkdir -p $work "$OUT" $keep
source scripts/gpu-machine.sh
list() { find $root/compile-cache -name '*.best_config' -printf '%T@ %s %p\n' | sort > "$keep/$1.txt"; wc -l < "$keep/$1.txt"; }
if [ ! -d $root/compile-cache ]; then
  (cd $work && timeout 240 python3 $repo/tools/gpu/prime_compile_cache.py $cfg) > "$keep/prime.log" 2>&1
  echo "prime exit $?"
fi
echo "before: $(list before) .best_config files"
timeout 420 bash scripts/gpu-campaign.sh $cfg "$blocks" > "$OUT/campaign.log" 2>&1
echo "campaign exit $?; after: $(list after) .best_config files"
diff <(awk '{print $3}' "$keep/before.txt") <(awk '{print $3}' "$keep/after.txt") | head -20
python3 tools/gpu/autotune_census.py $root | tee "$OUT/census.txt"
cp $root/ledger.jsonl $root/schedule.csv $root/system.json $root/campaign.pin.json $keep/ 2>/dev/null
tar czf "$OUT/census.tgz" -C $root raw logs -C $keep . 2>/dev/null
ls "$OUT"
