"""Issues #35 and #44: `mounts: ['/:/host']` in a Docker environment was accepted and the
host's root mounted read-write into the container; later /etc read-write, the Docker
socket, /proc, /dev, /root, the checkout's src/, another campaign's results and the
campaign's own raw/ passed too. Now `check` (config validation) refuses each, naming the
key, what it exposes and the fix, unless environments.<id>.mount_reasons declares the
mount with a reason (which the paper prints); a read-write mount of the campaign's own
records is refused even then. Variable names and values, the probe's interpreter and the
image are checked too: `A=B`, a NUL byte, ';' in a name and shell syntax in `python` or
`image` passed check before (a NUL ended in a traceback at preflight)."""

from __future__ import annotations

import pytest
import yaml

from containertax import cli
from containertax.campaign import config as config_mod
from tests.conftest import REPO, demo_config


def _moved(mounts):
    """The declared differences of mounts at another path than their host folder's."""
    return {f"path:{m.split(':')[0]}": "on purpose" for m in mounts
            if m.split(':')[0] != m.split(':')[1]}


def _check(tmp_path, mounts=None, reasons=None, **env):
    cfg = demo_config()
    docker = cfg["environments"]["docker"]
    if mounts is not None:
        docker["mounts"] = mounts
    if reasons is not None:
        docker["mount_reasons"] = reasons
        # a host folder at another path is a difference to declare too (campaign/parity.py)
        docker["differences"].update(_moved(mounts or []))
    docker.update(env)
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return cli.main(["check", str(path), "-d", str(tmp_path)])


@pytest.mark.parametrize("spec,what", [
    ("/:/host", "the host's root"),
    ("/:/host:ro", "the host's root"),
    ("/.:/h:rw", "the host's root"),
    ("/etc:/host-etc", "the host's configuration"),
    ("/etc/ssl:/ssl:ro", "the host's configuration"),
    ("/var/run/docker.sock:/var/run/docker.sock", "the Docker socket"),
    ("/run:/run", "the Docker socket"),
    ("/proc:/hostproc:ro", "the host's processes"),
    ("/dev:/hostdev", "the host's devices"),
    ("/root:/r", "root's home folder"),
    (f"{REPO}/src:/src:ro", "the checkout"),
    ("{tmp}:/work", "the campaign's own records"),
    ("{tmp}/results:/r:ro", "the campaign's own records"),
    ("{tmp}/results/demo:/r", "the campaign's own records"),
    ("{tmp}/results/demo/raw:/raw", "the campaign's own records"),
    ("{tmp}/results/other:/o", "a results folder"),
], ids=["root", "root-ro", "root-dot", "etc", "etc-inside", "docker-sock", "run-holds-sock",
        "proc", "dev", "root-home", "checkout-src", "workdir", "results", "campaign", "raw",
        "other-campaign"])
def test_dangerous_mounts_are_refused(tmp_path, capsys, spec, what):
    spec = spec.format(tmp=tmp_path)
    assert _check(tmp_path, [spec]) == 1
    err = capsys.readouterr().err
    assert "environments.docker.mounts[0]" in err and what in err, err
    assert "mount_reasons" in err and "Traceback" not in err


def test_narrow_mounts_pass_and_a_declared_reason_allows_on_purpose(tmp_path, capsys):
    assert _check(tmp_path, ["/usr:/usr:ro", "/opt/x:/opt/x:ro"]) == 0
    # at another path, a host folder is a difference the environment declares (#40)
    assert _check(tmp_path, ["/opt/x:/x:ro"], {}) == 0
    why = "the host's software reads its linker cache there"
    assert _check(tmp_path, ["/etc:/etc:ro"], {"/etc": why}) == 0
    assert _check(tmp_path, ["/:/host:ro"], {"/": "reads the host on purpose"}) == 0
    assert _check(tmp_path, [f"{tmp_path}/results/other:/o"], {
        f"{tmp_path}/results/other": "reads another campaign's inputs"}) == 0
    capsys.readouterr()


def test_own_records_read_write_are_refused_even_with_a_reason(tmp_path, capsys):
    raw = f"{tmp_path}/results/demo/raw"
    assert _check(tmp_path, [f"{raw}:/raw"], {raw: "the workload reads its own history"}) == 1
    err = capsys.readouterr().err
    assert "read-write" in err and f"{raw}:/raw:ro" in err
    assert _check(tmp_path, [f"{raw}:/raw:ro"], {raw: "the workload reads its history"}) == 0


def test_a_reason_without_its_mount_and_the_old_key_are_named(tmp_path, capsys):
    assert _check(tmp_path, ["/usr:/usr:ro"], {"/etc": "declared but not mounted"}) == 1
    assert "mount_reasons./etc': no mount of /etc" in capsys.readouterr().err
    assert _check(tmp_path, ["/usr:/usr:ro"], mounts_above_results=True) == 1
    assert "replaced by mount_reasons" in capsys.readouterr().err


@pytest.mark.parametrize("key,value,words", [
    ("env", {"A=B": "1"}, "variable name 'A=B'"),
    ("env", {"A;B": "1"}, "variable name 'A;B'"),
    ("env", {"A\0B": "1"}, "variable name"),
    ("env", {"1A": "1"}, "variable name '1A'"),
    ("env", {"OK": "a\0b"}, "NUL byte"),
    ("python", "python3; touch /tmp/owned", "not a plain interpreter path"),
    ("python", "$(id)", "not a plain interpreter path"),
    ("image", "demo:1 && rm -rf /", "not an image reference"),
], ids=["name-equals", "name-semicolon", "name-nul", "name-digit", "value-nul",
        "python-semicolon", "python-subst", "image-shell"])
def test_variables_interpreter_and_image_are_checked(tmp_path, capsys, key, value, words):
    assert _check(tmp_path, **{key: value}) == 1
    err = capsys.readouterr().err
    assert f"environments.docker.{key}" in err and words in err, err
    assert "Traceback" not in err


def test_reasons_are_words_outside_the_hash_and_the_pin(tmp_path):
    """A committed campaign given a reason for its /etc mount stays the campaign its
    records name (same config hash, same pinned identity)."""
    cfg = demo_config()
    cfg["environments"]["docker"]["mounts"] = ["/etc:/etc:ro"]
    before = config_mod.load_campaign(
        {**cfg, "environments": {**cfg["environments"], "docker": {
            **cfg["environments"]["docker"], "mount_reasons": {"/etc": "why it is here"}}}},
        "a.yaml", tmp_path)
    cfg["environments"]["docker"]["mount_reasons"] = {"/etc": "another reason, same mount"}
    after = config_mod.load_campaign(cfg, "a.yaml", tmp_path)
    assert before.config_hash() == after.config_hash()
    assert config_mod.identity(before) == config_mod.identity(after)
