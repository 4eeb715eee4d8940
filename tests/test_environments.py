"""Launchers against the real host and the real Docker Engine: the process runs, its
time is measured, and nothing is left behind on success, failure, timeout or kill."""

from __future__ import annotations

import contextlib
import resource
import sys
import time
from pathlib import Path

import pytest

from containertax.campaign import config
from containertax.execution import environments, preflight
from containertax.runtimes import chroot as chroot_kind
from containertax.runtimes import docker as docker_kind
from containertax.runtimes import launch
from tests.conftest import DEMO_IMAGE, needs_docker


def _campaign(config_dict, tmp_path, **envs):
    config_dict["results_dir"] = str(tmp_path / "results")
    config_dict["results_dir_absolute"] = True
    if envs:
        config_dict["environments"] = envs
    return config.load_campaign(config_dict, "test.yaml")


def _launch(tmp_path, argv, timeout=30.0):
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    probe = tmp_path / "probe"
    probe.mkdir(exist_ok=True)
    return environments.Launch(argv=argv, probe_dir=probe, work_dir=work, timeout_s=timeout,
                               label="test/cell")


def test_native_runs_with_a_clean_environment(config_dict, tmp_path):
    c = _campaign(config_dict, tmp_path, native={"kind": "native", "env": {"X_TEST": "1"}})
    out = environments.launcher(c, "native").run(
        _launch(tmp_path, [sys.executable, "-c", "import os; print(os.environ.get('X_TEST'),"
                           " os.environ.get('VIRTUAL_ENV'))"]))
    assert out.returncode == 0 and out.output.split() == ["1", "None"]
    assert out.wall_s > 0 and out.exited_unix >= out.launched_unix


def test_native_timeout_kills_the_process(config_dict, tmp_path):
    c = _campaign(config_dict, tmp_path, native={"kind": "native"})
    t0 = time.monotonic()
    out = environments.launcher(c, "native").run(
        _launch(tmp_path, ["sh", "-c", "sleep 30 & sleep 30"], timeout=0.5))
    assert out.timed_out and time.monotonic() - t0 < 10


def test_docker_kwargs_from_cli_names():
    kw = docker_kind.docker_kwargs({
        "ipc": "host", "shm_size": "8g", "network": "host", "cpuset_cpus": "0-3",
        "privileged": True, "cgroup_parent": "bench.slice", "memory": "60g",
        "ulimits": {"memlock": -1, "stack": "1024:2048"}, "gpus": "all",
        "devices": ["/dev/nvidia0:/dev/nvidia0:rwm"],
    })
    assert kw["ipc_mode"] == "host" and kw["shm_size"] == "8g" and kw["network_mode"] == "host"
    assert kw["cpuset_cpus"] == "0-3" and kw["privileged"] and kw["mem_limit"] == "60g"
    assert kw["cgroup_parent"] == "bench.slice" and kw["devices"][0].startswith("/dev/nvidia0")
    limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in kw["ulimits"]}
    assert limits == {"memlock": (-1, -1), "stack": (1024, 2048)}
    assert kw["device_requests"][0]["Count"] == -1


def test_a_cpu_quota_is_docker_s_nano_cpus_and_prints_as_cpus():
    """options.cpus (--cpus 0.5, the CPU factorial demo's planted effect: the demo image's
    reference BLAS runs one thread, so a one-core CPU set planted nothing)."""
    kw = docker_kind.docker_kwargs({"cpus": 0.5})
    assert kw["nano_cpus"] == 500_000_000
    assert docker_kind.cli_flags(kw) == ["--cpus 0.5"]
    assert docker_kind.cli_flags(docker_kind.docker_kwargs({"cpus": 2})) == ["--cpus 2"]


def test_rlimit_refusal_is_explained(config_dict, tmp_path):
    c = _campaign(config_dict, tmp_path)
    msg = docker_kind.explain_docker_error(
        c.environment("docker"),
        "OCI runtime create failed: error setting rlimit type 8: operation not permitted",
        "test.yaml")
    assert "--ulimit memlock" in msg and "environments.docker.options.ulimits.memlock" in msg
    assert "test.yaml" in msg


def test_privileged_refusal_is_explained(config_dict, tmp_path):
    """The engine's words on the lent H100, where the engine lacks capabilities."""
    config_dict["environments"]["docker"]["options"] = {"privileged": True}
    c = _campaign(config_dict, tmp_path)
    msg = docker_kind.explain_docker_error(
        c.environment("docker"),
        'failed to create shim task: OCI runtime create failed: runc create failed: unable to '
        'start container process: unable to apply caps: operation not permitted: unknown',
        "test.yaml")
    assert "refuses --privileged" in msg and "environments.docker.options.privileged" in msg


def _labelled(campaign):
    """The containers of this test's campaign: its name and its own folder (pytest-xdist
    workers run campaigns of one name side by side)."""
    import docker

    root = launch.owner_labels(campaign.name, campaign.root)["containertax.root"]
    return docker.from_env().containers.list(all=True, filters={"label": [
        f"{launch.LABEL}={campaign.name}", f"containertax.root={root}"]})


@needs_docker
@pytest.mark.docker
def test_docker_container_is_removed_after_success_failure_and_timeout(config_dict, tmp_path):
    c = _campaign(config_dict, tmp_path)
    launcher = environments.launcher(c, "docker")
    ok = launcher.run(_launch(tmp_path, ["python3", "-c", "print('hi')"]))
    assert ok.returncode == 0 and "hi" in ok.output
    assert ok.resolved["image"]["id"].startswith("sha256:")
    assert ok.resolved["create_kwargs"]["network_mode"] == "none"
    assert set(ok.phases_s) == {"create_s", "start_s"}
    bad = launcher.run(_launch(tmp_path, ["sh", "-c", "exit 7"]))
    assert bad.returncode == 7
    slow = launcher.run(_launch(tmp_path, ["sleep", "60"], timeout=1))
    assert slow.timed_out
    assert _labelled(c) == []


@needs_docker
@pytest.mark.docker
def test_before_any_run_the_docker_kinds_clean_up_removes_a_dead_launchers_container(
        config_dict, tmp_path):
    """Planted: a container of this checkout whose launcher is gone; the clean-up before
    any run (cells) reaches it through the docker kind's declared `cleanup`."""
    import docker

    c = _campaign(config_dict, tmp_path)
    dead = docker.from_env().containers.create(DEMO_IMAGE, command=["sleep", "60"], labels={
        **launch.owner_labels(c.name, c.root), "containertax.owner_pid": "999999999"})
    try:
        assert dead.name in environments.stop_orphaned_containers(c)
        assert _labelled(c) == []
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            dead.remove(force=True)


@needs_docker
@pytest.mark.docker
def test_stale_container_of_a_dead_launcher_is_removed(config_dict, tmp_path):
    import docker

    c = _campaign(config_dict, tmp_path)
    client = docker.from_env()
    mine = launch.owner_labels(c.name, c.root)

    def container(**labels: str):
        made = client.containers.create(DEMO_IMAGE, command=["sleep", "60"],
                                        labels={**mine, **labels})
        made.start()
        return made

    dead = container(**{"containertax.owner_pid": "999999999"})
    reused = container(**{"containertax.owner_start": "1"})  # our pid, another process
    live = container()  # this very process launched it
    other_checkout = container(**{"containertax.root": "/elsewhere/results/" + c.name,
                                  "containertax.owner_pid": "999999999"})
    other_host = container(**{"containertax.host": "another-host",
                              "containertax.owner_pid": "999999999"})
    try:
        removed = docker_kind.cleanup_stale_containers(client, c.name, c.root)
        assert sorted(removed) == sorted([dead.name, reused.name])
        made = {x.name for x in (live, other_checkout, other_host, dead, reused)}
        left = {x.name for x in client.containers.list(  # of these (xdist workers run more)
            all=True, filters={"label": f"{launch.LABEL}={c.name}"})} & made
        assert left == {live.name, other_checkout.name, other_host.name}
    finally:
        for x in (live, other_checkout, other_host, dead, reused):
            with contextlib.suppress(docker.errors.NotFound):
                x.remove(force=True)


@needs_docker
@pytest.mark.docker
def test_preflight_reports_missing_image(config_dict, tmp_path):
    config_dict["environments"]["docker"]["image"] = "containertax-missing:none"
    c = _campaign(config_dict, tmp_path)
    with pytest.raises(preflight.PreflightError) as err:
        preflight.check_environment(c, "docker")
    assert "containertax-missing:none" in str(err.value)
    assert "environments.docker.image" in str(err.value)


@needs_docker
@pytest.mark.docker
@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_MEMLOCK)[1] == resource.RLIM_INFINITY,
                    reason="this host allows unlimited memlock")
def test_preflight_catches_refused_memlock(config_dict, tmp_path):
    config_dict["environments"]["docker"]["options"]["ulimits"]["memlock"] = -1
    c = _campaign(config_dict, tmp_path)
    assert any("memlock" in p for p in preflight.host_limit_problems(c, "docker"))
    with pytest.raises(preflight.PreflightError) as err:
        preflight.check_environment(c, "docker")
    msg = str(err.value)
    assert "refuses --ulimit memlock=-1" in msg and "ulimits.memlock" in msg
    assert _labelled(c) == []


@needs_docker
@pytest.mark.docker
def test_preflight_checks_workload_inside_docker(config_dict, tmp_path):
    c = _campaign(config_dict, tmp_path)
    facts = preflight.check_environment(c, "docker")
    assert facts["ok"] and facts["inside"]["software"]["numpy"]
    assert facts["inside"]["environment"]["in_container_hint"] is True


ENV_IMAGE = "containertax-envtest:latest"


def _env_test_image() -> str:
    """The demo image's root filesystem re-imported with an ENV and a WORKDIR of its own
    (`docker import --change`, nothing pulled), once per machine."""
    import subprocess

    if subprocess.run(["docker", "image", "inspect", ENV_IMAGE], capture_output=True).returncode:
        script = (f"c=$(docker create {DEMO_IMAGE} true) && docker export $c | docker import "
                  "--change 'ENV CT_IMAGE_VAR=from-image' "
                  "--change 'ENV LD_LIBRARY_PATH=/opt/ct/lib' "
                  "--change 'ENV PATH=/opt/ct/bin:/usr/local/bin:/usr/bin:/bin' "
                  f"--change 'WORKDIR /tmp' - {ENV_IMAGE}; rc=$?; docker rm $c >/dev/null; "
                  "exit $rc")
        subprocess.run(["sh", "-c", script], check=True, capture_output=True)
    return ENV_IMAGE
def test_chroot_mount_targets_stay_in_the_root_filesystem(config_dict, tmp_path):
    """Issue #16, failure 6: a target with '/..' (or through a symlink of the image to an
    absolute path) made mkdir -p create a folder on the host."""
    c = _campaign(config_dict, tmp_path)
    launcher = environments.launcher(c, "chroot")
    root = launcher.rootfs()
    (root / "usr").mkdir(parents=True)
    (root / "escape").symlink_to("/tmp")
    assert launcher.inside_rootfs(Path("/../../data"), "x") == Path("/data")
    assert launcher.inside_rootfs(Path("/usr/../opt/m"), "x") == Path("/opt/m")
    with pytest.raises(environments.EnvironmentFailure, match="leaves the image's root"):
        launcher.inside_rootfs(Path("/escape/models"), "/m:/escape/models")
    config_dict["environments"]["chroot"]["mounts"] = ["/srv:/opt/./data/:ro"]
    c = _campaign(config_dict, tmp_path)
    script = environments.launcher(c, "chroot").script(_launch(tmp_path, ["true"]))
    assert 'mkdir -p "$R"/opt/data\n' in script and "/./" not in script


class _EngineLink:
    """A unix-socket relay to the real Docker Engine that can be cut, as a dockerd restart
    cuts the client's connection mid-run (the engine itself is shared: never restarted)."""

    def __init__(self, path: Path) -> None:
        import socket
        import threading

        self.path, self.conns = path, []
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen()
        self.cut = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import socket
        import threading

        while not self.cut:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX)
            engine.connect("/var/run/docker.sock")
            self.conns += [client, engine]
            for a, b in ((client, engine), (engine, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                b.shutdown(2)

    def sever(self) -> None:
        self.cut = True
        self.server.close()
        self.path.unlink()
        for s in self.conns:
            with contextlib.suppress(OSError):
                s.shutdown(2)
            s.close()


@needs_docker
@pytest.mark.docker
def test_seccomp_unconfined_runs_the_container_without_the_filter(config_dict, tmp_path):
    """options.seccomp: unconfined (issue #32: is Docker's extra compile time its seccomp
    filter?) starts the container with no filter (Seccomp 0 in /proc/self/status), the
    default keeps Docker's filter (Seccomp 2), and the record says which."""
    base = {"kind": "docker", "image": DEMO_IMAGE, "options": {"network": "none"}}
    free = {**base, "options": {"network": "none", "seccomp": "unconfined"}}
    c = _campaign(config_dict, tmp_path, native={"kind": "native"}, docker=base,
                  free=free)
    show = ["sh", "-c", "grep '^Seccomp:' /proc/self/status"]
    seen = {}
    for name in ("docker", "free"):
        out = environments.launcher(c, name).run(_launch(tmp_path, show))
        assert out.returncode == 0, out.output
        seen[name] = out.output.split()[-1]
        seen[name + "_opt"] = out.resolved["create_kwargs"].get("security_opt")
    assert seen["docker"] == "2" and seen["docker_opt"] is None
    assert seen["free"] == "0" and seen["free_opt"] == ["seccomp=unconfined"]
    assert _labelled(c) == []


@needs_docker
@pytest.mark.docker
def test_chroot_and_docker_see_the_image_environment(config_dict, tmp_path):
    """Both start from the image's ENV and WORKDIR (the chroot from the image metadata
    recorded at export), the project overrides none of it, and both record it."""
    import json

    image = _env_test_image()
    spec = {"image": image, "python": "python3", "env": {"CT_CONFIG_VAR": "from-config"}}
    config_dict["reference_environment"] = "chroot"
    c = _campaign(config_dict, tmp_path, chroot={"kind": "chroot", **spec},
                  docker={"kind": "docker", **spec})
    chroot = environments.launcher(c, "chroot")
    chroot_kind.export_rootfs(image, chroot.rootfs())
    show = ["python3", "-c", "import json, os; print(json.dumps({'env': dict(os.environ), "
            "'cwd': os.getcwd()}))"]
    seen = {}
    for name in ("chroot", "docker"):
        out = environments.launcher(c, name).run(_launch(tmp_path, show))
        assert out.returncode == 0, out.output
        seen[name] = json.loads(out.output.strip().splitlines()[-1])
        assert out.resolved["image"]["config"]["env"]["CT_IMAGE_VAR"] == "from-image"
        assert out.resolved["env"]["CT_CONFIG_VAR"] == "from-config"
    env_c, env_d = seen["chroot"]["env"], seen["docker"]["env"]
    env_d.pop("HOSTNAME")  # the container's own name: Docker's, not the image's
    assert env_c == env_d
    assert env_c["PATH"] == "/opt/ct/bin:/usr/local/bin:/usr/bin:/bin"  # the image's PATH
    assert env_c["CT_IMAGE_VAR"] == "from-image" and env_c["CT_CONFIG_VAR"] == "from-config"
    assert seen["chroot"]["cwd"] == seen["docker"]["cwd"] == "/tmp"
def test_losing_the_engine_mid_run_is_a_clear_failure(config_dict, tmp_path, monkeypatch):
    """Issue #16, failure 8: the ledger said only "ConnectionError: ('Connection aborted.',
    FileNotFoundError(2, ...))"."""
    import threading

    import docker

    link = _EngineLink(tmp_path / "engine.sock")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{link.path}")
    c = _campaign(config_dict, tmp_path)
    launcher = environments.launcher(c, "docker")
    threading.Timer(3.0, link.sever).start()
    try:
        with pytest.raises(environments.EnvironmentFailure) as err:
            launcher.run(_launch(tmp_path, ["sleep", "30"]))
        message = str(err.value)
        assert "environment docker: lost the Docker Engine during the run" in message
        assert "runs again with the next invocation" in message
    finally:
        monkeypatch.delenv("DOCKER_HOST")
        for x in _labelled(c):
            with contextlib.suppress(docker.errors.NotFound):
                x.remove(force=True)


def test_a_native_python_that_does_not_exist_is_a_clear_preflight_error(config_dict, tmp_path):
    """Issue #16, failure 9: a traceback in preflight with an empty log."""
    config_dict["environments"]["native"]["python"] = "/nonexistent/python3"
    c = _campaign(config_dict, tmp_path)
    with pytest.raises(preflight.PreflightError) as err:
        preflight.check_environment(c, "native")
    message = str(err.value)
    assert "environment native: cannot start '/nonexistent/python3'" in message
    assert "environments.native.python in test.yaml" in message


def test_a_failing_probe_is_reported_without_traceback_naming_the_key(config_dict, tmp_path):
    """Issue #16, failure 9: a bad dtype passed preflight and every run failed; issue #21:
    then preflight printed the probe's traceback and blamed environments.*.python. The
    config now refuses it (tests/test_workloads.py); a campaign whose checks were bypassed
    (campaign_of, as a resolved config with a matching digest is read) shows the probe's
    own error, without the traceback, and names the key whose value it quotes."""
    config_dict["workload"]["dtype"] = "float65"
    with pytest.raises(config.ConfigError, match=r"key 'workload.dtype'"):
        _campaign(config_dict, tmp_path)
    config_dict["workload"]["dtype"] = "float32"
    valid = _campaign(config_dict, tmp_path)
    raw = {**valid.raw, "workload": {**valid.raw["workload"], "dtype": "float65"}}
    c = config.campaign_of(raw, "test.yaml")
    with pytest.raises(preflight.PreflightError) as err:
        preflight.check_environment(c, "native")
    message = str(err.value)
    assert "data type 'float65' not understood" in message, message  # numpy's own words
    assert "Traceback" not in message and 'File "' not in message, message
    assert "workload.dtype (or models[0].dtype) = 'float65'" in message, message
    assert "environments.native.python" not in message, message
    whole = c.paths.work("preflight-native") / "check.output.txt"
    assert "Traceback" in whole.read_text() and str(whole) in message  # kept, for a person
    assert preflight.check_environment(valid, "native")["ok"]


@pytest.mark.parametrize(("output", "said"), [
    ("loading\nTraceback (most recent call last):\n  File \"p.py\", line 3, in <module>\n"
     "    x()\n    ^^^\nValueError: bad\n  more of it", "loading\nValueError: bad"),
    ("Traceback (most recent call last):\n  File \"a\", line 1\nKeyError: 'a'\n\n"
     "During handling of the above exception, another exception occurred:\n\n"
     "Traceback (most recent call last):\n  File \"b\", line 2\nRuntimeError: no GPU",
     "RuntimeError: no GPU"),
    ("model a: no checkpoint at /m", "model a: no checkpoint at /m"),
    ("", "(no output)"),
])
def test_probe_error_keeps_what_it_said_and_drops_the_traceback(output, said):
    assert preflight.probe_error(output) == said


def test_chroot_script_applies_the_containers_limits_and_ld_cache(config_dict, tmp_path):
    """The chroot gets options.ulimits as Docker's --ulimit (prlimit on the shell that execs
    it), and with the GPU: nvidia-uvm made where missing and the image's linker cache
    refreshed for the injected driver libraries in the namespace only."""
    spec = {"kind": "chroot", "image": DEMO_IMAGE, "gpu": True,
            "options": {"ulimits": {"memlock": -1, "stack": 67108864, "nofile": "1024:4096"}}}
    config_dict["reference_environment"] = "chroot"
    c = _campaign(config_dict, tmp_path, chroot=spec)
    launcher = environments.launcher(c, "chroot")
    script = launcher.script(_launch(tmp_path, ["true"]), {"libcuda.so.1": "/usr/lib/x.so"})
    assert ("prlimit --pid $$ --memlock=unlimited:unlimited --nofile=1024:4096 "
            "--stack=67108864:67108864") in script
    assert "nvidia-modprobe -u -c=0" in script
    assert ('/sbin/ldconfig -X -C /usr/local/containertax-driver/ld.so.cache '
            '/usr/local/containertax-driver') in script
    assert 'mount --bind "$R"/usr/local/containertax-driver/ld.so.cache "$R/etc/ld.so.cache"' \
        in script
    assert script.index("prlimit") < script.index("exec env")


@needs_docker
@pytest.mark.docker
def test_chroot_limits_equal_the_containers(config_dict, tmp_path):
    """A real chroot and a real container of the same image with the same options.ulimits
    (the Spark config's memlock and stack, and a nofile pair): /proc/self/limits agree.
    memlock is the Spark's -1 where this host lets root raise it, else its hard limit (a
    host without CAP_SYS_RESOURCE refuses both alike)."""
    import os

    if os.geteuid() != 0:
        pytest.skip("the chroot needs root")
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    memlock = -1 if hard == resource.RLIM_INFINITY else hard
    ulimits = {"memlock": memlock, "stack": 67108864, "nofile": "1024:4096"}
    config_dict["reference_environment"] = "chroot"
    c = _campaign(config_dict, tmp_path,
                  chroot={"kind": "chroot", "image": DEMO_IMAGE, "options": {"ulimits": ulimits}},
                  docker={"kind": "docker", "image": DEMO_IMAGE, "options": {"ulimits": ulimits}})
    chroot = environments.launcher(c, "chroot")
    chroot_kind.export_rootfs(DEMO_IMAGE, chroot.rootfs())
    show = ["sh", "-c", "grep -E '^Max (locked memory|stack size|open files)' /proc/self/limits"]
    seen = {}
    for name in ("chroot", "docker"):
        out = environments.launcher(c, name).run(_launch(tmp_path, show))
        assert out.returncode == 0, out.output
        seen[name] = [ln.split() for ln in out.output.strip().splitlines()[-3:]]
    assert seen["chroot"] == seen["docker"]
    limits = {" ".join(row[1:3]): row[3:5] for row in seen["chroot"]}
    shown = "unlimited" if memlock == -1 else str(memlock)
    assert limits == {"locked memory": [shown, shown],
                      "stack size": ["67108864", "67108864"], "open files": ["1024", "4096"]}


@needs_docker
@pytest.mark.docker
def test_chroot_linker_cache_finds_the_injected_driver_libraries(config_dict, tmp_path,
                                                                 monkeypatch):
    """The image's ldconfig, run for the bound driver folder, puts the injected library in
    the linker cache the process sees (as the toolkit's update-ldcache hook); the exported
    root filesystem's own cache is untouched. A host library stands in for libcuda."""
    import os

    if os.geteuid() != 0:
        pytest.skip("the chroot needs root")
    lib = Path("/usr/lib/x86_64-linux-gnu/libz.so.1")
    if not lib.exists():
        pytest.skip("no host libz to stand in for a driver library")
    monkeypatch.setattr(chroot_kind, "driver_libraries", lambda env: {
        "libz.so.1": str(lib.resolve())})
    config_dict["reference_environment"] = "chroot"
    c = _campaign(config_dict, tmp_path, chroot={"kind": "chroot", "image": DEMO_IMAGE,
                                                  "gpu": True})
    chroot = environments.launcher(c, "chroot")
    chroot_kind.export_rootfs(DEMO_IMAGE, chroot.rootfs())
    before = (chroot.rootfs() / "etc" / "ld.so.cache").read_bytes()
    out = chroot.run(_launch(tmp_path, ["sh", "-c", "ldconfig -p | grep containertax"]))
    assert out.returncode == 0, out.output
    assert "libz.so.1" in out.output and "/usr/local/containertax-driver/libz.so.1" \
        in out.output
    assert (chroot.rootfs() / "etc" / "ld.so.cache").read_bytes() == before


@needs_docker
@pytest.mark.docker
def test_campaigns_of_a_results_folder_share_one_exported_root_filesystem(tmp_path):
    """The second campaign's export of the same image is hard links to the first's: one
    copy of the bytes on disk for the study (its marker says which export it shares)."""
    slug = "demo"
    first = tmp_path / "results" / "dgx-spark-2a" / "rootfs" / slug
    second = tmp_path / "results" / "dgx-spark-2b" / "rootfs" / slug
    a = chroot_kind.export_rootfs(DEMO_IMAGE, first)
    b = chroot_kind.export_rootfs(DEMO_IMAGE, second)
    assert "shared_from" not in a and b["shared_from"] == str(first)
    assert b["id"] == a["id"] and b["config"] == a["config"]
    sh_a, sh_b = (first / "bin" / "sh").resolve(), (second / "bin" / "sh").resolve()
    assert sh_a.stat().st_ino == sh_b.stat().st_ino  # the same file, not a copy
    assert sorted(p.name for p in second.iterdir()) == sorted(p.name for p in first.iterdir())
