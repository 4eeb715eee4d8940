"""Wall time of building the status page (publishing/statuspage.py) for a whole campaign: by
default the 900-run plan of config/config.yaml with a raw record, a .cooldown.json and
ledger lines for every cell (synthetic: each a copy of a committed H100 record with its
cell and token throughput changed), one failed cell with its log. Reports, best of each:
the build in a warm process without the page's record cache (the first page of a
campaign, or after the cache was deleted) and with it (every page after a cell), and the
child process the cooldown step starts after every cell (`containertax status --html`,
imports included, cache present).

    PYTHONPATH=src .venv/bin/python benchmarks/status_page.py [config/config.yaml]
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "results/h100-engine-balanced/raw/llama3-8b/docker/rep004"


def plant(config_file: Path, results: Path) -> Path:
    """A copy of the config with results in `results`, every cell done but the last one
    failed; returns the copy's path."""
    from containertax.campaign import config, schedule
    from containertax.core import records

    data = yaml.safe_load(config_file.read_text())
    data.update(results_dir=str(results), results_dir_absolute=True)
    path = results / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    campaign = config.load_file(path)
    record = json.loads(TEMPLATE.with_suffix(".json").read_text())
    cooldown = json.loads(TEMPLATE.with_suffix(".cooldown.json").read_text())
    rng = random.Random(1)
    t = datetime(2026, 12, 1, tzinfo=UTC)
    cells = schedule.plan(campaign)
    ledger = []
    for i, cell in enumerate(cells):
        base = {"step": "gate", "model": cell.model, "environment": cell.environment,
                "repetition": cell.repetition, "block": cell.block, "lane": cell.lane}
        ledger.append({**base, "event": "start", "utc": t.isoformat()})
        if i == len(cells) - 1:  # the last cell failed in its run
            ledger.append({**base, "step": "run", "event": "end", "status": "failed",
                           "utc": (t + timedelta(seconds=60)).isoformat(),
                           "error": "RunFailed: exited with status 1"})
            log = campaign.root / "logs/run" / cell.model / cell.environment / "rep030.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("".join(f"line {k}\n" for k in range(200)))
            break
        rec = copy.deepcopy(record)
        rec["campaign"] = campaign.name
        rec["provenance"]["config_source"] = campaign.source
        rec["cell"] = {**rec["cell"], **vars(cell)}
        rec["gate"]["temperature_c"] = 36.0 + rng.random() * 8
        rec["gate"]["passed_utc"] = rec["started_utc"] = t.isoformat()
        rec["ended_utc"] = (t + timedelta(seconds=60)).isoformat()
        for m in rec["metrics"]:
            if m["name"] == "token_throughput":
                m["value"] = 960.0 * (1 + rng.gauss(0, 0.002))
        paths = campaign.paths.cell(cell.model, cell.environment, cell.repetition)
        records.write_json(paths.raw, rec, overwrite=False)
        records.write_json(paths.cooldown, {**cooldown, "start_c": 42.0 + rng.random() * 3,
                                            "ended_utc": (t + timedelta(seconds=90))
                                            .isoformat()})
        ledger.append({**base, "step": "cooldown", "event": "end", "status": "ok",
                       "utc": (t + timedelta(seconds=90)).isoformat()})
        t += timedelta(seconds=95)
    campaign.paths.ledger.write_text("".join(json.dumps(e) + "\n" for e in ledger))
    return path


def main(config_file: str = "config/config.yaml") -> None:
    from containertax.campaign import config
    from containertax.publishing import statuspage

    with tempfile.TemporaryDirectory() as tmp:
        path = plant(REPO / config_file, Path(tmp))
        campaign = config.load_file(path)
        from containertax.campaign import paths

        page = statuspage.write(campaign)  # imports and the first build
        uncached, warm = [], []
        for _ in range(3):
            paths.status_cache(campaign.root).unlink()
            t0 = time.perf_counter()
            statuspage.write(campaign)
            uncached.append(time.perf_counter() - t0)
        for _ in range(5):
            t0 = time.perf_counter()
            statuspage.write(campaign)
            warm.append(time.perf_counter() - t0)
        cold = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "containertax", "status", str(path),
                            "--html"], check=True, capture_output=True)
            cold.append(time.perf_counter() - t0)
        data = statuspage.collect(campaign)
        s = data["summary"]
        print(f"{config_file}: {s['total']} cells, {len(data['runs'])} records, "
              f"{s['failed']} failed, {len(data['estimates'])} interim estimates; page "
              f"{page.stat().st_size / 1024:.0f} KiB")
        for what, times in (("no record cache", uncached), ("record cache", warm)):
            print(f"build in a warm process, {what}: best {min(times):.3f} s (of "
                  f"{len(times)}: " + ", ".join(f"{w:.3f}" for w in times) + ")")
        print(f"status --html as after each cell (new process, imports included): best "
              f"{min(cold):.2f} s (of {len(cold)}: " + ", ".join(f"{c:.2f}" for c in cold)
              + ")")


if __name__ == "__main__":
    main(*sys.argv[1:])
