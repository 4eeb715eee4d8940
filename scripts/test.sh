#!/usr/bin/env bash
# One command from a fresh clone to a passing test suite (see README); CI runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The cluster test (tests/test_slurm.py) starts a one-node SLURM cluster of Debian's
# packages; only the test command installs them, and the SLURM executor plugin. The status
# page's test (tests/test_status_page.py) opens the page in Debian's headless chromium.
need=()
for pkg in slurmctld slurmd slurm-client munge chromium; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "test: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" \
    >/dev/null
fi
.venv/bin/python -m pip install -q -e '.[dev,slurm]'
export CONTAINERTAX_REQUIRE_SLURM=1 CONTAINERTAX_REQUIRE_CHROMIUM=1 CONTAINERTAX_REQUIRE_RUNTIMES=1
.venv/bin/ruff check src tests benchmarks tools
.venv/bin/snakefmt --check Snakefile workflow
.venv/bin/snakemake --lint --configfile config/demo.yaml
.venv/bin/snakemake --lint                                   # the default study
.venv/bin/snakemake --lint --configfile config/study-h100.yaml
# pytest-xdist workers (CONTAINERTAX_TEST_WORKERS, default 4 on any machine: most tests
# wait on Snakemake, Docker and LaTeX subprocesses, so two cores keep four busy); what
# workers share (a committed campaign's paper built once, the SLURM cluster) is held
# under a lock (tests/conftest.py). The 20 slowest are printed (README, "Tests").
# --dist worksteal: a worker that runs out takes queued tests from the others (with the
# default load scheduling one worker ran the last 70 tests alone for 15 minutes); the long
# tests are dealt across the workers' first chunks (tests/conftest.py `dealt`).
.venv/bin/python -m pytest -q -n "${CONTAINERTAX_TEST_WORKERS:-4}" --dist worksteal \
  --durations=20 "$@"
