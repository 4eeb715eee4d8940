"""Wall time of planning a campaign (snakemake -n; default the 900-run DGX Spark study)
against a bare workflow with the same number of jobs (a chain of three trivial rules per
cell), both best of 3, in one run:

    flock /tmp/ct-docker.lock .venv/bin/python benchmarks/dry_run_time.py [config/config.yaml]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BARE = """\
CELLS = [f"c{{i:04d}}" for i in range({n})]


rule all:
    input:
        expand("bare/{{cell}}.cooldown", cell=CELLS),


rule gate:
    output:
        "bare/{{cell}}.gate",
    shell:
        "touch {{output}}"


rule run:
    input:
        "bare/{{cell}}.gate",
    output:
        "bare/{{cell}}.run",
    shell:
        "touch {{output}}"


rule cooldown:
    input:
        "bare/{{cell}}.run",
    output:
        "bare/{{cell}}.cooldown",
    shell:
        "touch {{output}}"
"""


def best_of_3(argv: list[str]) -> tuple[float, list[float], str]:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        out = subprocess.run(argv, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return min(times), times, out.stdout


def total_jobs(stdout: str) -> int:
    match = re.search(r"^total\s+(\d+)", stdout, re.M)
    if not match:
        raise SystemExit(f"no job count in the dry run's output:\n{stdout[-2000:]}")
    return int(match.group(1))


def main() -> int:
    cfg = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "config" / "config.yaml").resolve()
    sm = [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules"]
    with tempfile.TemporaryDirectory() as work:
        real, real_times, out = best_of_3(
            [*sm, "--snakefile", str(REPO / "Snakefile"), "--directory", work,
             "--configfile", str(cfg)])
        jobs = total_jobs(out)
        counts = dict(ln.split()[:2] for ln in out.splitlines()
                      if ln.split()[:1] in (["gate"], ["run"], ["cooldown"]))
        cell_jobs = sum(int(n) for n in counts.values())
        bare_dir = Path(work) / "bare"
        bare_dir.mkdir()
        (bare_dir / "Snakefile").write_text(BARE.format(n=(jobs - 1) // 3))
        bare, bare_times, bare_out = best_of_3(
            [*sm, "--snakefile", str(bare_dir / "Snakefile"), "--directory", str(bare_dir)])
    print(f"{cfg.name}: {jobs} jobs ({cell_jobs} of them cell steps); dry run best "
          f"{real:.2f} s {[round(t, 2) for t in real_times]}")
    print(f"bare workflow, {total_jobs(bare_out)} jobs: best {bare:.2f} s "
          f"{[round(t, 2) for t in bare_times]}")
    print(f"ratio: {real / bare:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
