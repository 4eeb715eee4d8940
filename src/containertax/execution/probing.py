"""Launch a workload's probe in an environment and read the JSON it writes: the one way a
measured run (cells), a preflight check (preflight) and the GPU checks (tools/gpu) start a
probe, so the command is built and read back the same everywhere."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from containertax import workloads
from containertax.campaign.config import Campaign
from containertax.execution import environments

log = logging.getLogger("containertax")


@dataclass
class ProbeRun:
    """A probe's launch: what ran, where, how it ended, and its JSON (None where the
    process failed or wrote none)."""

    kind: str
    argv: list[str]
    env: dict[str, str]
    launcher: environments.Launcher
    outcome: environments.Outcome
    work: Path
    result: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return self.result is not None


def launch_probe(campaign: Campaign, env_id: str, kind: str, params: dict[str, Any],
                 work: Path, *, label: str, timeout_s: float, check: bool = False,
                 extra_argv: list[str] | None = None,
                 out_name: str = "result.json", gpu: str | None = None,
                 gpu_minor: int | None = None, cpuset: str | None = None,
                 cache: Path | None = None) -> ProbeRun:
    """Run the probe of `kind` with `params` in environment `env_id`, with `work` (a host
    folder, made writable for any user inside) as its work folder. Raises WorkloadError for
    parameters that cannot build a command, EnvironmentFailure for an environment that
    cannot launch; a probe that fails is returned (ok False), not raised. gpu, gpu_minor
    and cpuset restrict the process to a lane's GPU and cores (environments.Launch).
    `cache` (a host folder) is the campaign's compile cache, bound at the same place in
    every environment for workloads that compile."""
    launcher = environments.launcher(campaign, env_id)
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o777)
    probe_in, work_in = launcher.inside(workloads.PROBE_DIR, work)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        cache.chmod(0o777)
    argv, env_vars = workloads.build(kind, params, launcher.env.python, probe_in,
                                     work_in / out_name, check=check,
                                     cache=launcher.cache_inside(cache) if cache else None)
    argv += extra_argv or []
    result_path = work / out_name
    result_path.unlink(missing_ok=True)
    log.info("%s in %s: %s", label, env_id, " ".join(argv))
    outcome = launcher.run(environments.Launch(
        argv=argv, probe_dir=workloads.PROBE_DIR, work_dir=work, env=env_vars,
        timeout_s=timeout_s, label=label, gpu=gpu, gpu_minor=gpu_minor, cpuset=cpuset,
        cache_dir=cache))
    result = None
    if not outcome.timed_out and outcome.returncode == 0 and result_path.exists():
        result = json.loads(result_path.read_text())
    return ProbeRun(kind, argv, env_vars, launcher, outcome, work, result)
