"""apptainer: `apptainer exec` of a SIF image built from the Docker Engine's image
(`apptainer build IMAGE.sif docker-daemon://IMAGE`, the provide rule). --containall and
--cleanenv: no host home, /tmp or environment inside, only the binds and variables given;
the image's ENV comes from the SIF (Apptainer keeps a Docker image's ENV). Apptainer is not
packaged by Debian 12 and has not been run by this project: the module and its docs are
ready for a host that has it; tests/test_runtimes.py checks its command line with a test
double of the binary (tests/doubles/apptainer), not a real Apptainer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from containertax.runtimes.base import (
    HOST_CONTEXT,
    CommandLaunch,
    Entry,
    Ran,
    Runtime,
    Spec,
    run_quiet,
    user_mounts,
)
from containertax.runtimes.command import CommandLauncher

# apptainer exec's set-up flags: no host home, /tmp or environment inside
FLAGS = ("--containall", "--cleanenv", "--no-home")


def command(launch: CommandLaunch) -> list[str]:
    argv = ["apptainer", "exec", *FLAGS]
    for b in launch.binds:
        argv += ["--bind", f"{b.host}:{b.inside}:{'ro' if b.read_only else 'rw'}"]
    for k, v in sorted(launch.env.items()):
        argv += ["--env", f"{k}={v}"]
    workdir = launch.labels.get("containertax.workdir") or "/"
    return [*argv, "--pwd", workdir, launch.image, *launch.argv]


def describe(ran: Ran) -> Entry:
    """The SIF image under --containall: the same namespaces and flags in every run."""
    return Entry(software=f"SIF image built from {ran.image}",
                 mounts=user_mounts(ran.resolved.get("binds")), gpu="none",
                 isolation="mount namespace (--containall: also PID and IPC; host network; "
                           "no cgroups)", flags=FLAGS)


def process_env(spec: Spec, env: dict[str, str]) -> dict[str, str]:
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root", "LANG": "C.UTF-8"}


def provide(image: str, spec: Spec, dest: Path) -> dict[str, Any]:
    info = json.loads(run_quiet(["docker", "image", "inspect", image]))[0]
    sif = dest.with_suffix(".sif")
    sif.parent.mkdir(parents=True, exist_ok=True)
    run_quiet(["apptainer", "build", "--force", str(sif), f"docker-daemon://{image}"])
    cfg = info.get("Config") or {}
    return {"name": image, "id": info["Id"], "runtime_ref": str(sif),
            "config": {"env": dict(i.split("=", 1) for i in cfg.get("Env") or [] if "=" in i),
                       "working_dir": cfg.get("WorkingDir") or "/",
                       "entrypoint": list(cfg.get("Entrypoint") or []),
                       "cmd": list(cfg.get("Cmd") or [])}}


def explain(env_id: str, spec: Spec, message: str, source: str) -> str | None:
    said = [line for line in message.splitlines() if line.startswith(("FATAL:", "ERROR"))]
    if not said:
        return None
    return (f"environment {env_id}: Apptainer refused to start: {said[-1]}. Fix: check "
            f"'apptainer exec' on this host (docs/environments.md, Apptainer) or correct "
            f"environments.{env_id} in {source}.")


RUNTIME = Runtime(
    kind="apptainer", launcher="command", launcher_class=CommandLauncher,
    words=lambda spec: "Apptainer",
    runtime="Apptainer", version_argv=("apptainer", "--version"), describe=describe,
    needs_image=True, image_step="provide",
    keys=frozenset({"mounts"}), needs_root=False, binaries=("apptainer",),
    problems=lambda env_id, spec: [], explain=explain,
    cleanup_words="nothing: apptainer exec's process dies with its launcher",
    command=command, process_env=process_env, provide=provide, refusal_codes=(255,),
    image_env=False,
    context={**HOST_CONTEXT, "ipc": "private (--containall)",
             "shm": "private (--containall)"})
