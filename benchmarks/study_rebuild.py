"""Wall time of rebuilding the H100 study from its committed raw records alone.

The committed campaigns' configs and raw/ folders are copied into a temporary checkout-like
folder (nothing generated comes along), and the study workflow runs there from scratch:
each campaign's own analysis up to its comparisons (nested Snakemake), the study's
combined table and corrections, and its PDF.

    .venv/bin/python benchmarks/study_rebuild.py [config/study-h100.yaml] [--cores 2]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("study", nargs="?", default="config/study-h100.yaml")
    parser.add_argument("--cores", default="2")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    from containertax.publishing import study as ct_study

    study = ct_study.load_file(REPO / args.study, REPO)
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        shutil.copytree(REPO / "config", root / "config")
        for c in study.campaigns:
            raw = c.campaign.root / "raw"
            shutil.copytree(raw, root / raw.relative_to(REPO))
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", args.cores, "--snakefile",
             str(REPO / "workflow" / "study.smk"), "--directory", work, "--configfile",
             str(root / args.study)], capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if out.returncode != 0:
            print(out.stdout[-4000:], out.stderr[-4000:])
            return 1
        pdf = root / "results" / f"study-{study.name}" / "study.pdf"
        print(f"study {study.name}: {len(study.campaigns)} campaigns rebuilt from raw records "
              f"into {pdf.name} ({pdf.stat().st_size} bytes) in {elapsed:.1f} s "
              f"(--cores {args.cores})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
