"""The launcher of every runtime started by its command line (podman.py, charliecloud.py,
apptainer.py): the kind's declaration builds the command (`command`), its process
environment (`process_env`) and its refusals' words (`explain`); this runs it with the
binds, variables and labels every kind gets, and records what ran."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

from containertax.runtimes.base import Bind, CommandLaunch, Runtime
from containertax.runtimes.docker import copy_is_current, docker_client, image_facts
from containertax.runtimes.launch import (
    DOCKER_DEFAULT_ENV,
    PROJECT_ENV,
    EnvironmentFailure,
    Launch,
    Launcher,
    Outcome,
    owner_labels,
    parse_mount,
    run_process,
    telemetry_state,
    visible_gpu_env,
)


class CommandLauncher(Launcher):
    """A runtime started by its command line (Podman, Charliecloud, Apptainer): the kind's
    declaration builds the command from the binds, variables and argv, and turns the
    runtime's refusal into a sentence; the image is the one the provide rule handed over."""

    def marker(self) -> Path:
        return self.campaign.paths.provided(self.env.id).resolve()

    def inside(self, probe_dir: Path, work_dir: Path) -> tuple[Path, Path]:
        if self.runtime.host_paths:
            return probe_dir, work_dir
        return super().inside(probe_dir, work_dir)

    def image(self) -> dict[str, Any]:
        """What the provide rule handed to the runtime: name, id, where, its ENV (a kind
        that takes no image: nothing)."""
        import json

        if self.runtime.image_step != "provide":
            return {"name": self.env.image, "runtime_ref": self.env.image or "", "config": {}}
        marker = self.marker()
        if not marker.exists():
            raise EnvironmentFailure(
                f"environment {self.env.id}: the image was not handed to "
                f"{self.runtime.label(self.env.spec)} ({marker} is missing); the workflow's "
                "provide rule does it (run snakemake, not this step alone).")
        return dict(json.loads(marker.read_text()))

    def preflight(self) -> dict[str, Any]:
        """The image handed over is still the Docker Engine's current one."""
        if self.runtime.image_step != "provide":
            return {}
        image = self.image()
        current = image_facts(docker_client(), self.env, self.campaign.source)["id"]
        copy_is_current(self.env, image["id"], current, f"{self.marker()} names",
                        "that file to hand over the current image")
        return {"provided": image}

    def environment_vars(self, launch: Launch) -> dict[str, str]:
        """Like Docker where the runtime applies the image's ENV (Podman, Apptainer); like
        the chroot where the process starts from it (Charliecloud)."""
        own = {**PROJECT_ENV, **launch.env, **self.env.spec.get("env", {}),
               **visible_gpu_env(launch.gpu)}
        if not self.runtime.image_env:
            return own
        image_env = self.image().get("config", {}).get("env", {})
        return {**DOCKER_DEFAULT_ENV, **image_env, **own}

    def run(self, launch: Launch) -> Outcome:
        image = self.image()
        runtime, spec = self.runtime, self.env.spec
        user = runtime.host_user(spec) if runtime.host_user else None
        if user:  # a rootless runtime writes as that user
            for folder in (launch.work_dir, launch.cache_dir):
                if folder is not None:
                    shutil.chown(folder, user)
        probe_in, work_in = self.inside(launch.probe_dir, launch.work_dir)
        binds = [Bind(launch.probe_dir, probe_in, True),
                 Bind(launch.work_dir, work_in, False)]
        if launch.cache_dir is not None:
            binds.append(Bind(launch.cache_dir, self.cache_inside(launch.cache_dir),
                                       False))
        for mount in spec.get("mounts", []):
            host, target, ro = parse_mount(mount, self.env.id)
            binds.append(Bind(host, target, ro))
        if runtime.makes_bind_targets:  # ch-run binds only onto folders of the image
            make_bind_targets(Path(image["runtime_ref"]), binds)
        env_vars = self.environment_vars(launch)
        name = f"containertax-{os.getpid()}-{time.time_ns()}"
        labels = {**owner_labels(self.campaign.name, self.campaign.root),
                  "containertax.cell": launch.label, "containertax.name": name,
                  "containertax.workdir": image.get("config", {}).get("working_dir", "/")}
        limits = runtime.limits(spec) if runtime.limits else {}
        command = runtime.command(CommandLaunch(  # type: ignore[misc]
            env_id=self.env.id, spec=spec, image=image["runtime_ref"], binds=binds,
            env=env_vars, argv=launch.argv, labels=labels, cpuset=launch.cpuset,
            limits=limits))
        # the runtime's binary as preflight found it, on the launcher's own PATH
        command[0] = shutil.which(command[0]) or command[0]
        process_env = runtime.process_env(spec, env_vars)  # type: ignore[misc]
        # the timeline's launcher marks, as every kind takes them (workloads/timeline.py):
        # launch, started (the runtime's CLI exec'd; its container set-up falls in the
        # interpreter phase, as the chroot's mounts do), exited, output_closed
        marks: dict[str, float] = {}
        try:
            rc, t_in, t_out, wall, out, to = run_process(command, process_env,
                                                          launch.timeout_s, launch.cpuset,
                                                          marks)
        finally:
            if runtime.cleanup is not None:  # a container its client left (a timeout)
                with contextlib.suppress(OSError, ValueError):
                    runtime.cleanup(spec, {**labels, "remove": name})
        if rc in runtime.refusal_codes and not to:
            said = runtime.explain(self.env.id, spec, out, self.campaign.source)  # type: ignore[misc]
            if said:
                raise EnvironmentFailure(said)
        resolved = {"argv": launch.argv, "image": image, "command": command,
                    "env": env_vars, "telemetry": telemetry_state(
                        {**image.get("config", {}).get("env", {}), **env_vars}),
                    "limits": {k: list(v) for k, v in limits.items()},
                    "cpuset_cpus": launch.cpuset,  # the lane's cores, where it has some
                    "runtime": {"name": runtime.runtime, "words": runtime.label(spec),
                                "version": runtime_version(self.env.kind, runtime)},
                    # a wrapper that sees the host's filesystem binds nothing
                    "binds": [] if runtime.host_paths else [
                        f"{b.host}:{b.inside}:{'ro' if b.read_only else 'rw'}" for b in binds]}
        return Outcome(rc, t_in, t_out, wall, out, resolved, to, marks=marks)


def make_bind_targets(image_dir: Path, binds: list[Bind]) -> None:
    """Each bind's target as a folder of the image directory (Charliecloud): the compile
    cache is bound at its host path, which differs by campaign, so the provide rule cannot
    make it ahead."""
    for b in binds:
        (image_dir / b.inside.relative_to("/")).mkdir(parents=True, exist_ok=True)


_VERSIONS: dict[str, str | None] = {}


def runtime_version(kind: str, runtime: Runtime) -> str | None:
    """A kind's runtime version, asked once per process."""
    if kind not in _VERSIONS:
        _VERSIONS[kind] = runtime.version()
    return _VERSIONS[kind]
