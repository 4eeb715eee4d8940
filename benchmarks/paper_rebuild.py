"""Wall time of `snakemake paper` over 900 raw records (10 models x 3 environments x 30).

The records are SYNTHETIC, for timing only: copies of one real demo record (its telemetry
and per-request files too) with the cell fields rewritten and the metric values scaled by
random noise. Nothing here is a measurement of containers; it measures the analysis.

    .venv/bin/python benchmarks/paper_rebuild.py [results/demo]
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
ENVS = ["native", "chroot", "docker"]
MODELS = [f"n{64 * (i + 1)}" for i in range(10)]


def synthesize(template: Path, root: Path, config: dict) -> int:
    from containertax.campaign import config as ct_config
    from containertax.campaign import schedule
    from containertax.campaign.paths import CampaignPaths

    campaign = ct_config.load_campaign(config, "synthetic")
    paths = CampaignPaths(root)  # the temporary folder, not the campaign's own results/
    rec0 = json.loads(template.read_text())
    side = {s: template.with_name(f"{template.stem}.{s}")
            for s in ("telemetry.csv", "requests.csv", "log")}
    rng = np.random.default_rng(0)
    n = 0
    for cell in schedule.plan(campaign):
        files = paths.cell(cell.model, cell.environment, cell.repetition)
        files.raw.parent.mkdir(parents=True, exist_ok=True)
        rec = copy.deepcopy(rec0)
        rec["cell"] = {**rec["cell"], "model": cell.model, "environment": cell.environment,
                       "repetition": cell.repetition, "block": cell.block,
                       "position": cell.position, "sequence": cell.sequence}
        scale = int(cell.model[1:]) / 256
        extra = 1.02 if cell.environment == "docker" else 1.0
        for m in rec["metrics"]:
            m["value"] *= scale * extra * float(rng.lognormal(0, 0.03))
        files.raw.write_text(json.dumps(rec))
        for suffix, src in side.items():
            shutil.copyfile(src, files.raw.with_name(f"{files.raw.stem}.{suffix}"))
        files.cooldown.write_text("{}")
        n += 1
    return n


def per_rule(log: str) -> str:
    """Seconds per rule, from Snakemake's own job start and finish lines (whole seconds)."""
    stamp, started, spans = None, {}, []
    for line in log.splitlines():
        m = re.match(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$", line.strip())
        if m:
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        m = re.match(r"^(?:local)?rule (\w+):$", line.strip())
        if m and stamp:
            started[m.group(1)] = stamp
        m = re.search(r"Finished jobid: \d+ \(Rule: (\w+)\)", line)
        if m and stamp and m.group(1) in started:
            spans.append(f"{m.group(1)} {(stamp - started[m.group(1)]).seconds} s")
    return "per rule: " + ", ".join(spans)


def main() -> int:
    demo = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "results" / "demo")
    from containertax.campaign.paths import CampaignPaths

    found = [p for p in CampaignPaths(demo).raw_records() if p.parent.name == "native"]
    if not found:
        print(f"needs a finished demo campaign (a native record under {demo}/raw): run "
              "scripts/demo.sh")
        return 1
    template = found[0]
    cfg = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    cfg.update(campaign="bench900", repetitions=30,
               models=[{"id": m, "size": int(m[1:])} for m in MODELS])
    with tempfile.TemporaryDirectory() as work:
        work_path = Path(work)
        (work_path / "bench.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        n = synthesize(template, work_path / "results" / "bench900", cfg)
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "snakemake", "paper", "--snakefile", str(REPO / "Snakefile"),
             "--directory", work, "--configfile", str(work_path / "bench.yaml")],
            capture_output=True, text=True)
        elapsed = time.perf_counter() - t0
        if out.returncode != 0:
            print(out.stdout[-4000:], out.stderr[-4000:])
            return 1
        print(per_rule(out.stderr))
        ledger = work_path / "results" / "bench900" / "ledger.jsonl"
        print(f"{n} synthetic raw records: `snakemake paper` took {elapsed:.1f} s; "
              f"benchmark cells run: {0 if not ledger.exists() else 'SOME (bug)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
