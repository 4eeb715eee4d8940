"""Environments that differ only in the factor under test (issue #40): every path a run
uses is the same path in every environment, so a cache written in one is found by another.
Planted: Docker's old cache path (/containertax/cache), kept as options.cache_mount: inside."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from containertax import runtimes, workloads
from containertax.runtimes import charliecloud
from containertax.runtimes.base import Bind, CommandLaunch
from containertax.runtimes.command import make_bind_targets
from containertax.runtimes.launch import INSIDE

DOUBLES = Path(__file__).parent / "doubles"


def _launcher(kind: str, spec: dict | None = None):
    runtime = runtimes.get(kind)
    env = SimpleNamespace(id=f"{kind}-env", kind=kind, spec=spec or {}, image="img",
                          python="python3")
    return runtime.launcher_class(SimpleNamespace(name="c", root=Path("/r"), source="c.yaml"),
                                  env, runtime)


@pytest.mark.parametrize("kind", sorted(runtimes.KINDS))
def test_every_kind_binds_the_compile_cache_at_its_host_path(kind, tmp_path):
    """The variables that steer Inductor and Triton name the same folder in every kind."""
    cache = tmp_path / "compile-cache"
    native = workloads.compile_cache_env(_launcher("native").cache_inside(cache))
    this = workloads.compile_cache_env(_launcher(kind).cache_inside(cache))
    assert this == native
    assert this["TORCHINDUCTOR_CACHE_DIR"] == str(cache / "inductor")


def test_the_old_cache_path_is_kept_only_as_a_declared_option(tmp_path):
    """Planted: cache_mount: inside puts the cache at /containertax/cache, where a kernel
    native autotuned is keyed by another folder; it no longer happens by default."""
    cache = tmp_path / "compile-cache"
    old = _launcher("docker", {"options": {"cache_mount": "inside"}}).cache_inside(cache)
    assert old == INSIDE / "cache" != cache
    assert _launcher("docker", {"options": {"cache_mount": "host_path"}}).cache_inside(
        cache) == cache


def test_the_chroot_binds_the_cache_at_its_host_path(tmp_path):
    chroot = _launcher("chroot")
    chroot.rootfs = lambda: tmp_path / "rootfs"  # type: ignore[method-assign]
    chroot.image = lambda: {}  # type: ignore[method-assign]
    cache = tmp_path / "compile-cache"
    script = chroot.script(runtimes.launch.Launch(
        argv=["true"], probe_dir=tmp_path, work_dir=tmp_path, cache_dir=cache))
    assert f'mount --bind {cache} "$R"{cache}' in script
    assert "/containertax/cache" not in script


def test_charliecloud_gets_the_cache_folder_made_in_its_image(tmp_path):
    """ch-run binds only onto folders of the image: the launcher makes the host path's
    folder there (the provide rule cannot: the path is the campaign's)."""
    image = tmp_path / "image"
    cache = tmp_path / "results" / "c" / "compile-cache"
    make_bind_targets(image, [Bind(cache, cache, False)])
    assert (image / cache.relative_to("/")).is_dir()
    argv = charliecloud.command(CommandLaunch("ch", {}, str(image), [Bind(cache, cache, False)],
                                              {}, ["true"]))
    assert f"--bind={cache}:{cache}" in argv


def test_a_command_kind_runs_with_the_cache_at_its_host_path(tmp_path, monkeypatch):
    """Through the command launcher (Apptainer's test double: no Apptainer runs here), the
    process sees TORCHINDUCTOR_CACHE_DIR at the host's path and the bind puts it there."""
    monkeypatch.setenv("PATH", f"{DOUBLES}:{os.environ['PATH']}")
    monkeypatch.setenv("APPTAINER_DOUBLE_LOG", str(tmp_path / "log"))
    marker = tmp_path / "provided.json"
    marker.write_text(json.dumps({"name": "img", "id": "sha256:t", "runtime_ref": "x.sif",
                                  "config": {"env": {}, "working_dir": "/"}}))
    app = _launcher("apptainer")
    app.marker = lambda: marker  # type: ignore[method-assign]
    app.campaign.paths = None
    cache = tmp_path / "compile-cache"
    cache.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    env = workloads.compile_cache_env(app.cache_inside(cache))
    out = app.run(runtimes.launch.Launch(
        argv=[sys.executable, "-c", "import os; print(os.environ['TORCHINDUCTOR_CACHE_DIR'])"],
        probe_dir=tmp_path, work_dir=work, env=env, timeout_s=30, cache_dir=cache))
    assert out.returncode == 0, out.output
    assert out.output.strip() == str(cache / "inductor")
    assert f"{cache}:{cache}:rw" in out.resolved["binds"]


# --- the run context, diffed across environments (campaign/parity.py) -----------------

from containertax import cli  # noqa: E402
from containertax.campaign import config, parity  # noqa: E402

TINY_LLM = {"id": "tiny", "kind": "transformers", "decoding": "compiled",
            "model_config": {"model_type": "llama", "hidden_size": 64,
                             "intermediate_size": 128, "num_hidden_layers": 1,
                             "num_attention_heads": 2, "num_key_value_heads": 1,
                             "vocab_size": 256}}


def _compiling(config_dict, **docker_options):
    """The demo config with a compiling model and Docker's options replaced."""
    config_dict["models"] = [TINY_LLM]
    docker = config_dict["environments"]["docker"]
    docker["options"] = {**docker["options"], **docker_options}
    return config_dict


def _write(tmp_path, data) -> str:
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_the_old_cache_path_is_refused_unless_declared(config_dict, tmp_path, capsys):
    """Planted: Docker's compile cache at /containertax/cache (what every campaign before
    issue #40 ran with). check refuses it naming the key, both paths and the fix; declared
    as part of the factor, it passes and the declaration is what the table prints."""
    data = _compiling(config_dict, cache_mount="inside")
    assert cli.main(["check", _write(tmp_path, data), "-d", str(tmp_path)]) == 1
    said = capsys.readouterr().err
    assert "environments.docker': the run context differs" in said
    assert "cache_path (compile cache path): '/containertax/cache' here, 'its host path' " \
           "in native" in said
    assert "environments.docker.differences: {'cache_path': WHY}" in said
    data["environments"]["docker"]["differences"]["cache_path"] = "the old path, on purpose"
    assert cli.main(["check", _write(tmp_path, data), "-d", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cache_path (compile cache path): '/containertax/cache' here" in out
    assert "[declared: the old path, on purpose]" in out
    assert "compile cache path: the old path, on purpose" in parity.declared_words(
        data["environments"]["docker"])


def test_the_cache_at_its_host_path_is_no_difference(config_dict):
    c = config.load_campaign(_compiling(config_dict), "c.yaml")
    assert not [d for d in parity.differences(c) if d.key == "cache_path"]
    assert parity.problems(c) == []


@pytest.mark.parametrize("planted, key", [
    ({"env": {"HF_HOME": "/elsewhere"}}, "env:HF_HOME"),
    ({"mounts": ["/srv/models:/models:ro"]}, "path:/srv/models"),
    ({"options": {"network": "none", "ipc": "host", "ulimits": {"stack": 67108864},
                  "memory": "8g"}}, "memory_limit"),
])
def test_an_undeclared_difference_the_config_makes_is_refused(config_dict, planted, key):
    """Planted: a variable that steers HF, a model bound elsewhere, a memory limit."""
    docker = config_dict["environments"]["docker"]
    docker.update(planted)
    c = config.load_campaign(config_dict, "c.yaml")
    refused = parity.problems(c)
    assert any(f"{{'{key}': WHY}}" in p for p in refused), refused


def test_what_the_kind_itself_does_is_part_of_the_factor(config_dict):
    """Docker's seccomp filter and cgroup are what Docker is: listed, never refused."""
    c = config.load_campaign(config_dict, "c.yaml")
    found = {(d.env, d.key): d.declared for d in parity.differences(c)}
    assert found[("docker", "seccomp")] == "kind"
    assert found[("docker", "cgroup")] == "kind"
    assert ("chroot", "seccomp") not in found


def test_a_declaration_of_no_context_key_is_refused(config_dict):
    """A typo would otherwise declare nothing and pass."""
    config_dict["environments"]["docker"]["differences"]["netwrok"] = "typo"
    with pytest.raises(config.ConfigError, match="differences"):
        config.load_campaign(config_dict, "c.yaml")  # the schema's key pattern
    config_dict["environments"]["docker"]["differences"].pop("netwrok")
    config_dict["environments"]["docker"]["differences"]["env:HF_HOME"] = "x"
    c = config.load_campaign(config_dict, "c.yaml")
    assert any("env:HF_HOME' is not a key" in p for p in parity.problems(c))


def test_differences_and_the_old_cache_default_keep_a_committed_campaigns_hash(config_dict):
    """`differences` is words (outside the hash); cache_mount: inside hashes as the key's
    absence did before #40; the new default (host path) hashes differently."""
    plain = config.load_campaign(_compiling(copy_of(config_dict)), "c.yaml").config_hash()
    old = _compiling(copy_of(config_dict), cache_mount="inside")
    old["environments"]["docker"]["differences"]["cache_path"] = "old"
    old_hash = config.load_campaign(old, "c.yaml").config_hash()
    assert old_hash != plain
    del old["environments"]["docker"]["differences"]["cache_path"]
    assert config.load_campaign(old, "c.yaml").config_hash() == old_hash


def test_differences_and_the_old_cache_default_keep_a_committed_campaigns_pin(config_dict):
    """The pin (#44) reads them as the hash does. Before: every committed config that
    gained `cache_mount: inside` was refused by `check` against the pin recreated from its
    records ('options: {...} pinned, {'cache_mount': 'inside', ...} here'). Planted: the
    cache moved to the host path by its option is still a conflict."""
    before = config.load_campaign(_compiling(copy_of(config_dict)), "c.yaml")
    pin = config.identity(before)
    after = _compiling(copy_of(config_dict), cache_mount="inside")
    after["environments"]["docker"]["differences"]["cache_path"] = "the old path"
    assert config._pin_conflicts(pin, config.identity(
        config.load_campaign(after, "c.yaml"))) == []
    moved = _compiling(copy_of(config_dict), cache_mount="host_path")
    conflicts = config._pin_conflicts(pin, config.identity(
        config.load_campaign(moved, "c.yaml")))
    assert len(conflicts) == 1 and "'cache_mount': 'host_path'" in conflicts[0], conflicts


def copy_of(data):
    import copy

    return copy.deepcopy(data)


def test_the_environments_table_prints_the_declared_differences():
    from containertax.publishing import tables

    row = {"environment": "docker", "runtime": "", "software": "image x", "mounts": "none",
           "read_only": False, "gpu": "none", "flags": "none", "isolation": "namespaces",
           "declared": "compile cache path: the old path, on purpose"}
    text = tables.environments_table([row])
    assert "Declared differences: compile cache path: the old path, on purpose." in text


def test_a_command_kind_records_the_launch_marks_of_every_kind(tmp_path, monkeypatch):
    """Podman, Charliecloud and Apptainer runs had no launcher marks, so their 'where the
    time goes' table was empty. Through the command launcher (Apptainer's test double, no
    container: the real kinds run in test_runtimes.py) the run now has launch,
    started and exited, and with the probe's own mark taken inside, phases that add up to
    its wall time on one clock."""
    from containertax.workloads import timeline

    monkeypatch.setenv("PATH", f"{DOUBLES}:{os.environ['PATH']}")
    monkeypatch.setenv("APPTAINER_DOUBLE_LOG", str(tmp_path / "log"))
    marker = tmp_path / "provided.json"
    marker.write_text(json.dumps({"name": "img", "id": "sha256:t", "runtime_ref": "x.sif",
                                  "config": {"env": {}, "working_dir": "/"}}))
    app = _launcher("apptainer")
    app.marker = lambda: marker  # type: ignore[method-assign]
    work = tmp_path / "work"
    work.mkdir()
    out = app.run(runtimes.launch.Launch(
        argv=[sys.executable, "-c", "import time; print(time.monotonic())"],
        probe_dir=tmp_path, work_dir=work, timeout_s=30))
    assert out.returncode == 0, out.output
    assert {"launch", "started", "exited"} <= set(out.marks)
    enter = float(out.output.split()[-1])
    run = timeline.build(out.marks, {"timeline": {"marks": {"enter": enter}}}, out.wall_s)
    assert run is not None and set(run["phases_s"]) == {
        "phase_start_s", "phase_interpreter_s", "phase_exit_s"}
    assert timeline.problems(run, 1e-6) == []
