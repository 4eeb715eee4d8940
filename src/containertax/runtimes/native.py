"""native: the workload as a host process (the reference of every comparison)."""

from __future__ import annotations

from containertax.runtimes.base import Runtime, Spec


def problems(env_id: str, spec: Spec) -> list[str]:
    if spec.get("mounts"):
        return [f"key 'environments.{env_id}.mounts': a native environment sees the host "
                "filesystem; remove mounts."]
    return []


def explain(env_id: str, spec: Spec, message: str, source: str) -> str | None:
    return (f"environment {env_id}: {message}; fix environments.{env_id}.python in {source} "
            "(or install it)")


RUNTIME = Runtime(
    kind="native", launcher="process", words=lambda spec: "native (host process)", runtime="",
    isolation="none (host process)", software="the host's own", needs_image=False,
    image_step="none", keys=frozenset(), needs_root=False, binaries=(), problems=problems,
    explain=explain, cleanup_words="nothing: the process dies with its launcher")
