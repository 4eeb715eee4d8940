"""Environments that differ only in the factor under test (issue #40): each environment's
effective run context, computed from its config before a campaign, and its differences from
the reference environment, each either part of the factor or refused.

The context is what steers a run besides the software under test: the paths a run uses
(the compile cache, each bound folder), the config's environment variables, and the
process's limits and isolation (shared memory, IPC, network, seccomp, ulimits, cgroup
limits, CPU set, user). A value comes from one of three places: the kind's own defaults
(runtimes/<kind>.py `context`: Docker's seccomp filter and 64 MB /dev/shm are what Docker
*is*, the factor under test), a config option, or the config's env and mounts. A difference
from the reference that the kind alone makes is part of the factor; one the config makes is
part of it only where the config says so: a variant's own options (`extends`), or
`environments.ID.differences: {KEY: WHY}`. Anything else is refused by `containertax check`,
naming the key, both values and the fix; the paper's environments table prints the declared
differences. Docker's compile cache at /containertax/cache (options.cache_mount: inside, the
path of every campaign before #40) is such a difference: 9 of 11 autotuned kernels missed
there on the H100.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from containertax import runtimes, workloads
from containertax.campaign.config import Campaign, Environment

# context keys an option sets, by the option's name (Docker's and Podman's flag names)
_OPTION_KEYS = {"ipc": "ipc", "shm_size": "shm", "network": "network", "seccomp": "seccomp",
                "privileged": "seccomp", "user": "user", "rootless": "user",
                "memory": "memory_limit", "cgroup_parent": "cgroup", "cpuset_cpus": "cpuset",
                "cpus": "cpu_quota",
                "runtime": "oci_runtime", "init": "init", "cache_mount": "cache_path"}
# what a context key is called in the paper and in check's words
WORDS = {"cache_path": "compile cache path", "ipc": "IPC namespace", "shm": "/dev/shm",
         "network": "network", "seccomp": "seccomp filter", "user": "user",
         "ulimits": "resource limits", "memory_limit": "memory limit", "cgroup": "cgroup",
         "cpuset": "CPU set", "cpu_quota": "CPU quota", "oci_runtime": "OCI runtime",
         "init": "init process"}


@dataclass(frozen=True)
class Value:
    """One context key's value in one environment and where it comes from: 'kind' (the
    kind's defaults), 'options.NAME', 'env' or 'mounts' (the config)."""

    value: str
    origin: str


@dataclass(frozen=True)
class Difference:
    """A context key that differs between an environment and the reference."""

    env: str
    key: str
    value: str
    reference_value: str
    origin: str  # where this environment's value comes from
    reference_origin: str
    declared: str | None  # 'kind', 'variant', the config's words, or None (refused)

    def words(self, reference: str) -> str:
        return (f"{self.key} ({WORDS.get(self.key, self.key)}): {self.value!r} here, "
                f"{self.reference_value!r} in {reference}")


def _cache_path(campaign: Campaign, env: Environment) -> str:
    """Where the compile cache appears, asked of the kind's own launcher (one home)."""
    runtime = runtimes.get(env.kind)
    launcher = runtime.launcher_class(campaign, SimpleNamespace(  # type: ignore[misc]
        id=env.id, kind=env.kind, spec=env.spec, image=env.image, python=env.python),
        runtime)
    host = campaign.paths.compile_cache.resolve()
    inside = launcher.cache_inside(host)
    return "its host path" if inside == host else str(inside)


def _compiles(campaign: Campaign) -> bool:
    return any(workloads.uses_compile_cache(campaign.workload_kind(m.id),
                                            campaign.workload_params(m.id))
               for m in campaign.models)


def _mounted(campaign: Campaign) -> list[str]:
    """Every host folder some environment binds (what a run may read: model, data)."""
    hosts = {str(spec).split(":")[0] for e in campaign.environments
             for spec in e.spec.get("mounts") or []}
    return sorted(h for h in hosts if h.startswith("/"))


def context(campaign: Campaign, env: Environment) -> dict[str, Value]:
    """The environment's effective run context, from its config and its kind."""
    runtime = runtimes.get(env.kind)
    out = {k: Value(v, "kind") for k, v in (runtime.context or {}).items()}
    options = env.spec.get("options") or {}
    for name, key in _OPTION_KEYS.items():
        if name not in options or name == "cache_mount":
            continue
        value = options[name]
        if name == "privileged":
            if value:
                out[key] = Value("none (privileged)", f"options.{name}")
            continue
        if name == "seccomp":
            value = "none" if value == "unconfined" else out.get(key, Value("", "")).value
        if name == "rootless":
            value = f"{value} (rootless)"
        out[key] = Value(str(value), f"options.{name}")
    if options.get("ipc") == "host":  # the host's /dev/shm, whatever shm_size says
        out["shm"] = Value(runtimes.get("native").context["shm"], "options.ipc")  # type: ignore[index]
    elif "shm_size" in options:
        out["shm"] = Value(f"private, {options['shm_size']}", "options.shm_size")
    for name, limit in (options.get("ulimits") or {}).items():
        out[f"ulimit:{name}"] = Value(str(limit), f"options.ulimits.{name}")
    if _compiles(campaign):
        where = _cache_path(campaign, env)
        out["cache_path"] = Value(where, "options.cache_mount" if "cache_mount" in options
                                  else "kind")
    binds = {}
    for spec in env.spec.get("mounts") or []:
        parts = str(spec).split(":")
        binds[parts[0]] = parts[1] if len(parts) > 1 else parts[0]
    sees_host = runtime.launcher == "process" or runtime.host_paths
    for host in _mounted(campaign):
        # a folder bound elsewhere than its host path (a model, a data set); one this
        # environment does not bind is its image's own (the software: the factor)
        if sees_host or host in binds:
            out[f"path:{host}"] = Value(host if sees_host else binds[host],
                                        "kind" if sees_host else "mounts")
    for name, value in (env.spec.get("env") or {}).items():
        out[f"env:{name}"] = Value(str(value), "env")
    return out


def _declared(env: Environment, key: str, mine: Value, ref: Value) -> str | None:
    """Why a difference is part of the factor, or None."""
    said = (env.spec.get("differences") or {}).get(key)
    if said:
        return str(said)
    if mine.origin == "kind" and ref.origin == "kind":
        return "kind"
    variant = env.spec.get("variant") or {}
    options = {n for n, k in _OPTION_KEYS.items() if k == key}
    options |= {"ipc", "shm_size"} if key == "shm" else set()
    options |= {"ulimits"} if key.startswith("ulimit:") else set()
    if options & set(variant):  # the variant sets it, or removes it (null)
        return "variant"
    return None


def _missing(key: str, ctx: dict[str, Value]) -> Value:
    """A key an environment's context lacks: an unset variable, a limit left at the
    kind's own limits, else the kind's default."""
    if key.startswith("env:"):
        return Value("unset", "kind")
    if key.startswith("ulimit:") and "ulimits" in ctx:
        return ctx["ulimits"]
    return Value("default", "kind")


def differences(campaign: Campaign) -> list[Difference]:
    """Each environment's differences from the reference environment."""
    ref = campaign.environment(campaign.reference)
    theirs = context(campaign, ref)
    out = []
    for env in campaign.environments:
        if env.id == ref.id:
            continue
        mine = context(campaign, env)
        for key in sorted(set(mine) | set(theirs)):
            if key.startswith("path:") and key not in mine:
                continue  # a folder it does not bind: its image's own
            a = mine.get(key) or _missing(key, mine)
            b = theirs.get(key) or _missing(key, theirs)
            if a.value == b.value:
                continue
            out.append(Difference(env.id, key, a.value, b.value, a.origin, b.origin,
                                  _declared(env, key, a, b)))
    return out


def problems(campaign: Campaign) -> list[str]:
    """Each difference the config does not declare, and each declaration of a difference
    that is not there (a typo would otherwise declare nothing), as a sentence with the fix."""
    found = differences(campaign)
    out = []
    for d in found:
        if d.declared is not None:
            continue
        set_by = d.origin if d.origin != "kind" else f"{campaign.reference}'s {d.reference_origin}"
        out.append(
            f"{campaign.source}: key 'environments.{d.env}': the run context differs from "
            f"the reference environment in {d.words(campaign.reference)} (set by {set_by}), "
            "a difference the config does not declare as part of the factor under test. "
            f"Fix: make them equal, or declare it: environments.{d.env}.differences: "
            f"{{'{d.key}': WHY}}.")
    ref = context(campaign, campaign.environment(campaign.reference))
    for env in campaign.environments:
        keys = set(context(campaign, env)) | set(ref)
        for key in env.spec.get("differences") or {}:
            if key not in keys:  # a typo; a declaration a variant inherits may match
                out.append(
                    f"{campaign.source}: key 'environments.{env.id}.differences.{key}': "
                    f"'{key}' is not a key of this environment's run context "
                    f"({sorted(keys)}); correct the key or remove it.")
    return out


def summary(campaign: Campaign) -> list[str]:
    """check's lines: each environment's differences from the reference and why each is
    part of the factor."""
    lines = []
    for d in differences(campaign):
        why = {"kind": f"the kind ({d.env}'s own)", "variant": "the variant's option"}.get(
            str(d.declared), f"declared: {d.declared}")
        if d.declared is None:
            why = "NOT DECLARED"
        lines.append(f"  {d.env}: {d.words(campaign.reference)} [{why}]")
    return lines


def key_words(key: str) -> str:
    """A context key as the paper names it: 'ulimit:stack' -> 'the stack limit',
    'path:/data' -> 'the path of /data', 'env:HF_HOME' -> 'the variable HF_HOME'."""
    kind, _, name = key.partition(":")
    if name:
        return {"ulimit": f"the {name} limit", "path": f"the path of {name}",
                "env": f"the variable {name}"}.get(kind, key)
    return WORDS.get(key, key)


def declared_words(spec: dict[str, Any]) -> str:
    """The config's declared differences as the environments table prints them."""
    said = spec.get("differences") or {}
    return "; ".join(f"{key_words(k)}: {v}" for k, v in sorted(said.items()))
