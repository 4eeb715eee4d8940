"""charliecloud: `ch-run` of an image directory (Debian's charliecloud): unprivileged user
and mount namespaces, no daemon, no cgroups, the host's network, IPC and PID namespace. The
provide rule converts the Docker Engine's image into a directory with `ch-convert -i docker`
(under the campaign's images/ folder) and adds the folders the probe and work binds need;
the compile cache's folder, bound at its host path, is made by the launcher (ch-run mounts
the image read-only and binds only onto existing folders; its binds are read-write:
Charliecloud 0.31 has no read-only bind). Like the chroot, the process starts
from the image's ENV and the project's variables (ch-run passes its environment through);
the image's WORKDIR is its initial folder."""

from __future__ import annotations

import json
import shutil
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

HARNESS = ("containertax/probe", "containertax/work")  # the cache: at its host path
# ch-run's set-up flags: no /etc/passwd of the host's users inside; USER (which ch-run
# itself requires, process_env) unset inside
FLAGS = ("--no-passwd", "--unset-env=USER")


def command(launch: CommandLaunch) -> list[str]:
    argv = ["ch-run", *FLAGS]
    for b in launch.binds:
        argv.append(f"--bind={b.host}:{b.inside}")
    workdir = launch.labels.get("containertax.workdir") or "/"
    argv += [f"--cd={workdir}", launch.image, "--", *launch.argv]
    return argv


def describe(ran: Ran) -> Entry:
    """ch-run takes no options here: its namespaces and flags are the same in every run."""
    return Entry(software=f"image directory converted from {ran.image}",
                 mounts=user_mounts(ran.resolved.get("binds")), gpu="none",
                 isolation="user and mount namespaces (host network, IPC and PIDs; no "
                           "cgroups)", flags=FLAGS)


def process_env(spec: Spec, env: dict[str, str]) -> dict[str, str]:
    """ch-run passes its own environment into the image: the process's variables, and
    USER, which ch-run requires and --unset-env removes inside."""
    return {**env, "USER": "root"}


def provide(image: str, spec: Spec, dest: Path) -> dict[str, Any]:
    """The image as a directory for ch-run (via a temporary folder and a rename)."""
    info = json.loads(run_quiet(["docker", "image", "inspect", image]))[0]
    tmp = dest.parent / f".{dest.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    run_quiet(["ch-convert", "-i", "docker", "-o", "dir", image, str(tmp)])
    for d in HARNESS:
        (tmp / d).mkdir(parents=True, exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    cfg = info.get("Config") or {}
    env = dict(item.split("=", 1) for item in cfg.get("Env") or [] if "=" in item)
    return {"name": image, "id": info["Id"], "runtime_ref": str(dest),
            "config": {"env": env, "working_dir": cfg.get("WorkingDir") or "/",
                       "entrypoint": list(cfg.get("Entrypoint") or []),
                       "cmd": list(cfg.get("Cmd") or [])}}


def explain(env_id: str, spec: Spec, message: str, source: str) -> str | None:
    said = [line for line in message.splitlines() if line.startswith("ch-run[")]
    if not said:
        return None
    text = said[-1].split("error:", 1)[-1].strip()
    if "can't stat" in text or "can't mkdir" in text:
        fix = ("let the workflow convert the image (its provide rule runs ch-convert): run "
               "snakemake rather than this step alone, or correct "
               f"environments.{env_id}.image in {source}")
    elif "namespace" in text or "unshare" in text or "uid_map" in text:
        fix = ("allow unprivileged user namespaces on this host "
               "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)")
    else:
        fix = f"see ch-run(1); correct environments.{env_id} in {source}"
    return f"environment {env_id}: Charliecloud (ch-run) refused to start: {text}. Fix: {fix}."


RUNTIME = Runtime(
    kind="charliecloud", launcher="command", launcher_class=CommandLauncher,
    words=lambda spec: "Charliecloud",
    runtime="Charliecloud", version_argv=("ch-run", "--version"), describe=describe,
    needs_image=True,
    image_step="provide", keys=frozenset({"mounts"}), needs_root=False,
    binaries=("ch-run", "ch-convert"), problems=lambda env_id, spec: [], explain=explain,
    cleanup_words="nothing: ch-run execs the process, which dies with its launcher",
    command=command, process_env=process_env, provide=provide, refusal_codes=(1,),
    image_env=True, makes_bind_targets=True,
    context={**HOST_CONTEXT, "user": "the launcher's, mapped in a user namespace"})
