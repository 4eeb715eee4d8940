"""The offline bundle (scripts/offline-bundle.sh, tools/offline_bundle.py): its manifest,
its checks on the node, and (slow) a real bundle built here and installed offline."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "offline-bundle.sh"

_spec = importlib.util.spec_from_file_location(
    "offline_bundle", REPO / "tools" / "offline_bundle.py"
)
ob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ob)


def bundle_cli(*args: str, python: str = sys.executable, env: dict | None = None):
    full_env = {**os.environ, "PYTHON": python, **(env or {})}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full_env, timeout=900
    )


def tiny_wheel(folder: Path, name: str = "tinypkg", version: str = "1.0", requires=()) -> Path:
    """A pure-Python wheel with one module, written by hand (no network, no build)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}.py", "VALUE = 42\n")
        zf.writestr(f"{info}/METADATA", meta)
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "")
    return path


def handmade_bundle(root: Path, docker: str = "none", requires=(), **header) -> Path:
    tiny_wheel(root / "wheels", requires=requires)
    values = {
        "python": ob.host_version(),
        "platform": "linux_x86_64",
        "arch": ob.host_arch(),
        "docker": docker,
        "requirements": '["tinypkg"]',
        **header,
    }
    ob.write_manifest(root, values)
    return root


# ------------------------------------------------------------------ fast


def test_manifest_catches_a_damaged_missing_or_added_file(tmp_path):
    root = handmade_bundle(tmp_path / "b")
    assert bundle_cli("verify", str(root)).returncode == 0
    wheel = next((root / "wheels").glob("*.whl"))
    data = bytearray(wheel.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte
    wheel.write_bytes(bytes(data))
    out = bundle_cli("verify", str(root))
    assert out.returncode == 1
    assert f"{wheel}: sha256 differs" in out.stderr
    wheel.unlink()
    (root / "wheels" / "planted.whl").write_bytes(b"x")
    out = bundle_cli("install", str(root), str(tmp_path / "site"), "--no-docker")
    assert out.returncode == 1
    assert f"{wheel}: missing" in out.stderr
    assert "planted.whl: not in" in out.stderr
    assert not (tmp_path / "site").exists()  # nothing installed from a damaged bundle
    (root / "TARGET").unlink()
    out = bundle_cli("verify", str(root))
    assert out.returncode == 1 and "TARGET: missing" in out.stderr


def test_install_refuses_another_python(tmp_path):
    root = handmade_bundle(tmp_path / "b", python="3.99")
    out = bundle_cli("install", str(root), str(tmp_path / "site"), "--no-docker")
    assert out.returncode == 1
    assert (
        f"the bundle is for Python 3.99, this python ({sys.executable}) is {ob.host_version()}"
        in out.stderr
    )
    assert f"build DIR {ob.host_version()}" in out.stderr


def test_install_into_a_target_then_no_engine_and_none_in_the_bundle(tmp_path):
    root = handmade_bundle(tmp_path / "b")
    site = tmp_path / "site"
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no.sock", "PIP_FIND_LINKS": "/nonexistent"}
    out = bundle_cli("install", str(root), str(site), env=env)
    assert (site / "tinypkg.py").exists()  # the wheels go in first
    assert out.returncode == 1
    assert f"no Docker Engine answers at {tmp_path}/no.sock and the bundle has none" in out.stderr
    assert "--docker static" in out.stderr and "--no-docker" in out.stderr
    out = bundle_cli("install", str(root), str(site), "--no-docker", env=env)
    assert out.returncode == 0, out.stderr
    assert "tinypkg" in out.stdout and "met" in out.stdout


def test_install_names_what_the_node_still_lacks(tmp_path):
    root = handmade_bundle(
        tmp_path / "b",
        requires=["surely-absent-package>=1", "neither-this; extra == 'x'"],
        have="node.txt",
    )
    out = bundle_cli("install", str(root), str(tmp_path / "site"), "--no-docker")
    assert out.returncode == 1
    assert "surely-absent-package>=1 (needed by tinypkg 1.0): not installed" in out.stderr
    assert "neither-this" not in out.stderr  # an extra nobody asked for


def test_a_dependency_declared_not_needed_may_be_absent_but_never_wrong(tmp_path):
    # the H100's first install: snakemake needs pulp (only its ILP scheduler imports it,
    # and the profiles use the greedy one) and packaging < 26 (26.3 is there)
    dists = {"snakemake": ("9.27.1", ["pulp<3.4,>=2.3.1", "packaging<26,>=24.0"]),
             "packaging": ("26.3", [])}
    both = ["packaging<26,>=24.0 (needed by snakemake 9.27.1): packaging 26.3 is there",
            "pulp<3.4,>=2.3.1 (needed by snakemake 9.27.1): not installed"]
    assert ob.unmet(["snakemake"], dists) == both
    assert ob.unmet(["snakemake"], dists, {"pulp": "greedy scheduler"}) == both[:1]
    assert ob.unmet(["snakemake"], dists, {"pulp": "-", "packaging": "-"}) == both[:1]
    listed = tmp_path / "not-needed"
    listed.write_text("# why each\npulp  # only the ILP scheduler\n")
    assert ob.read_not_needed(listed) == {"pulp": "only the ILP scheduler"}
    listed.write_text("pulp\n")
    with pytest.raises(ob.BundleError, match=r"not-needed:1: pulp: say after '#' why"):
        ob.read_not_needed(listed)
    # installed: the manifest's not_needed lets the install pass, and says so
    root = handmade_bundle(tmp_path / "b", requires=["surely-absent-package>=1"], have="n",
                           not_needed='{"surely-absent-package": "planted"}')
    out = bundle_cli("install", str(root), str(tmp_path / "site"), "--no-docker")
    assert out.returncode == 0, out.stderr
    assert "surely-absent-package: left out, not needed here (planted)" in out.stdout


def test_unmet_follows_extras_markers_and_versions():
    dists = {
        "top": ("1.0", ["dep>=2", "opt; extra == 'more'", "old; python_version < '3'"]),
        "dep": ("1.5", []),
    }
    assert ob.unmet(["top"], dists) == ["dep>=2 (needed by top 1.0): dep 1.5 is there"]
    problems = ob.unmet(["top[more]"], dists)
    assert 'opt; extra == "more" (needed by top 1.0): not installed' in problems
    dists["dep"] = (None, [])  # version unknown (a bare name in --have): trusted
    assert ob.unmet(["top"], dists) == []


def test_have_file_and_platform_arguments(tmp_path):
    have = tmp_path / "have.txt"
    have.write_text("# comment\nNumPy==2.5.2\npulp\n\ntyping_extensions == 4.1\n")
    assert ob.read_have(have) == {"numpy": "2.5.2", "pulp": None, "typing-extensions": "4.1"}
    have.write_text("torch @ file:///wheels/torch.whl\n")
    with pytest.raises(ob.BundleError, match=r"have.txt:1: .* pip .*list --format=freeze"):
        ob.read_have(have)
    tags = ob.expand_platforms(["manylinux_2_28_x86_64"])
    assert tags[0] == "manylinux_2_28_x86_64" and tags[-1] == "manylinux1_x86_64"
    assert "manylinux2014_x86_64" in tags and "manylinux2010_x86_64" in tags
    assert ob.expand_platforms(["manylinux2014_aarch64"])[:2] == [
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
    ]
    assert ob.target_arch(["manylinux_2_28_aarch64", "manylinux2014_aarch64"]) == "arm64"
    out = bundle_cli("build", str(tmp_path / "x"), "3.12", "win_amd65")
    assert (
        out.returncode == 1 and "platform 'win_amd65': cannot tell its architecture" in out.stderr
    )
    out = bundle_cli("build", str(tmp_path / "x"), "3.12", "--docker", "podman")
    assert out.returncode == 2 and "invalid choice: 'podman'" in out.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    out = bundle_cli("build", str(tmp_path / "full"))
    assert out.returncode == 1 and "exists and is not empty" in out.stderr


def test_gpu_machine_requirements_are_project_dependencies():
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    deps = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]: d for d in deps}
    lines = ob.read_requirement_lines(REPO / "scripts" / "gpu-machine.requirements")
    for line in lines:
        name = re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]
        assert deps.get(name) == line, f"{line}: pyproject.toml has {deps.get(name)}"
    assert ob.read_have(REPO / "scripts" / "gpu-machine.have")["numpy"] == "2.5.2"


# ------------------------------------------------------------------ slow: real bundles


@pytest.mark.slow
def test_project_bundle_with_debian_engine_installs_offline_into_a_fresh_venv(tmp_path):
    """Everything the project needs, from the bundle alone: pip's configuration and PIP_*
    variables are ignored and --no-index is given, so a missing wheel fails the install."""
    if shutil.which("apt-get") is None:
        pytest.skip("needs apt-get (Debian) for the engine's packages")
    root = tmp_path / "bundle"
    out = bundle_cli("build", str(root), "--docker", "debian")
    assert out.returncode == 0, out.stdout + out.stderr
    header, files = ob.read_manifest(root)
    assert header["docker"] == "debian" and header["python"] == ob.host_version()
    debs = {Path(name).name.split("_")[0] for name in files if name.startswith("docker/")}
    assert {"docker.io", "containerd", "runc"} <= debs
    assert "libc6" not in debs and "dpkg" not in debs  # minimal Debian has those
    assert any(n.startswith("wheels/containertax-") for n in files)
    for rel, digest in files.items():
        assert ob.sha256(root / rel) == digest

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "/nonexistent"}
    out = bundle_cli(
        "install", str(root), "--no-docker", python=str(venv / "bin" / "python"), env=env
    )
    assert out.returncode == 0, out.stdout + out.stderr
    check = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import containertax, snakemake, docker, pandas, snakemake_executor_plugin_slurm",
        ],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr

    wheel = next((root / "wheels").glob("snakemake-*.whl"))
    with wheel.open("r+b") as f:  # a damaged copy
        f.seek(100)
        f.write(b"\0" * 16)
    out = bundle_cli("install", str(root), "--no-docker", python=str(venv / "bin" / "python"))
    assert out.returncode == 1 and f"{wheel}: sha256 differs" in out.stderr


@pytest.mark.slow
def test_static_engine_kit_runs_and_have_leaves_out(tmp_path):
    """The GPU machine's kind of bundle: a requirement subset, what the node has left out,
    and the static engine kit (its dockerd runs from the kit's own libraries)."""
    if shutil.which("apt-get") is None:
        pytest.skip("needs apt-get (Debian) for the engine's packages")
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("jsonschema>=4\n")
    have = tmp_path / "have.txt"
    have.write_text("attrs\n")
    root = tmp_path / "bundle"
    # xz preset 0: the same archive as the default 6 (tarfile's w:xz), in 6 CPU-s, not 70
    out = bundle_cli(
        "build", str(root), "--docker", "static", "--requirements", str(reqs), "--have", str(have),
        "--xz-preset", "0",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "xz preset 0)" in out.stdout
    header, files = ob.read_manifest(root)
    assert header["docker"] == "static" and header["have"].startswith(f"{have} (1 left out: attrs")
    assert not any("attrs-" in name for name in files)
    assert any(name.startswith("wheels/jsonschema-") for name in files)

    kit = tmp_path / "kit"
    with tarfile.open(root / "docker" / "docker-kit.tar.xz") as tar:
        tar.extractall(kit)
    assert {p.name for p in (kit / "bin").iterdir()} == {
        "dockerd",
        "containerd",
        "containerd-shim-runc-v2",
        "runc",
    }
    env = {**os.environ, "LD_LIBRARY_PATH": str(kit / "lib")}
    for binary in ("dockerd", "containerd", "runc"):
        version = subprocess.run(
            [str(kit / "bin" / binary), "--version"], env=env, capture_output=True, text=True
        )
        assert version.returncode == 0, version.stderr

    # a fresh venv lacks attrs, which the bundle left out: the install says so
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    out = bundle_cli(
        "install",
        str(root),
        str(tmp_path / "site"),
        "--no-docker",
        python=str(venv / "bin" / "python"),
    )
    assert out.returncode == 1
    assert re.search(r"attrs>=\S+ \(needed by jsonschema [\d.]+\): not installed", out.stderr)


# ---------------------------------------------------- what the GPU machine imports to plan

# The planning run on the GPU machine (workflow/rules/common.smk: the config read, the
# campaign loaded, its design expanded) with only what scripts/gpu-machine.requirements
# bundles and scripts/gpu-machine.have says the machine has: every other installed package
# is made unimportable. A visit of config/h200-factorial.yaml failed there with "No module
# named 'pyDOE3'" (2026-11-28) because the factorial design was planned with a package the
# bundle did not carry.
_PLAN = r"""
import importlib.abc, sys, yaml
blocked = set(filter(None, sys.argv[1].split(",")))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from containertax.campaign import config
for path in sys.argv[2:]:
    raw = yaml.safe_load(open(path))
    if "campaign" not in raw:  # a study's config: planned by workflow/study.smk
        continue
    try:
        config.load_campaign(raw, path)
    except ModuleNotFoundError as exc:
        print(f"{path}: {exc}")
"""


def _gpu_machine_packages(requirements: list[str]) -> set[str]:
    """The requirements, their dependencies (markers for this Python) and the machine's own."""
    Requirement, _, _ = ob._packaging()
    dists = ob.installed_dists(sys.path)
    have = set(ob.read_have(REPO / "scripts" / "gpu-machine.have"))
    allowed = {"containertax", "pip", "setuptools"}
    todo = [Requirement(r) for r in requirements] + [Requirement(n) for n in have]
    while todo:
        req = todo.pop()
        name = ob.normalize(req.name)
        if name in allowed or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        allowed.add(name)
        todo += [Requirement(line) for line in dists.get(name, (None, []))[1]]
    return allowed


def _blocked_modules(requirements: list[str]) -> list[str]:
    from importlib import metadata

    allowed = _gpu_machine_packages(requirements)
    return sorted(top for top, names in metadata.packages_distributions().items()
                  if not any(ob.normalize(n) in allowed for n in names))


def _plan_every_config(requirements: list[str]) -> list[str]:
    configs = sorted(str(p) for p in (REPO / "config").glob("*.yaml"))
    out = subprocess.run([sys.executable, "-c", _PLAN, ",".join(_blocked_modules(requirements)),
                          *configs], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def test_the_gpu_machine_plans_every_committed_config_with_what_it_is_given():
    lines = ob.read_requirement_lines(REPO / "scripts" / "gpu-machine.requirements")
    assert _plan_every_config(lines) == []
    # planted: the bundle before pyDOE3 was added fails the factorial configs, as on the H200
    missing = _plan_every_config([line for line in lines if not line.startswith("pyDOE3")])
    assert any(line.startswith(str(REPO / "config" / "demo-factorial.yaml")) and "pyDOE3" in line
               for line in missing), missing
