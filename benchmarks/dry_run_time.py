"""Wall time of planning a campaign (snakemake -n; default the 900-run DGX Spark study)
against a bare workflow with exactly the same number of jobs (a chain of three trivial
rules per cell, one trivial job for each other job of the campaign, one target), both with
the same flags and the same profile (the workflow's profiles/default, named explicitly so
that the bare one gets it too, whatever the current directory), best of 3, the two
alternating so that a change of the machine's load falls on both:

    flock /tmp/ct-docker.lock .venv/bin/python benchmarks/dry_run_time.py [config/config.yaml]

An environment whose options are `derived_from` another campaign (config.yaml's
docker_optimised, from phase 2B) plans only once that campaign's analysis has derived
them. The dry run's working directory is a temporary copy: the benchmark writes there a
derived-options file of the form `containertax best-options --derive` writes
(campaign/optimisation.py, derived_text), with no options. It is a planning fixture, not a
measurement: the options it names are no result of phase 2B, and the real results/ folder
is never touched. The job count does not depend on the options.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

BARE = """\
CELLS = [f"c{{i:04d}}" for i in range({n})]
OTHERS = [f"o{{i:04d}}" for i in range({others})]


rule all:
    input:
        expand("bare/{{cell}}.cooldown", cell=CELLS),
        expand("bare/{{other}}.other", other=OTHERS),


rule other:
    output:
        "bare/{{other}}.other",
    shell:
        "touch {{output}}"


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


def timed(argv: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return elapsed, out.stdout


def total_jobs(stdout: str) -> int:
    match = re.search(r"^total\s+(\d+)", stdout, re.M)
    if not match:
        raise SystemExit(f"no job count in the dry run's output:\n{stdout[-2000:]}")
    return int(match.group(1))


def plant_derived(cfg: Path, work: Path) -> list[Path]:
    """For every environment of `cfg` with `derived_from`, a derived-options file (the
    deriving campaign's, under `work`) as a planning fixture; returns the files written."""
    from containertax.campaign import config, paths

    written = []
    envs = (yaml.safe_load(cfg.read_text()) or {}).get("environments") or {}
    for env_id, spec in envs.items():
        if not isinstance(spec, dict) or "derived_from" not in spec:
            continue
        source = cfg.parent / str(spec["derived_from"])
        deriving = config.load_file(source, workdir=work)
        file = paths.derived_options(deriving.root, env_id)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(yaml.safe_dump({
            "campaign": deriving.name, "config": str(source), "metric": "token_throughput",
            "comparisons": "(none: a planning fixture of benchmarks/dry_run_time.py)",
            "comparisons_sha256": None, "qualifying": [],
            "description": "planning fixture of benchmarks/dry_run_time.py (no options; "
                           "not derived from any analysis)",
            "options": {}}, sort_keys=False, default_flow_style=False))
        written.append(file)
    return written


def main() -> int:
    cfg = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "config" / "config.yaml").resolve()
    sm = [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules",
          "--workflow-profile", str(REPO / "profiles" / "default")]
    with tempfile.TemporaryDirectory() as work:
        fixtures = plant_derived(cfg, Path(work))
        real_argv = [*sm, "--snakefile", str(REPO / "Snakefile"), "--directory", work,
                     "--configfile", str(cfg)]
        # a first run of each, not counted: the job counts, and warm file caches
        first, out = timed(real_argv)
        jobs = total_jobs(out)
        counts = dict(ln.split()[:2] for ln in out.splitlines()
                      if ln.split()[:1] in (["gate"], ["run"], ["cooldown"]))
        cell_jobs = sum(int(n) for n in counts.values())
        cells, others = cell_jobs // 3, jobs - 1 - 3 * (cell_jobs // 3)
        bare_dir = Path(work) / "bare"
        bare_dir.mkdir()
        (bare_dir / "Snakefile").write_text(BARE.format(n=cells, others=others))
        bare_argv = [*sm, "--snakefile", str(bare_dir / "Snakefile"), "--directory",
                     str(bare_dir)]
        bare_first, bare_out = timed(bare_argv)
        bare_jobs = total_jobs(bare_out)
        if bare_jobs != jobs:
            raise SystemExit(f"the bare workflow has {bare_jobs} jobs, the campaign {jobs}")
        real_times, bare_times = [], []
        for _ in range(3):
            real_times.append(timed(real_argv)[0])
            bare_times.append(timed(bare_argv)[0])
    real, bare = min(real_times), min(bare_times)
    print(f"{cfg.name}: {jobs} jobs ({cell_jobs} of them cell steps); dry run best "
          f"{real:.2f} s {[round(t, 2) for t in real_times]} (first run, not counted: "
          f"{first:.2f} s)")
    print(f"bare workflow, {bare_jobs} jobs ({cells} chains of 3, {others} others, all): "
          f"best {bare:.2f} s {[round(t, 2) for t in bare_times]} (first run, not counted: "
          f"{bare_first:.2f} s)")
    print(f"ratio: {real / bare:.2f}")
    if fixtures:
        print(f"planned with {len(fixtures)} derived-options planning fixture(s) (no "
              f"options, not a result): {', '.join(f.name for f in fixtures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
