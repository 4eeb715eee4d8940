"""A factorial campaign's effects from the raw records present now, before its workflow's
analysis (e.g. while its last block still runs): the blocks with every environment, plus
the runs of a partial block (OLS with block effects handles the imbalance; one block alone
is judged by Lenth's pseudo standard error), on one metric, and the options phase 2C would
take from them (campaign/optimisation.factorial_choice). Reads records only; writes nothing.

    .venv/bin/python tools/factorial_interim.py config/demo-factorial.yaml compute_time_s
"""

from __future__ import annotations

import sys

import pandas as pd

from containertax.campaign import optimisation
from containertax.campaign.config import load_file
from containertax.statistics import aggregate
from containertax.statistics.factorial import effects


def main(config: str, metric: str) -> None:
    campaign = load_file(config)
    runs = aggregate.tidy(campaign.root)
    runs = runs[runs["metric"] == metric]
    per_block = runs.groupby("block")["environment"].nunique().to_dict()
    print(f"{campaign.name}: {len(runs)} runs of {metric}; environments per block "
          f"{per_block} (of {len(campaign.environments)})")
    models = {str(m): [metric] for m in runs["model"].unique()}
    frame = effects(campaign, runs, models)
    pd.set_option("display.width", 200)
    cols = ["model", "factors", "aliases", "method", "n_runs", "df", "rel", "rel_low",
            "rel_high", "p_holm", "verdict"]
    print(frame[cols].round(4).to_string(index=False))
    choice = optimisation.factorial_choice(campaign, frame, metric)
    print("\n".join(["", *choice.evidence, f"chosen: {choice.options or 'none (the base)'}"]))


if __name__ == "__main__":
    main(*sys.argv[1:3])
