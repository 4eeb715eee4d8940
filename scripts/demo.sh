#!/usr/bin/env bash
# One command from a fresh clone to the demo campaign's results (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/containertax check config/demo.yaml
.venv/bin/snakemake --cores 1 --configfile config/demo.yaml "$@"
.venv/bin/containertax status config/demo.yaml
