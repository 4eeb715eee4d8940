#!/usr/bin/env bash
# Issue #32: which autotuning results (Inductor's *.best_config beside each kernel in the
# compile cache) a native and a Docker run read and write: list them after the priming run
# and after each measured run of one block.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD cfg=$PWD/config/h100-autotune-check.yaml  # the tree of the warmup branch (0355935) ran it
export CONTAINERTAX_WORKDIR=/tmp/ac
work=/tmp/ac root=/tmp/ac/results/h100-autotune-check
mkdir -p $work $OUT
source scripts/gpu-machine.sh
list() { find $root/compile-cache -name '*.best_config' -printf '%T@ %s %p\n' | sort > "$OUT/$1.txt"; wc -l < "$OUT/$1.txt"; }
(cd $work && timeout 200 python3 $repo/tools/gpu/prime_compile_cache.py $cfg) > $OUT/prime.log 2>&1
echo "after prime: $(list after-prime)"
timeout 200 bash scripts/gpu-campaign.sh $cfg 1-1 > $OUT/campaign.log 2>&1
echo "campaign exit $?; after block 1: $(list after-block1)"
grep -h '"run".*"end"\|run.*end' $root/ledger.jsonl | tail -4 > $OUT/ledger-tail.txt
cp $root/ledger.jsonl $OUT/ 2>/dev/null
f=$(tail -1 "$OUT/after-block1.txt" | awk '{print $3}'); [ -n "$f" ] && cp "$f" $OUT/sample.best_config
find $root/compile-cache -maxdepth 3 -type d | head -30 > $OUT/dirs.txt
tar czf $OUT/raw.tgz -C $root raw 2>/dev/null
diff <(awk '{print $3}' $OUT/after-prime.txt) <(awk '{print $3}' $OUT/after-block1.txt) | head -20
