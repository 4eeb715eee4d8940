"""How a process is launched, whatever the kind: the launcher of an environment is its
kind's own (containertax/runtimes/<kind>.py declares it as `launcher_class`: native.py,
chroot.py, docker.py, command.py for the runtimes started by their command line), chosen
here through the registry and never by the kind's name. What every launcher shares (the
Launch, the Outcome with the timeline's marks, the process-group runner, the variables of
every environment) is runtimes/launch.py, below the campaign layer that this one reads.

Each launcher measures the process from launch to exit on the host, maps the probe and a
work folder to the same place inside, and cleans up after itself on any failure.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

from containertax import runtimes
from containertax.campaign.config import Campaign
from containertax.core import records
from containertax.runtimes.launch import EnvironmentFailure, Launch, Launcher, Outcome, owner_labels

__all__ = ["EnvironmentFailure", "Launch", "Launcher", "Outcome", "launcher", "provide_image",
           "stop_orphaned_containers"]


def launcher(campaign: Campaign, env_id: str) -> Launcher:
    """The environment's launcher: its kind's declared class (runtimes/base.py Runtime)."""
    env = campaign.environment(env_id)
    runtime = runtimes.get(env.kind)
    return runtime.launcher_class(campaign, env, runtime)  # type: ignore[misc]


def provide_image(campaign: Campaign, env_id: str, out: Path) -> dict[str, Any]:
    """Hand the environment's image from the local Docker Engine to its runtime (the
    provide rule; the kind's declaration says how) and write what was handed over."""
    import json

    env = campaign.environment(env_id)
    runtime = runtimes.get(env.kind)
    if runtime.provide is None:
        raise EnvironmentFailure(f"environment {env_id}: kind {env.kind} takes no image "
                                 "hand-over (its image_step is not 'provide').")
    dest = campaign.paths.image_dir(env_id).resolve()
    try:
        facts = runtime.provide(str(env.image), env.spec, dest)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentFailure(
            f"environment {env_id}: handing image '{env.image}' to "
            f"{runtime.label(env.spec)} failed: {exc}. Fix: check that the image is in the "
            f"local Docker Engine (docker image ls) and that {runtime.runtime} works here "
            f"(docs/environments.md), or correct environments.{env_id} in "
            f"{campaign.source}.") from None
    facts["provided_unix"] = time.time()
    records.atomic_write_text(out, json.dumps(facts, indent=2) + "\n")
    return facts


def stop_orphaned_containers(campaign: Campaign) -> list[str]:
    """Before any run: no container left by a killed run of this checkout measures beside
    it (native and chroot workloads die with their launcher; a container does not): each
    kind's own clean-up (its declaration's `cleanup`; Docker's through the engine's SDK)."""
    removed: list[str] = []
    labels = owner_labels(campaign.name, campaign.root)
    for env in campaign.environments:
        runtime = runtimes.get(env.kind)
        if runtime.cleanup is not None:
            with contextlib.suppress(OSError, ValueError):
                removed += runtime.cleanup(env.spec, labels)
    return removed
