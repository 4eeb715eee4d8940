"""Wall time of planning the 900-run DGX Spark campaign (snakemake -n), best of 3.

    .venv/bin/python benchmarks/dry_run_time.py [config/config.yaml]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    cfg = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "config" / "config.yaml").resolve()
    times = []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(3):
            t0 = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--snakefile",
                 str(REPO / "Snakefile"), "--directory", work, "--configfile", str(cfg)],
                capture_output=True, text=True)
            times.append(time.perf_counter() - t0)
            if out.returncode != 0:
                print(out.stdout[-2000:], out.stderr[-2000:])
                return 1
    jobs = [ln for ln in out.stdout.splitlines()
            if ln.split()[:1] in (["gate"], ["run"], ["cooldown"], ["total"])]
    print(f"{cfg.name}: dry run best {min(times):.2f} s, runs {[round(t, 2) for t in times]}")
    print("\n".join(jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
