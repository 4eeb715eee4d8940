"""Podman (rootful and rootless) and Charliecloud as real runtimes on this machine (Debian's
packages, installed by scripts/setup.sh with the rootless user `containertax`): the image is
handed over by the workflow's own step, the CPU demo's workload runs through preflight in
each, nothing is left behind, and a runtime's refusal becomes a sentence naming the runtime
and the fix. Apptainer is not installed here: its command line is checked against a test
double of the binary (tests/doubles/apptainer), named as such; it has not been run."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from containertax import runtimes
from containertax.campaign import config
from containertax.execution import environments, preflight
from containertax.runtimes import launch, podman
from containertax.runtimes.base import rlimit_names
from tests.conftest import DEMO_IMAGE, REPO, docker_ready

REQUIRED = os.environ.get("CONTAINERTAX_REQUIRE_RUNTIMES") == "1"
ROOTLESS_USER = "containertax"


def _have(*binaries: str) -> bool:
    return docker_ready() and all(shutil.which(b) for b in binaries)


def _host_lacks(*binaries: str) -> list[str]:
    """What the kinds behind these binaries find missing on this host, checked the way
    preflight checks it (Podman: an OCI runtime that accepts the cgroup layout)."""
    kinds = [r for r in runtimes.REGISTRY.values()
             if r.binaries and set(r.binaries) & set(binaries) and r.host_problems]
    return [p for r in kinds for p in r.host_problems({})]


def _skip_unless(*binaries: str):
    lacking = _host_lacks(*binaries) if _have(*binaries) else []
    ready = _have(*binaries) and not lacking
    why = " ".join(lacking) or (f"needs {', '.join(binaries)} and {DEMO_IMAGE} "
                                "(scripts/setup.sh installs them)")
    if REQUIRED and not ready:  # scripts/test.sh: a missing runtime fails, never skips
        pytest.fail(why)
    return pytest.mark.skipif(not ready, reason=why)


def _rootless_ready() -> bool:
    try:
        pwd.getpwnam(ROOTLESS_USER)
    except KeyError:
        return False
    return os.geteuid() == 0


@pytest.fixture
def results():
    """A results folder the rootless user can reach (pytest's own tmp folders are 0700)."""
    base = REPO / "results"
    base.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".test-runtimes-", dir=base))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _campaign(config_dict, results, **environments_):
    config_dict["results_dir"] = str(results)
    config_dict["results_dir_absolute"] = True
    config_dict["environments"] = {"native": {"kind": "native", "python": "/usr/bin/python3"},
                                   **environments_}
    config_dict["reference_environment"] = "native"
    return config.load_campaign(config_dict, "runtimes-test.yaml")


def _provide_and_check(c, env_id):
    out = c.paths.provided(env_id)
    facts = environments.provide_image(c, env_id, out)
    assert json.loads(out.read_text())["id"] == facts["id"]
    docker_id = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}",
                                DEMO_IMAGE], capture_output=True, text=True).stdout.strip()
    assert facts["id"] == docker_id  # the same image as Docker's, by id
    return preflight.check_environment(c, env_id)


def _image(**extra):
    return {"image": DEMO_IMAGE, "python": "/usr/bin/python3", **extra}


@_skip_unless("podman")
@pytest.mark.skipif(os.geteuid() != 0, reason="rootful Podman needs root")
def test_rootful_podman_runs_the_demo_workload(config_dict, results):
    c = _campaign(config_dict, results,
                  podman=_image(kind="podman", options={"network": "none"}))
    facts = _provide_and_check(c, "podman")
    resolved = facts["resolved"]
    assert resolved["runtime"]["name"] == "Podman"
    assert resolved["runtime"]["words"] == "Podman (rootful)"
    assert resolved["runtime"]["version"] == runtimes.get("podman").version()
    # the limits native has, passed explicitly (nproc at most Podman's own)
    native = podman.limits({})
    assert resolved["limits"] == {k: list(v) for k, v in native.items()}
    assert f"--ulimit=nofile={native['nofile'][0]}:{native['nofile'][1]}" in \
        resolved["command"]
    inside = facts["inside"]["environment"]
    assert inside and facts["checks"]["matmul"]["kind"] == "matmul"
    left = subprocess.run(["podman", "ps", "-a", "--filter",
                           f"label=containertax.campaign={c.name}", "-q"],
                          capture_output=True, text=True).stdout.split()
    assert left == []  # --rm, and nothing of a killed launcher


@_skip_unless("podman", "runuser")
@pytest.mark.skipif(not _rootless_ready(), reason=f"needs root and the user {ROOTLESS_USER}")
def test_rootless_podman_runs_the_demo_workload(config_dict, results):
    c = _campaign(config_dict, results,
                  rootless=_image(kind="podman", options={"rootless": ROOTLESS_USER,
                                                          "network": "none"}))
    facts = _provide_and_check(c, "rootless")
    assert facts["resolved"]["runtime"]["words"] == "Podman (rootless)"
    command = facts["resolved"]["command"]
    assert Path(command[0]).name == "runuser" and command[1:3] == ["-u", ROOTLESS_USER]
    assert facts["checks"]["matmul"]["kind"] == "matmul"


@_skip_unless("ch-run", "ch-convert")
def test_charliecloud_runs_the_demo_workload(config_dict, results):
    c = _campaign(config_dict, results, ch=_image(kind="charliecloud"))
    facts = _provide_and_check(c, "ch")
    resolved = facts["resolved"]
    assert resolved["runtime"] == {"name": "Charliecloud", "words": "Charliecloud",
                                   "version": runtimes.get("charliecloud").version()}
    assert Path(resolved["command"][0]).name == "ch-run"
    # the process starts from the image's ENV, as in the chroot
    assert resolved["env"]["PATH"] == resolved["image"]["config"]["env"].get(
        "PATH", resolved["env"]["PATH"])
    assert facts["checks"]["matmul"]["kind"] == "matmul"
    # the environments table as the kind renders what ran (runtimes/charliecloud.py
    # describe): ch-run's own flags, the harness's binds not among the host's folders
    from containertax.publishing.facts import environment_row

    row = environment_row({"environment": {"id": "ch", "kind": "charliecloud",
                                           "spec": c.environment("ch").spec,
                                           "resolved": resolved}, "telemetry": {}})
    assert row["flags"] == "--no-passwd --unset-env=USER" and row["mounts"] == "none"
    assert row["software"] == f"image directory converted from {DEMO_IMAGE}"


@_skip_unless("podman")
@pytest.mark.skipif(os.geteuid() != 0, reason="rootful Podman needs root")
def test_a_podman_refusal_names_the_runtime_and_the_fix(config_dict, results):
    """Planted: a limit above the host's hard limit; Podman's runc refuses it (status 125)
    and the message names Podman, the ulimits key with its schema name and the fix."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or os.environ.get("CONTAINERTAX_CAP_SYS_RESOURCE"):
        pytest.skip("this host lets root raise RLIMIT_NOFILE: nothing to refuse")
    c = _campaign(config_dict, results,
                  podman=_image(kind="podman", options={"ulimits": {"nofile": hard * 4}}))
    environments.provide_image(c, "podman", c.paths.provided("podman"))
    with pytest.raises(preflight.PreflightError) as err:
        preflight.check_environment(c, "podman")
    said = str(err.value)
    assert "refuses --ulimit nofile" in said and "(Podman (rootful):" in said
    assert "environments.podman.options.ulimits.nofile" in said and "ofile" not in \
        said.replace("nofile", "")


def test_the_rlimit_names_are_the_schemas():
    """RLIMIT_OFILE is RLIMIT_NOFILE (7): the refusal names `nofile`, a key the schema takes."""
    import resource

    assert rlimit_names()[resource.RLIMIT_NOFILE] == "nofile"
    said = runtimes.docker.explain("docker", {"options": {"ulimits": {"nofile": 10**7}}},
                                   "error setting rlimit type 7: operation not permitted",
                                   "x.yaml")
    assert "ulimits.nofile" in said and "ulimits.ofile" not in said


def test_crun_refusing_a_limit_is_the_same_sentence():
    """crun (Podman's default on cgroup v2) says it in its own words (seen on a new Debian 12
    machine: "crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted")."""
    spec = {"options": {"ulimits": {"nofile": 10**7}}}
    said = runtimes.podman.explain(
        "p", spec, "Error: crun: setrlimit `RLIMIT_NOFILE`: Operation not permitted: OCI "
        "permission denied", "x.yaml")
    assert "refuses --ulimit nofile=10000000" in said and "ulimits.nofile" in said


# /proc/self/mountinfo of the three layouts (fields as mountinfo(5); the hybrid one is this
# project's new Debian 12 machine of 2026-11-28, trimmed)
V2 = "30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
HYBRID = ("30 24 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
          "31 30 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
          "32 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
V1 = ("30 24 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
      "32 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")


def test_podman_names_runc_where_crun_refuses_the_hosts_cgroups(tmp_path, monkeypatch):
    """crun refuses a hybrid host whose unified hierarchy holds controllers ("cgroups in
    hybrid mode not supported, drop all controllers from cgroupv2"): there every launch
    names runc, and a host without runc is refused at preflight with the fix; v2, v1 and a
    hybrid host with an empty unified hierarchy keep Podman's default."""
    (tmp_path / "unified").mkdir()
    (tmp_path / "unified" / "cgroup.controllers").write_text("hugetlb\n")
    hybrid = podman.cgroup_layout(HYBRID.replace("/sys/fs/cgroup", str(tmp_path)), tmp_path)
    assert hybrid == ("hybrid", ("hugetlb",))
    assert podman.oci_runtime(hybrid) == "runc"
    (tmp_path / "unified" / "cgroup.controllers").write_text("")
    empty = podman.cgroup_layout(HYBRID.replace("/sys/fs/cgroup", str(tmp_path)), tmp_path)
    assert empty == ("hybrid", ()) and podman.oci_runtime(empty) is None
    assert podman.cgroup_layout(V2) == ("v2", ())
    assert podman.cgroup_layout(V1) == ("v1", ())
    assert podman.oci_runtime(("v2", ())) is None and podman.oci_runtime(("v1", ())) is None
    monkeypatch.setattr(podman.shutil, "which", lambda name: None)
    said = podman.host_problems({"options": {"rootless": "u"}}, hybrid)
    assert len(said) == 1 and "Podman (rootless)" in said[0] and "crun refuses" in said[0]
    assert "apt-get install runc" in said[0] and "hugetlb" in said[0]
    assert podman.host_problems({}, ("v2", ())) == []
    # the launch names it, before `run` (a global option of podman)
    monkeypatch.setattr(podman, "oci_runtime", lambda layout=None: "runc")
    launch = SimpleNamespace(spec={}, labels={"containertax.name": "n"}, limits={}, cpuset=None,
                             binds=[], env={}, image="img", argv=["python3"])
    assert podman.command(launch)[:3] == ["podman", "--runtime=runc", "run"]


def test_a_hybrid_host_is_refused_at_preflight_and_crun_s_words_are_a_sentence(monkeypatch):
    """The registered kind carries its host check, and preflight runs it: on a hybrid host
    without runc (planted layout, no runc binary) a Podman environment stops before any
    cell with the fix. crun's own refusal, should it run, reads as a sentence with the fix
    (the fresh machine of 2026-11-28: "crun: cgroups in hybrid mode not supported, drop all
    controllers from cgroupv2")."""
    kind = runtimes.get("podman")
    assert kind.host_problems is podman.host_problems
    monkeypatch.setattr(podman, "cgroup_layout", lambda *a, **k: ("hybrid", ("hugetlb",)))
    # one shutil: podman found, runc not
    monkeypatch.setattr(podman.shutil, "which",
                        lambda name: None if name == "runc" else f"/usr/bin/{name}")
    with pytest.raises(preflight.PreflightError) as refused:
        preflight.runtime_problems("p", kind, {})
    assert "environment p:" in str(refused.value) and "apt-get install runc" in str(
        refused.value)
    said = podman.explain("p", {}, "Error: OCI runtime error: crun: cgroups in hybrid mode not "
                          "supported, drop all controllers from cgroupv2", "x.yaml")
    assert said is not None and "crun refuses this host's hybrid cgroups" in said
    assert "apt-get install runc" in said


def test_a_charliecloud_refusal_is_a_sentence():
    said = runtimes.charliecloud.explain(
        "ch", {}, "ch-run[1]: error: can't stat: /x: No such file or directory (ch_core.c:255 2)",
        "x.yaml")
    assert said.startswith("environment ch: Charliecloud (ch-run) refused to start")
    assert "provide rule" in said
    assert runtimes.charliecloud.explain("ch", {}, "Traceback: the workload's own", "x") is None


DOUBLES = REPO / "tests" / "doubles"


def test_apptainer_command_line_with_a_test_double(config_dict, results, monkeypatch):
    """Apptainer is absent here: tests/doubles/apptainer (a test double, not Apptainer)
    stands for the binary, to check the command the module builds, the hand-over step and
    a refusal's sentence. No Apptainer has run this."""
    monkeypatch.setenv("PATH", f"{DOUBLES}:{os.environ['PATH']}")
    log = results / "apptainer.args"
    monkeypatch.setenv("APPTAINER_DOUBLE_LOG", str(log))
    c = _campaign(config_dict, results, app=_image(kind="apptainer"))
    marker = c.paths.provided("app")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"name": DEMO_IMAGE, "id": "sha256:test",
                                  "runtime_ref": str(results / "app.sif"),
                                  "config": {"env": {}, "working_dir": "/"}}))
    work = results / "work"
    work.mkdir()
    launch = environments.Launch(argv=[sys.executable, "-c", "import os; print(os.environ["
                                       "'DO_NOT_TRACK'])"], probe_dir=REPO / "tests",
                                 work_dir=work, timeout_s=30, label="test/app")
    out = environments.launcher(c, "app").run(launch)
    assert out.returncode == 0 and out.output.strip() == "1"
    args = (work / "apptainer.args").read_text().split()
    assert args[:4] == ["exec", "--containall", "--cleanenv", "--no-home"]
    assert f"{REPO / 'tests'}:/containertax/probe:ro" in args
    assert f"{work}:/containertax/work:rw" in args
    assert out.resolved["runtime"]["version"] == "0.0.0-test-double"
    marker.write_text(json.dumps({"name": DEMO_IMAGE, "id": "sha256:test",
                                  "runtime_ref": str(results / "refuse.sif"),
                                  "config": {"env": {}, "working_dir": "/"}}))
    with pytest.raises(environments.EnvironmentFailure,
                       match="Apptainer refused to start: FATAL: could not open image"):
        environments.launcher(c, "app").run(launch)


def test_the_review_catches_a_wrong_runtime_label():
    """Planted: the system table labels Podman's version 'Docker Engine' (what the paper
    once printed); the review names both the wrong label and the runtime left unnamed."""
    from containertax.publishing.review import check_runtime_labels

    ran = {"Podman": {"4.3.1"}, "Docker Engine": {"20.10.24+dfsg1"}}
    right = "Item Value\nDocker Engine      20.10.24+dfsg1\nPodman     4.3.1\n"
    assert check_runtime_labels(right, ran) == []
    wrong = "Item Value\nDocker Engine      20.10.24+dfsg1; 4.3.1\n"
    problems = check_runtime_labels(wrong, ran)
    assert [p.where for p in problems] == ["Docker Engine", "Podman"]
    assert "names Docker Engine 4.3.1, but the records ran" in problems[0].message
    assert "never names it" in problems[1].message
    only_podman = check_runtime_labels("Docker Engine 4.3.1", {"Podman": {"4.3.1"}})
    assert any("Docker Engine 4.3.1" in p.message for p in only_podman)


@_skip_unless("podman")
@pytest.mark.skipif(os.geteuid() != 0, reason="rootful Podman needs root")
def test_a_podman_container_of_a_killed_launcher_is_removed(results):
    """Planted: a container labelled as made by this checkout's campaign by a process that
    no longer exists (pid 2**22 + 1 is above Linux's pid_max); the clean-up removes it and
    leaves one of a live launcher alone."""
    labels = launch.owner_labels("cleanup-test", results)
    gone = {**labels, "containertax.owner_pid": str(2**22 + 1)}
    made = []
    for name, owner in (("ctx-cleanup-gone", gone), ("ctx-cleanup-live", labels)):
        subprocess.run(["podman", "create", "--name", name,
                        *[f"--label={k}={v}" for k, v in owner.items()], DEMO_IMAGE, "true"],
                       check=True, capture_output=True)
        made.append(name)
    try:
        removed = runtimes.podman.cleanup({}, labels)
        assert removed == ["ctx-cleanup-gone"]
    finally:
        for name in made:
            subprocess.run(["podman", "rm", "-f", name], capture_output=True)


def test_a_stale_copy_of_the_image_is_named():
    """Planted: a hand-over (or the chroot's export) of an image id the engine no longer
    has under that name; the same id passes."""

    from containertax.runtimes import docker

    env = SimpleNamespace(id="podman-rootful", image="containertax-demo:bookworm")
    docker.copy_is_current(env, "sha256:a", "sha256:a", "p.json names", "that file")
    with pytest.raises(launch.EnvironmentFailure, match=re.escape(
            "environment podman-rootful: p.json names image id sha256:a, but "
            "'containertax-demo:bookworm' is now sha256:b. Delete that file to hand over the "
            "current image.")):
        docker.copy_is_current(env, "sha256:a", "sha256:b", "p.json names",
                               "that file to hand over the current image")
