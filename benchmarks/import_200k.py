"""Wall time of analysing a 200,000-row import (issue #35: `check` took 2 s, then the
statistics stopped after 71 s on an OverflowError in min_mannwhitney_p): a synthetic
tidy table, 2 models x 2 environments x 50,000 repetitions x 1 metric (a 2 % effect
with 5 % noise, seeded), through what the workflow runs for an import: `containertax
check`, the import step, the quality step and the statistics, each timed in one process
(imports of the statistics stack included in the first). Prints one line per step and
the total.

    PYTHONPATH=src .venv/bin/python benchmarks/import_200k.py [ROWS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main(rows: int = 200_000) -> None:
    from containertax import cli
    from containertax.campaign import config
    from containertax.statistics import steps

    reps = rows // 4
    rng = np.random.default_rng(35)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        lines = ["model,environment,repetition,metric,value,unit"]
        for model in ("m1", "m2"):
            for env, scale in (("native", 1.0), ("docker", 1.02)):
                values = scale * (1 + 0.05 * rng.standard_normal(reps))
                lines += [f"{model},{env},{r},time_s,{v:.6f},s"
                          for r, v in zip(range(1, reps + 1), values, strict=True)]
        (tmp_path / "runs.csv").write_text("\n".join(lines) + "\n")
        cfg = tmp_path / "imp.yaml"
        cfg.write_text("campaign: imp\nreference_environment: native\nanalysis:\n"
                       "  import_csv: runs.csv\n  headline_metric: time_s\n")
        times = {}
        t0 = time.perf_counter()
        assert cli.main(["check", str(cfg), "-d", str(tmp_path)]) == 0
        times["check"] = time.perf_counter() - t0
        campaign = config.load_file(cfg, tmp_path)
        t = time.perf_counter()
        frame = steps.read_import(campaign)
        runs = tmp_path / "runs-imported.csv"
        runs.write_text(frame.to_csv(index=False))
        times["import"] = time.perf_counter() - t
        t = time.perf_counter()
        steps.run_quality(campaign, runs, tmp_path / "quality", tmp_path / "order.csv")
        times["quality"] = time.perf_counter() - t
        t = time.perf_counter()
        steps.run_stats(campaign, tmp_path / "quality" / "kept.csv", None,
                         {m: (tmp_path / f"{m}.csv", tmp_path / f"{m}.desc.csv")
                          for m in ("m1", "m2")})
        times["stats"] = time.perf_counter() - t
        total = time.perf_counter() - t0
    for step, s in times.items():
        print(f"{step:8s} {s:7.1f} s")
    print(f"{'total':8s} {total:7.1f} s for {len(lines) - 1} rows")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
