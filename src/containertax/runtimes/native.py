"""native: the workload as a host process (the reference of every comparison)."""

from __future__ import annotations

from pathlib import Path

from containertax.runtimes.base import HOST_CONTEXT, Entry, Ran, Runtime, Spec
from containertax.runtimes.launch import (
    EnvironmentFailure,
    Launch,
    Launcher,
    Outcome,
    run_process,
    telemetry_state,
)


def problems(env_id: str, spec: Spec) -> list[str]:
    if spec.get("mounts"):
        return [f"key 'environments.{env_id}.mounts': a native environment sees the host "
                "filesystem; remove mounts."]
    return []


def explain(env_id: str, spec: Spec, message: str, source: str) -> str | None:
    return (f"environment {env_id}: {message}; fix environments.{env_id}.python in {source} "
            "(or install it)")


def describe(ran: Ran) -> Entry:
    """The host's own software, filesystem and driver: nothing bound, nothing isolated."""
    return Entry(software="the host's own", mounts=(),
                 gpu="direct (host driver)" if ran.gpu_recorded else "none (no GPU recorded)",
                 isolation="none (host process)", flags=())


class NativeLauncher(Launcher):
    def inside(self, probe_dir: Path, work_dir: Path) -> tuple[Path, Path]:
        return probe_dir, work_dir

    def cache_inside(self, cache_dir: Path) -> Path:
        return cache_dir

    def run(self, launch: Launch) -> Outcome:
        marks: dict[str, float] = {}
        try:
            rc, t_in, t_out, wall, out, to = run_process(
                launch.argv, self.environment_vars(launch), launch.timeout_s, launch.cpuset,
                marks)
        except EnvironmentFailure as exc:  # e.g. an interpreter that does not exist
            raise EnvironmentFailure(self.runtime.explain(  # type: ignore[misc]
                self.env.id, self.env.spec, str(exc), self.campaign.source)) from None
        env_vars = self.environment_vars(launch)
        return Outcome(rc, t_in, t_out, wall, out,
                       {"argv": launch.argv, "telemetry": telemetry_state(env_vars)}, to,
                       marks=marks)



RUNTIME = Runtime(
    kind="native", launcher="process", launcher_class=NativeLauncher,
    words=lambda spec: "native (host process)", runtime="", describe=describe,
    needs_image=False,
    image_step="none", keys=frozenset(), needs_root=False, binaries=(), problems=problems,
    explain=explain, cleanup_words="nothing: the process dies with its launcher",
    context=HOST_CONTEXT)
