#!/usr/bin/env bash
# One command from a fresh clone to a passing test suite (see README); CI runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check src tests benchmarks tools
.venv/bin/snakefmt --check Snakefile workflow/rules
.venv/bin/snakemake --lint --configfile config/demo.yaml
.venv/bin/python -m pytest -q "$@"
