"""The compile cache a run sees, by the model's declared arm (models[].compile_cache, issue
#40): the cache state is a factor the config declares and the records state, never an
accident of which environment ran first.

  shared           the campaign's one cache (the default): the first run of any environment
                   compiles, every later run of any environment loads
  cold             emptied before every run: every run compiles
  per_environment  each environment keeps its own cache: its first run compiles, its later
                   runs load what it wrote, never what another environment wrote

Every arm runs at one path in every environment (Inductor keys some tuning results by the
directory of a kernel's file, issue #40); per_environment therefore restores the
environment's own copy into that path before the run and saves it back after."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from containertax.campaign.config import Campaign

ARMS = ("shared", "cold", "per_environment")


def arm_of(params: dict[str, Any]) -> str:
    """The model's arm (its workload parameters), shared where it declares none."""
    return str(params.get("compile_cache") or "shared")


def _files(folder: Path) -> int:
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def _empty(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def prepare(campaign: Campaign, model: str, environment: str,
            params: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """The cache folder for this run, made ready for its arm, and what the record states:
    the arm, the folder and how many files it held when the run began."""
    arm = arm_of(params)
    if arm == "shared":
        folder = campaign.paths.compile_cache.resolve()
        folder.mkdir(parents=True, exist_ok=True)
        return folder, {"arm": arm, "path": str(folder), "files_before": _files(folder)}
    if arm not in ARMS:
        raise ValueError(f"models[].compile_cache {arm!r}: choose one of {list(ARMS)}")
    folder = campaign.paths.compile_cache_arm(model).resolve()
    _empty(folder)
    state: dict[str, Any] = {"arm": arm, "path": str(folder)}
    if arm == "per_environment":
        saved = campaign.paths.compile_cache_saved(model, environment)
        if saved.is_dir():
            shutil.copytree(saved, folder, dirs_exist_ok=True, symlinks=True)
        state["restored_from"] = environment
    state["files_before"] = _files(folder)
    return folder, state


def finish(campaign: Campaign, model: str, environment: str, params: dict[str, Any]) -> None:
    """After the run (whatever its outcome): a per_environment arm saves what its
    environment's run left in the cache, replacing its previous copy whole (a copy beside
    it first, then a rename: a kill leaves the old copy or the new one, never half)."""
    if arm_of(params) != "per_environment":
        return
    live = campaign.paths.compile_cache_arm(model).resolve()
    saved = campaign.paths.compile_cache_saved(model, environment)
    fresh = saved.with_name(saved.name + ".partial")
    if fresh.exists():
        shutil.rmtree(fresh)
    shutil.copytree(live, fresh, symlinks=True)
    old = saved.with_name(saved.name + ".old")
    if saved.exists():
        saved.rename(old)
    fresh.rename(saved)
    if old.exists():
        shutil.rmtree(old)
