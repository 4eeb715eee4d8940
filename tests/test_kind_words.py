"""A kind's meaning in its module (issue 43): what the paper says of an environment is what
its kind renders from the options that ran; the review reads a runtime's version only where
the paper names one; an edited kind rebuilds the paper (tests/test_analysis_reruns.py)."""

from __future__ import annotations

import dataclasses
import shutil

from containertax import runtimes
from containertax.publishing import facts
from containertax.publishing.review import check_runtime_labels
from containertax.runtimes import podman
from containertax.runtimes.base import Entry, Ran
from tests.conftest import REPO


def test_a_runtime_named_like_its_environment_raises_no_false_version_warning():
    """A kind whose runtime is named like the environment that runs it: the tables print
    the environment's numbers after its id, which the review once read as three versions
    the records never ran. Planted: a system table naming a version that did not run is
    still caught, and a recorded version never named."""
    system = "Item Value\nPodman 4.3.1\n"
    tables = ("Podman 0.52 [0.40, 0.61]\nPodman 1.7 s\nmodel Podman 12.25 [11.0, 13.1] %\n")
    ran = {"Podman": {"4.3.1"}}
    assert len(check_runtime_labels(system + tables, ran)) == 3  # the defect, as measured
    assert check_runtime_labels(system + tables, ran, {"Podman"}) == []
    wrong = check_runtime_labels("Item Value\nPodman 4.4.0\n" + tables, ran, {"Podman"})
    assert [p.message for p in wrong] == [
        "the paper names Podman 4.4.0, but the records ran Podman 4.3.1",
        "the records ran Podman 4.3.1; the paper never names it with that version"]


def _record(kind: str, spec: dict, resolved: dict, env_id: str = "env") -> dict:
    return {"environment": {"id": env_id, "kind": kind, "spec": spec, "resolved": resolved},
            "telemetry": {}}


def _bubblewrap(ran: Ran) -> Entry:
    """A toy kind as a contributor wrote one (bwrap): its argv names the image before its
    set-up flags (`--ro-bind IMAGE /`), its network shared unless options.network: none."""
    flags = ("--unshare-pid", "--die-with-parent") + (
        ("--unshare-net",) if ran.options.get("network") == "none" else ())
    shared = "" if ran.options.get("network") == "none" else "; host network"
    return Entry(software=f"root filesystem {ran.image}", mounts=(), gpu="none",
                 isolation=f"mount and PID namespaces{shared}", flags=flags)


def test_the_environments_table_prints_what_the_kind_says(monkeypatch):
    """Defects 1 and 5: the table read a command-line kind's flags from its recorded argv
    up to the first word equal to the image, so bwrap's `--ro-bind IMAGE /` ended the
    reading and its flags printed 'none'; its isolation words were one static string
    ('host network unless network: none'). Now the kind renders its entry from the
    options that ran, whatever its argv's order."""
    toy = dataclasses.replace(podman.RUNTIME, kind="bubblewrap", describe=_bubblewrap)
    monkeypatch.setitem(runtimes.REGISTRY, "bubblewrap", toy)
    image = "/results/demo/images/demo"
    argv = ["bwrap", "--ro-bind", image, "/", "--unshare-pid", "--die-with-parent",
            "--unshare-net", "python3", "-c", "pass"]
    row = facts.environment_row(_record("bubblewrap", {"options": {"network": "none"}},
                                        {"command": argv, "image": {"runtime_ref": image,
                                                                    "name": "demo"}}))
    assert row["flags"] == "--unshare-pid --die-with-parent --unshare-net"
    assert row["isolation"] == "mount and PID namespaces"
    assert row["software"] == "root filesystem demo"
    shared = facts.environment_row(_record("bubblewrap", {}, {"image": {"name": "demo"}}))
    assert shared["isolation"] == "mount and PID namespaces; host network"
    assert shared["flags"] == "--unshare-pid --die-with-parent"


def test_publishing_decodes_no_kind():
    """facts.py once decoded Docker's SDK arguments and Podman, ch-run and Apptainer flag
    syntax; a kind's meaning is its module's (Runtime.describe)."""
    import re

    source = (REPO / "src/containertax/publishing/facts.py").read_text()
    assert re.findall(r"create_kwargs|\"command\"|\"--[a-z]|ipc_mode|network_mode", source) == []


def test_isolation_words_come_from_the_options_that_ran():
    """Defect 5: Podman's words were static but for two replacements in publishing; a
    rootless container's user namespace went unsaid and `network: none` read as a network
    namespace like any other. Docker's come from the engine's arguments it recorded."""
    none = runtimes.get("podman").entry({"spec": {"options": {"network": "none",
                                                              "rootless": "containertax"}},
                                         "resolved": {"limits": {"nofile": [1024, 4096]}}})
    assert none.isolation == ("namespaces (user, mount, PID, IPC, UTS, loopback-only "
                              "network) and cgroups; rootless, as host user containertax")
    assert none.flags == ("--network=none", "--ulimit=nofile=1024:4096")
    host = runtimes.get("podman").entry({"spec": {"options": {"network": "host",
                                                              "ipc": "host"}},
                                         "resolved": {"cpuset_cpus": "2-3"}})
    assert host.isolation == "namespaces (mount, PID, UTS) and cgroups"
    assert host.flags == ("--network=host", "--ipc=host", "--cpuset-cpus=2-3")
    docker = runtimes.get("docker").entry({"spec": {}, "resolved": {"create_kwargs": {
        "network_mode": "host", "security_opt": ["seccomp=unconfined"]}}})
    assert docker.isolation == ("namespaces (mount, PID, IPC, UTS) and cgroups; no seccomp "
                                "filter")
    assert docker.flags == ("--network host", "--security-opt seccomp=unconfined")


def test_the_chroot_says_the_limits_it_ran_under():
    """The chroot applies options.ulimits with prlimit (issue #45); its entry printed no
    flags, so the environments table said the chroot ran under none. The flags are
    prlimit's, the words the chroot's shell ran; a record without limits prints none."""
    chroot = runtimes.get("chroot")
    limited = chroot.entry({"spec": {}, "resolved": {
        "ulimits": {"stack": [67108864, 67108864], "memlock": [-1, -1]}}})
    assert limited.flags == ("prlimit --memlock=unlimited:unlimited "
                             "--stack=67108864:67108864",)
    assert chroot.entry({"spec": {}, "resolved": {}}).flags == ()


def test_the_paper_rules_take_every_kind_module_as_input(tmp_path):
    """Defect 3, in one dry run (tests/test_analysis_reruns.py edits a kind's module on a
    built paper): the rules that print a kind's words (tables, numbers, pdf) list every
    module of runtimes/ among their inputs, so an edited kind plans the paper again;
    before, `snakemake -n` said nothing to do."""
    import subprocess
    import sys

    shutil.copytree(REPO / "results" / "h100-matmul" / "raw",
                    tmp_path / "results" / "h100-matmul" / "raw")
    plan = subprocess.run(
        [sys.executable, "-m", "snakemake", "paper", "-n", "--cores", "1", "--snakefile",
         str(REPO / "Snakefile"), "--directory", str(tmp_path), "--configfile",
         str(REPO / "config" / "h100-matmul.yaml")], capture_output=True, text=True,
        timeout=600)
    assert plan.returncode == 0, plan.stderr[-2000:]
    inputs = {}
    for rule, line in zip(plan.stdout.splitlines(), plan.stdout.splitlines()[1:],
                          strict=False):
        if rule.startswith(("rule ", "localrule ")) and line.strip().startswith("input:"):
            inputs[rule.split()[-1].rstrip(":")] = line
    kinds = sorted((REPO / "src" / "containertax" / "runtimes").glob("*.py"))
    for rule in ("tables", "numbers", "pdf"):
        missing = [p.name for p in kinds if str(p) not in inputs[rule]]
        assert missing == [], f"rule {rule} does not depend on runtimes/{missing}"
