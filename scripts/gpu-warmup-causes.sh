#!/usr/bin/env bash
# Issue #32 on the lent GPU machine, in one call: fill the compile cache with one unmeasured
# native run (tools/gpu/prime_compile_cache.py), run blocks of config/h100-warmup-causes.yaml
# (native, docker, docker-unconfined) until LIMIT_S seconds after this script started, then
# leave under $OUT whatever was measured, even when the time limit cut the campaign:
#   $OUT/campaign.tgz   results/h100-warmup-causes without work/ and compile-cache/
#                       (raw/ records; a cut visit's ledger, schedule and system facts in
#                       raw/visits/<UTC>-cut/)
#   $OUT/breakdown.md   tools/gpu/compile_breakdown.py's table; $OUT/*.log the logs
#   cd .dev-warmup && bash scripts/gpu-warmup-causes.sh [LIMIT_S (default 525)] [BLOCKS (1-3)]
# LIMIT_S must stay below the device call's own limit (packing takes about 5 s after it):
# the run tool's timeout_s 560 with the default. Back here: unpack campaign.tgz's raw/ into
# results/h100-warmup-causes/raw/ and commit it.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
limit=${1:-525} blocks=${2:-1-3}
repo=$PWD
cfg=$repo/config/h100-warmup-causes.yaml
export CONTAINERTAX_WORKDIR=${CONTAINERTAX_WORKDIR:-/tmp/ctw}
work=$CONTAINERTAX_WORKDIR
root=$work/results/h100-warmup-causes
out=${OUT:-$work/out}
mkdir -p "$work" "$out"
packed=
campaign_rc=
pack() {
  [ -n "$packed" ] && return
  packed=1
  if [ -d "$root" ] && [ "$campaign_rc" != 0 ] && [ "$campaign_rc" != 1 ]; then
    # gpu-campaign.sh did not reach its own copy (cut by the time limit, or never ran):
    # this visit's ledger, schedule and system facts, as it would have copied them
    cut="$root/raw/visits/$(date -u +%Y%m%dT%H%M%SZ)-cut"
    mkdir -p "$cut"
    for f in "$root"/ledger*.jsonl "$root"/schedule.csv "$root"/system.json; do
      if [ -f "$f" ]; then cp "$f" "$cut/"; fi
    done
  fi
  python3 "$repo/tools/gpu/compile_breakdown.py" "$root" >"$out/breakdown.md" 2>>"$out/run.log"
  cat "$out/breakdown.md" 2>/dev/null
  if [ -d "$root" ]; then
    tar czf "$out/campaign.tgz" -C "$root" --exclude=./work --exclude=./compile-cache \
      --exclude=ledger.lock . 2>>"$out/run.log"
  fi
  echo "packed in $out after $((SECONDS - start)) s"
}
trap pack EXIT
trap 'exit 143' TERM INT
{
  source scripts/gpu-machine.sh
  echo "set-up done after $((SECONDS - start)) s"
  nvidia-smi --query-gpu=name,driver_version,temperature.gpu --format=csv,noheader
  left=$((limit - (SECONDS - start)))
  prime=$((left > 120 ? left - 60 : 60))  # timeout 0 would mean no limit
  echo "priming the compile cache (at most $prime s)"
  (cd "$work" && timeout "$prime" python3 "$repo/tools/gpu/prime_compile_cache.py" "$cfg")
  echo "prime exit $? after $((SECONDS - start)) s"
  left=$((limit - (SECONDS - start)))
  left=$((left > 1 ? left : 1))
  echo "campaign blocks $blocks for at most $left s"
  timeout "$left" bash scripts/gpu-campaign.sh "$cfg" "$blocks"
  campaign_rc=$?
  echo "campaign exit $campaign_rc after $((SECONDS - start)) s (124: cut by the time limit)"
  # a cut launcher leaves its container; remove this campaign's
  docker ps -aq --filter label=containertax.campaign=h100-warmup-causes | xargs -r docker rm -f
} > >(tee "$out/run.log") 2>&1
