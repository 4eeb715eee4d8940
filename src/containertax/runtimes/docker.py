"""docker: a container of the Docker Engine, started through the Docker SDK
(execution/environments.py DockerLauncher applies `options`, flags by their docker CLI
names, config schema $defs/docker_options). The image is used from the local engine."""

from __future__ import annotations

import re
import resource

from containertax.runtimes.base import Runtime, Spec, rlimit_names


def rlimit_refusal(runtime: str, env_id: str, spec: Spec, message: str, source: str,
                   fix: str) -> str | None:
    """'error setting rlimit type N' (runc) as a sentence naming the ulimits key."""
    m = re.search(r"error setting rlimit type (\d+)", message)
    if not m:
        return None
    rtype = int(m.group(1))
    names = rlimit_names()
    name = names.get(rtype, f"type {rtype}")
    _, hard = resource.getrlimit(rtype) if rtype in names else (None, None)
    shown = "unlimited" if hard == resource.RLIM_INFINITY else f"{hard} bytes/units"
    asked = (spec.get("options") or {}).get("ulimits", {}).get(name, "?")
    return (f"environment {env_id}: this host refuses --ulimit {name}={asked} ({runtime}: "
            f"the container runtime may not raise RLIMIT_{name.upper()} above the hard limit "
            f"of the process that starts it, here {shown}). Fix: {fix} or remove "
            f"environments.{env_id}.options.ulimits.{name} from {source}.")


def host_limit_problems(env_id: str, spec: Spec) -> list[str]:
    """ulimits above the host's hard limits: refused by some hosts even for root."""
    problems = []
    for name, value in (spec.get("options") or {}).get("ulimits", {}).items():
        rtype = getattr(resource, f"RLIMIT_{name.upper()}", None)
        if rtype is None:
            problems.append(f"environments.{env_id}.options.ulimits.{name}: unknown limit name")
            continue
        wanted = value if isinstance(value, int) else int(str(value).split(":")[1])
        wanted = resource.RLIM_INFINITY if wanted == -1 else wanted
        _, hard = resource.getrlimit(rtype)
        if hard != resource.RLIM_INFINITY and (wanted == resource.RLIM_INFINITY or wanted > hard):
            problems.append(
                f"environments.{env_id}.options.ulimits.{name}={value} exceeds this host's hard "
                f"limit ({hard}); the container start may be refused")
    return problems


def shm_with_host_ipc(env_id: str, spec: Spec) -> list[str]:
    """--shm-size does nothing with --ipc host (the container uses the host's /dev/shm):
    a variant that sets both measures the baseline under another name."""
    options = spec.get("options") or {}
    if options.get("shm_size") is not None and options.get("ipc") == "host":
        return [f"environments.{env_id}.options.shm_size ({options['shm_size']}) is ignored by "
                f"Docker because environments.{env_id}.options.ipc is 'host' (the host's "
                "/dev/shm is shared); set ipc: private for a /dev/shm of that size"]
    return []


def explain(env_id: str, spec: Spec, message: str, source: str) -> str | None:
    """Turn the engine's error into a sentence that names the config key and the fix."""
    said = rlimit_refusal("Docker", env_id, spec, message, source,
                          "raise the limit for the Docker daemon (e.g. LimitMEMLOCK=infinity "
                          "in its systemd unit)")
    if said:
        return said
    if "apply caps" in message and (spec.get("options") or {}).get("privileged"):
        return (
            f"environment {env_id}: this host refuses --privileged (runc could not apply "
            f"every capability: the Docker Engine itself runs without them, e.g. inside a "
            f"container or a restricted VM). Fix: run this environment on a host whose engine "
            f"has all capabilities, or remove environments.{env_id}.options.privileged from "
            f"{source}. Engine said: {message}")
    if "No such image" in message or "not found" in message.lower() and "image" in message:
        return (
            f"environment {env_id}: image '{spec.get('image')}' is not in the local Docker "
            "Engine. Fix: build or load it (the demo: envs/demo-image/build.sh, which "
            f"scripts/setup.sh runs), or correct environments.{env_id}.image in {source}.")
    return f"environment {env_id}: Docker refused to run the container: {message}"


def warnings(env_id: str, spec: Spec) -> list[str]:
    return host_limit_problems(env_id, spec) + shm_with_host_ipc(env_id, spec)


RUNTIME = Runtime(
    kind="docker", launcher="docker", words=lambda spec: "Docker", runtime="Docker Engine",
    version_argv=("docker", "version", "--format", "{{.Server.Version}}"),
    isolation="namespaces (mount, PID, IPC, UTS, network) and cgroups",
    software="image {image}", needs_image=True, image_step="engine",
    options_schema="docker_options", keys=frozenset({"options", "mounts"}), needs_root=False,
    binaries=(), problems=lambda env_id, spec: [], explain=explain,
    cleanup_words="a container of a killed launcher is removed before the next run "
                  "(labels name its campaign, checkout, host and launching process)",
    warnings=warnings)
