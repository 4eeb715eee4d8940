"""Fill a campaign's compile cache before its first measured run: one unmeasured run of
each model that compiles, natively (the reference environment's launcher), with the cache
bound as a measured run binds it (execution/probing.launch_probe, as execution/cells does).
Without it the campaign's first run compiles (57 s of warm-up instead of 13 in
results/h100-engine-balanced) and its block stands apart from the rest.

    python3 tools/gpu/prime_compile_cache.py config/h100-warmup.yaml   # in the campaign's
                                                                       # working folder
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from containertax import workloads
from containertax.campaign import config
from containertax.execution import probing


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("config")
    args = p.parse_args(argv)
    campaign = config.load_file(args.config)
    cache = campaign.paths.compile_cache.resolve()
    for model in campaign.models:
        kind = campaign.workload_kind(model.id)
        params = campaign.workload_params(model.id)
        if not workloads.uses_compile_cache(kind, params):
            continue
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory() as work:
            run = probing.launch_probe(campaign, campaign.reference, kind, params, Path(work),
                                       label=f"prime/{model.id}", timeout_s=params["timeout_s"],
                                       cache=cache)
        print(f"{model.id}: {'ok' if run.ok else 'FAILED'} in {time.monotonic() - t0:.1f} s "
              f"(cache {cache})", flush=True)
        if not run.ok:
            print(run.outcome.output[-2000:], file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
