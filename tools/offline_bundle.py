"""An offline bundle for a node without network: wheels and, where needed, the Docker Engine.

Standard library only (plus pip, which it runs): `install` runs on the node before anything
of the project is importable. `scripts/offline-bundle.sh` is the entry point:

    offline-bundle.sh build DIR [PYTHON_VERSION [PLATFORMS]] [--docker none|static|debian]
                                [--requirements FILE] [--have FILE]
                                [--not-needed FILE] [--xz-preset 0-9]     # with network
    offline-bundle.sh install DIR [TARGET] [--no-docker]                  # on the node
    offline-bundle.sh verify DIR

build:
  wheels/   the project with its `slurm` extra and every dependency (or, with --requirements,
            the requirement lines of FILE and their dependencies), resolved here with
            `pip wheel`; each platform-specific wheel is fetched again for the node's Python
            (e.g. 3.12) and PLATFORMS (comma-separated, e.g.
            manylinux_2_28_aarch64,manylinux2014_aarch64) when these differ from this
            machine's. --have FILE (the node's `python3 -m pip list --format=freeze`; a bare
            name means "present, version unknown") leaves out what the node already has, and
            fails when a version the node has does not satisfy a requirement of the bundle.
            --not-needed FILE (`name  # why` lines) leaves out dependencies the node never
            imports (e.g. pulp: only Snakemake's ILP scheduler uses it) and lets them be
            absent at install.
  docker/   --docker static: docker-kit.tar.xz (dockerd, containerd, its runc shim, runc,
            libdevmapper and libseccomp, from Debian's packages for the target
            architecture; --xz-preset, default 6); the node needs glibc and the libraries
            any systemd-based distribution has (libsystemd, libcap, libselinux, libudev,
            libgcrypt, ...).
            --docker debian: the .deb files of docker.io, containerd, runc and every package
            they depend on (recursively) that a minimal Debian (Priority required, essential) lacks,
            for the target architecture, from this machine's apt sources; for a node running
            the same Debian release. --docker none (the default): no engine.
  TARGET    the manifest: python, platform, arch, docker, requirements, have, not_needed, the
            sha256 of every other file in DIR.
install: checks every sha256 (and that no file was added), the Python version, installs the
  wheels with `pip install --no-index` (pip's configuration and PIP_* variables ignored, so
  nothing but the bundle is used) into TARGET (a folder to put on PYTHONPATH) or the running
  python, checks that every requirement is met on the node, and, unless --no-docker or an
  engine answers already, installs and starts the bundle's Docker Engine.
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import os
import platform as platform_module
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = "TARGET"
DOCKER_MODES = ("none", "static", "debian")
ENGINE_PACKAGES = ("docker.io", "containerd", "runc")
# the static kit: binaries from ENGINE_PACKAGES and the libraries a node may lack
KIT_BINARIES = (
    "usr/sbin/dockerd",
    "usr/bin/containerd",
    "usr/bin/containerd-shim-runc-v2",
    "usr/sbin/runc",
)
KIT_LIBRARY_PACKAGES = ("libdevmapper1.02.1", "libseccomp2")
DEB_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
KIT_ROOT = Path(os.environ.get("CONTAINERTAX_DOCKER_ROOT", "/opt/containertax-docker"))


class BundleError(Exception):
    """A problem with the bundle, its input or the node, stated for the user."""


def log(message: str) -> None:
    print(f"offline-bundle: {message}", flush=True)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def run(argv: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(argv, text=True, capture_output=True, **kwargs)
    except FileNotFoundError as exc:
        raise BundleError(f"{what}: {argv[0]} not found") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise BundleError(f"{what} failed ({' '.join(argv[:4])} ...):\n{tail}")
    return result


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def host_version() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def host_arch() -> str:
    machine = platform_module.machine()
    return DEB_ARCH.get(machine, machine)


def target_arch(platforms: list[str]) -> str:
    if not platforms:
        return host_arch()
    arches = set()
    for tag in platforms:
        match = re.search(r"(x86_64|amd64|aarch64|arm64)$", tag)
        if not match:
            raise BundleError(
                f"platform {tag!r}: cannot tell its architecture (a tag ending in x86_64 or "
                "aarch64, e.g. manylinux_2_28_x86_64)"
            )
        arches.add(DEB_ARCH[match.group(1)])
    if len(arches) > 1:
        raise BundleError(f"PLATFORMS {','.join(platforms)} name several architectures")
    return arches.pop()


LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def expand_platforms(platforms: list[str]) -> list[str]:
    """Each manylinux_2_N tag with every older glibc's (and the legacy aliases), newest first:
    a node with glibc 2.N runs them all, and pip's --platform matches tags exactly."""
    out: list[str] = []
    for tag in platforms:
        match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", tag)
        legacy = {v: k for k, v in LEGACY_MANYLINUX.items()}
        alias = re.fullmatch(r"(manylinux(?:2014|2010|1))_(\w+)", tag)
        if alias:
            match = re.fullmatch(
                r"manylinux_2_(\d+)_(\w+)", f"manylinux_2_{legacy[alias[1]]}_{alias[2]}"
            )
        if not match:
            out.append(tag)
            continue
        newest, arch = int(match[1]), match[2]
        for minor in range(newest, 4, -1):
            out.append(f"manylinux_2_{minor}_{arch}")
            if minor in LEGACY_MANYLINUX:
                out.append(f"{LEGACY_MANYLINUX[minor]}_{arch}")
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------- requirements


def _packaging():
    """packaging's Requirement and Version: pip's vendored copy (pip is on every node)."""
    try:
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - pip without its vendored packaging
        from packaging.requirements import Requirement
        from packaging.version import InvalidVersion, Version
    return Requirement, Version, InvalidVersion


def read_requirement_lines(path: Path) -> list[str]:
    lines = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            if line.startswith("-"):
                raise BundleError(
                    f"{path}: {line!r}: only requirement lines (name and version specifiers)"
                )
            lines.append(line)
    if not lines:
        raise BundleError(f"{path}: no requirement lines")
    return lines


def read_have(path: Path) -> dict[str, str | None]:
    """The node's packages: `name==version` lines (pip list --format=freeze) or bare names."""
    have: dict[str, str | None] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*(\S+))?", line)
        if not match:
            raise BundleError(
                f"{path}:{number}: {line!r} is neither `name==version` (as `python3 -m pip "
                "list --format=freeze` writes) nor a bare package name"
            )
        have[normalize(match.group(1))] = match.group(2)
    return have


def wheel_metadata(path: Path) -> tuple[str, str, list[str]]:
    """(name, version, Requires-Dist) of a wheel file."""
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(names) != 1:
            raise BundleError(f"{path}: not a wheel (no single .dist-info/METADATA)")
        meta = email.parser.Parser().parsestr(zf.read(names[0]).decode("utf-8"))
    return meta["Name"], meta["Version"], meta.get_all("Requires-Dist") or []


def read_not_needed(path: Path) -> dict[str, str]:
    """Packages a requirement names that this node never imports: `name  # why` lines."""
    found: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line, _, why = raw.partition("#")
        line = line.strip()
        if not line:
            continue
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", line):
            raise BundleError(f"{path}:{number}: {line!r} is not a package name")
        if not why.strip():
            raise BundleError(f"{path}:{number}: {line}: say after '#' why it is not needed")
        found[normalize(line)] = why.strip()
    return found


def unmet(requirements: list[str], dists: dict[str, tuple[str | None, list[str]]],
          not_needed: dict[str, str] | None = None) -> list[str]:
    """What `requirements` (and, recursively, their dependencies) lack among `dists`.

    dists: normalized name -> (version or None when unknown, Requires-Dist or [] when
    unknown). Markers are evaluated for the running Python, extras requested are followed.
    A package in not_needed may be absent (never a wrong version where it is there).
    """
    Requirement, Version, InvalidVersion = _packaging()
    problems: list[str] = []
    seen: set[tuple[str, frozenset]] = set()
    todo = [(Requirement(r), "the bundle's requirements", "") for r in requirements]
    while todo:
        req, needed_by, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = normalize(req.name)
        if name not in dists:
            if name not in (not_needed or {}):
                problems.append(f"{req} (needed by {needed_by}): not installed")
            continue
        version, requires = dists[name]
        if version is not None and req.specifier:
            try:
                ok = req.specifier.contains(Version(version), prereleases=True)
            except InvalidVersion:
                ok = True
            if not ok:
                problems.append(f"{req} (needed by {needed_by}): {name} {version} is there")
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        for line in requires:
            for wanted in ("", *sorted(req.extras)):
                dep = Requirement(line)
                if dep.marker is None and wanted:
                    continue
                todo.append((dep, f"{name} {version or ''}".strip(), wanted))
    return sorted(set(problems))


def installed_dists(paths: list[str]) -> dict[str, tuple[str | None, list[str]]]:
    """The distributions importable from `paths`, the first of each name winning."""
    from importlib import metadata

    dists: dict[str, tuple[str | None, list[str]]] = {}
    for dist in metadata.distributions(path=paths):
        name = dist.metadata["Name"]
        if name and normalize(name) not in dists:
            dists[normalize(name)] = (dist.version, dist.requires or [])
    return dists


# ---------------------------------------------------------------- build: wheels


def pip_env() -> dict[str, str]:
    """The environment for pip when only the bundle may count: no config, no PIP_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def build_wheels(
    wheels: Path,
    version: str,
    platforms: list[str],
    requirements: list[str] | None,
    have: dict[str, str | None] | None,
) -> tuple[list[str], list[str]]:
    """Fills `wheels`; returns (the requirement lines to install, the names left out)."""
    wheels.mkdir(parents=True)
    py = sys.executable
    if requirements is None:
        run(
            [py, "-m", "pip", "wheel", "-q", "-w", str(wheels), f"{REPO}[slurm]"],
            "pip wheel of the project",
        )
        install_lines = ["containertax[slurm]"]
    else:
        run(
            [py, "-m", "pip", "wheel", "-q", "-w", str(wheels), *requirements],
            "pip wheel of the requirements",
        )
        install_lines = list(requirements)
    if platforms or version != host_version():
        fetched = wheels.parent / "wheels.fetched"
        fetched.mkdir()
        for whl in sorted(wheels.glob("*.whl")):
            if whl.name.endswith("-none-any.whl"):
                continue
            name, ver = whl.name.split("-")[:2]
            argv = [
                py,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                str(fetched),
                "--python-version",
                version,
            ]
            for tag in expand_platforms(platforms):
                argv += ["--platform", tag]
            run(
                argv + [f"{name}=={ver}"],
                f"fetching {name} {ver} for Python {version} {','.join(platforms)}",
            )
            whl.unlink()  # (the fetched one may have the same name: an abi3 wheel)
        for whl in fetched.glob("*.whl"):
            whl.rename(wheels / whl.name)
        fetched.rmdir()
    dropped: list[str] = []
    if have is not None:
        dists: dict[str, tuple[str | None, list[str]]] = {}
        for whl in sorted(wheels.glob("*.whl")):
            name, ver, requires = wheel_metadata(whl)
            if normalize(name) in have:
                dropped.append(normalize(name))
                whl.unlink()
            else:
                dists[normalize(name)] = (ver, requires)
        for name, ver in have.items():
            dists.setdefault(name, (ver, []))
        problems = unmet(install_lines, dists)
        if problems:
            raise BundleError(
                "the node's packages (--have) do not meet the bundle's requirements:\n  "
                + "\n  ".join(problems)
                + "\nremove those packages from the --have file so the bundle carries them"
            )
    return install_lines, sorted(dropped)


# ---------------------------------------------------------------- build: docker


def apt_get(arch: str, work: Path) -> list[str]:
    """apt-get (and apt-cache) for `arch`: this machine's own, or a private state for another."""
    if arch == host_arch():
        return []
    state = work / "apt-state"
    (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (work / "apt-cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    status = state / "status"
    status.touch()
    opts = [
        "-o",
        f"APT::Architecture={arch}",
        "-o",
        f"APT::Architectures={arch}",
        "-o",
        f"Dir::State={state}",
        "-o",
        f"Dir::State::status={status}",
        "-o",
        f"Dir::Cache={work / 'apt-cache'}",
    ]
    run(["apt-get", *opts, "update", "-q"], f"apt-get update for {arch}")
    return opts


def download_debs(packages: list[str], into: Path, opts: list[str]) -> None:
    into.mkdir(parents=True, exist_ok=True)
    run(["apt-get", *opts, "download", "-q", *packages], "apt-get download", cwd=into)


APT_DEPENDS = [
    "--no-recommends",
    "--no-suggests",
    "--no-conflicts",
    "--no-breaks",
    "--no-replaces",
    "--no-enhances",
]


def _direct_depends(names: list[str], opts: list[str]) -> dict[str, list[str]]:
    """Each package's dependencies as apt would pick them: the first of alternatives
    (`a | b`), and for a virtual package its first provider (never every provider, which
    may conflict with each other, e.g. libsystemd0 and libelogind0)."""
    out = run(["apt-cache", *opts, "depends", *APT_DEPENDS, *names], "apt-cache depends").stdout
    deps: dict[str, list[str]] = {}
    current = None
    in_alternatives = False  # the previous dependency line was `|Depends: ...`
    pending_virtual = False  # the chosen dependency is virtual: take its first provider
    for line in out.splitlines():
        if line and not line.startswith(" "):
            current = None if line.startswith("<") else line.strip()
            if current:
                deps.setdefault(current, [])
            in_alternatives = pending_virtual = False
            continue
        if current is None:
            continue
        match = re.match(r"^  (\|)?(?:Pre)?Depends: (\S+)$", line)
        if match:
            starts_group = not in_alternatives
            in_alternatives = bool(match.group(1))
            pending_virtual = False
            if starts_group:
                name = match.group(2).split(":")[0]
                if name.startswith("<"):
                    pending_virtual = True
                else:
                    deps[current].append(name)
        elif pending_virtual and line.startswith("    "):
            deps[current].append(line.strip().split(":")[0])
            pending_virtual = False
    return deps


def _closure(roots: list[str], opts: list[str], stop: set[str] = frozenset()) -> set[str]:
    seen: set[str] = set()
    todo = [r for r in roots if r not in stop]
    while todo:
        batch = sorted(set(todo) - seen)
        todo = []
        if not batch:
            break
        seen.update(batch)
        for deps in _direct_depends(batch, opts).values():
            todo += [d for d in deps if d not in seen and d not in stop]
    return seen


def deb_closure(opts: list[str]) -> list[str]:
    """ENGINE_PACKAGES and what they depend on, recursively, that a minimal Debian lacks:
    minimal = the packages of Priority required or Essential and their own dependencies
    (what debootstrap --variant=minbase installs, less apt)."""
    avail = run(["apt-cache", *opts, "dumpavail"], "apt-cache dumpavail").stdout
    base = set()
    for block in avail.split("\n\n"):
        fields = dict(re.findall(r"^([\w-]+): (.*)$", block, re.M))
        if "Package" in fields and (
            fields.get("Priority") == "required" or fields.get("Essential") == "yes"
        ):
            base.add(fields["Package"])
    if not base:
        raise BundleError("apt knows no package of Priority required: run apt-get update")
    minimal = _closure(sorted(base), opts)
    return sorted(_closure(list(ENGINE_PACKAGES), opts, stop=minimal))


# xz's own default: Debian 12's engine kit is 33.4 MiB (70 CPU-s on the 2-core machine), the
# GPU machine's whole bundle 43.9 MiB of the 64 MiB a device call carries; preset 0 takes
# 6 s for 40.2 MiB (what the test of the kit uses: the same archive, made faster)
KIT_XZ_PRESET = 6


def build_docker(mode: str, into: Path, arch: str, xz_preset: int = KIT_XZ_PRESET) -> None:
    with tempfile.TemporaryDirectory(prefix="offline-bundle-") as tmp:
        work = Path(tmp)
        opts = apt_get(arch, work)
        if mode == "debian":
            packages = deb_closure(opts)
            download_debs(packages, into, opts)
            log(f"docker: {len(packages)} Debian packages for {arch}: {' '.join(packages)}")
            return
        debs = work / "debs"
        download_debs([*ENGINE_PACKAGES, *KIT_LIBRARY_PACKAGES], debs, opts)
        tree = work / "tree"
        for deb in sorted(debs.glob("*.deb")):
            run(["dpkg-deb", "-x", str(deb), str(tree)], f"unpacking {deb.name}")
        into.mkdir(parents=True)
        with tarfile.open(into / "docker-kit.tar.xz", "w:xz", preset=xz_preset) as tar:
            for rel in KIT_BINARIES:
                tar.add(tree / rel, arcname=f"bin/{Path(rel).name}")
            libs = sorted(
                p
                for p in tree.glob("**/lib/*/*.so.*")
                if re.match(r"lib(devmapper|seccomp)\.so", p.name)
            )
            if not libs:
                raise BundleError(f"no libdevmapper/libseccomp in {' '.join(KIT_LIBRARY_PACKAGES)}")
            for lib in libs:
                tar.add(lib, arcname=f"lib/{lib.name}")  # symlinks kept as links
        mib = (into / "docker-kit.tar.xz").stat().st_size / 2**20
        log(f"docker: static kit for {arch} ({mib:.1f} MiB, xz preset {xz_preset})")


# ---------------------------------------------------------------- manifest


def write_manifest(root: Path, header: dict[str, str]) -> None:
    lines = ["# containertax offline bundle: scripts/offline-bundle.sh install DIR [TARGET]"]
    lines += [f"{key} {value}" for key, value in header.items()]
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST):
        lines.append(f"sha256 {sha256(path)} {path.relative_to(root).as_posix()}")
    (root / MANIFEST).write_text("\n".join(lines) + "\n")


def read_manifest(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    path = root / MANIFEST
    if not path.is_file():
        raise BundleError(
            f"{path}: missing: {root} is not a bundle (scripts/offline-bundle.sh build {root})"
        )
    header: dict[str, str] = {}
    files: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        if not raw.strip() or raw.startswith("#"):
            continue
        key, _, value = raw.partition(" ")
        if key == "sha256":
            digest, _, rel = value.partition(" ")
            if not re.fullmatch(r"[0-9a-f]{64}", digest) or not rel:
                raise BundleError(f"{path}:{number}: malformed sha256 line {raw!r}")
            files[rel] = digest
        else:
            header[key] = value
    for key in ("python", "platform", "arch", "docker", "requirements"):
        if key not in header:
            raise BundleError(f"{path}: no `{key}` line: rebuild the bundle")
    if header["docker"] not in DOCKER_MODES:
        raise BundleError(f"{path}: docker {header['docker']!r}: one of {', '.join(DOCKER_MODES)}")
    return header, files


def verify(root: Path) -> dict[str, str]:
    header, files = read_manifest(root)
    problems = []
    for rel, digest in sorted(files.items()):
        path = root / rel
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif sha256(path) != digest:
            problems.append(f"{path}: sha256 differs from {root / MANIFEST} (damaged or changed)")
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST):
        if path.relative_to(root).as_posix() not in files:
            problems.append(f"{path}: not in {root / MANIFEST} (added after the build)")
    if problems:
        raise BundleError(
            "the bundle does not match its manifest:\n  "
            + "\n  ".join(problems)
            + "\ncopy the bundle again, or rebuild it"
        )
    return header


# ---------------------------------------------------------------- install


def docker_socket() -> str:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        raise BundleError(f"DOCKER_HOST={host}: only a unix socket can be checked here")
    return host[len("unix://") :]


def engine_answers(sock_path: str) -> bool:
    """True when a Docker Engine answers GET /_ping on the socket (no docker CLI needed)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(sock_path)
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            reply = s.recv(4096)
    except OSError:
        return False
    return reply.startswith(b"HTTP/1.") and b" 200 " in reply.split(b"\r\n", 1)[0] + b" "


def _background(argv: list[str], log_path: Path, env: dict[str, str]) -> None:
    """A daemon in its own session, outliving this install, its output appended to log_path."""
    with log_path.open("ab") as out:
        subprocess.Popen(argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=env,
                         start_new_session=True)


def start_engine(bindir: Path, env: dict[str, str], sock_path: str) -> None:
    """containerd and dockerd in the background (no bridge, no iptables: network none/host)."""
    logs = {name: Path(f"/tmp/containertax-{name}.log") for name in ("containerd", "dockerd")}
    containerd_sock = Path("/run/containerd/containerd.sock")
    if not containerd_sock.exists():
        _background([str(bindir / "containerd")], logs["containerd"], env)
        for _ in range(100):
            if containerd_sock.exists():
                break
            time.sleep(0.2)
    _background(
        [
            str(bindir / "dockerd"),
            f"--containerd={containerd_sock}",
            "--iptables=false",
            "--bridge=none",
            "--ip-masq=false",
            f"--host=unix://{sock_path}",
        ],
        logs["dockerd"],
        env,
    )
    for _ in range(150):
        if engine_answers(sock_path):
            log(f"docker: engine up at {sock_path} (logs {logs['dockerd']}, {logs['containerd']})")
            return
        time.sleep(0.2)
    tail = "\n".join(logs["dockerd"].read_text(errors="replace").splitlines()[-10:])
    raise BundleError(
        f"dockerd did not answer at {sock_path} within 30 s; {logs['dockerd']}:\n{tail}"
    )


def install_static(root: Path, sock_path: str) -> None:
    KIT_ROOT.mkdir(parents=True, exist_ok=True)
    with tarfile.open(root / "docker" / "docker-kit.tar.xz") as tar:
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(KIT_ROOT, filter="tar")
        else:  # Python before 3.12 (and its backports): no extraction filters
            tar.extractall(KIT_ROOT)
    env = dict(os.environ)
    env["PATH"] = f"{KIT_ROOT / 'bin'}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    env["LD_LIBRARY_PATH"] = str(KIT_ROOT / "lib")
    check = subprocess.run(
        [str(KIT_ROOT / "bin" / "dockerd"), "--version"], env=env, capture_output=True, text=True
    )
    if check.returncode != 0:
        raise BundleError(
            f"the static kit's dockerd does not run on this node (unpacked in {KIT_ROOT}):\n"
            f"{check.stderr.strip()}\na shared library named there is missing: install it, or "
            "build the bundle with --docker debian for a Debian node"
        )
    start_engine(KIT_ROOT / "bin", env, sock_path)


def install_debian(root: Path, arch: str, sock_path: str) -> None:
    if shutil.which("dpkg") is None:
        raise BundleError(
            "the bundle's Docker Engine is Debian packages, but this node has no dpkg: "
            "build the bundle with --docker static"
        )
    node_arch = run(["dpkg", "--print-architecture"], "dpkg --print-architecture").stdout.strip()
    if node_arch != arch:
        raise BundleError(f"the bundle's Debian packages are for {arch}, this node is {node_arch}")
    todo = []
    for deb in sorted((root / "docker").glob("*.deb")):
        fields = run(["dpkg-deb", "-f", str(deb), "Package", "Version"], f"reading {deb}").stdout
        meta = dict(re.findall(r"^(\w+): (.*)$", fields, re.M))
        have = subprocess.run(
            ["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Version}", meta["Package"]],
            capture_output=True,
            text=True,
        ).stdout.split()
        if (
            len(have) == 2
            and have[0] == "ii"
            and subprocess.run(
                ["dpkg", "--compare-versions", have[1], "ge", meta["Version"]]
            ).returncode
            == 0
        ):
            continue
        todo.append(str(deb))
    if todo:
        result = subprocess.run(["dpkg", "-i", *todo], capture_output=True, text=True)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
            raise BundleError(
                f"dpkg -i of the bundle's {len(todo)} packages failed (a dependency this node "
                f"lacks is named below; the bundle is for a minimal Debian of the release it "
                f"was built on):\n{tail}"
            )
        log(f"docker: installed {len(todo)} Debian packages")
    for _ in range(25):  # the package's postinst may have started it
        if engine_answers(sock_path):
            log(f"docker: engine up at {sock_path}")
            return
        time.sleep(0.2)
    start_engine(
        Path("/usr/sbin") if Path("/usr/sbin/dockerd").exists() else Path("/usr/bin"),
        dict(os.environ),
        sock_path,
    )


def install(root: Path, target: str | None, docker: bool) -> None:
    header = verify(root)
    log(f"{root}: every file matches {root / MANIFEST}")
    if header["python"] != host_version():
        raise BundleError(
            f"the bundle is for Python {header['python']}, this python ({sys.executable}) is "
            f"{host_version()}: build it with PYTHON_VERSION {host_version()} "
            f"(scripts/offline-bundle.sh build DIR {host_version()} [PLATFORMS])"
        )
    try:
        requirements = json.loads(header["requirements"])
    except ValueError as exc:
        raise BundleError(f"{root / MANIFEST}: requirements: not a JSON list") from exc
    wheels = sorted((root / "wheels").glob("*.whl"))
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-compile",
        "--no-cache-dir",
    ]
    argv += ["--target", target, "--upgrade"] if target else []
    if "have" in header:
        # what the node lacks only: every wheel, the node's own packages for the rest
        argv += ["--no-deps", *map(str, wheels)]
    else:
        argv += ["--find-links", str(root / "wheels"), *requirements]
    if wheels:
        run(argv, "pip install from the bundle", env=pip_env())
    paths = ([target] if target else []) + [p for p in sys.path if p]
    not_needed = json.loads(header.get("not_needed", "{}"))
    problems = unmet(requirements, installed_dists(paths), not_needed)
    if problems:
        raise BundleError(
            "after the install, this node still lacks:\n  "
            + "\n  ".join(problems)
            + "\nbuild the bundle with these (leave them out of --have), or install them"
        )
    log(
        f"installed {len(wheels)} wheels{' into ' + target if target else ''}; "
        f"{', '.join(requirements)} met"
    )
    for name, why in not_needed.items():
        log(f"{name}: left out, not needed here ({why})")
    if not docker:
        return
    sock_path = docker_socket()
    if engine_answers(sock_path):
        log(f"docker: an engine answers at {sock_path}; the bundle's is not needed")
        return
    mode = header["docker"]
    if mode == "none":
        raise BundleError(
            f"no Docker Engine answers at {sock_path} and the bundle has none: build it with "
            "--docker static (or debian), start the node's engine, or pass --no-docker where "
            "no docker environment runs"
        )
    if os.geteuid() != 0:
        raise BundleError(
            f"no Docker Engine answers at {sock_path}; starting the bundle's needs root"
        )
    if mode == "static":
        install_static(root, sock_path)
    else:
        install_debian(root, header["arch"], sock_path)


# ---------------------------------------------------------------- command line


def build(args: argparse.Namespace) -> None:
    root = Path(args.dir)
    if root.exists() and any(root.iterdir()):
        raise BundleError(f"{root}: exists and is not empty; remove it or name another folder")
    version = args.python_version or host_version()
    if not re.fullmatch(r"3\.\d+", version):
        raise BundleError(f"PYTHON_VERSION {version!r}: major.minor, e.g. 3.12")
    platforms = [p for p in (args.platforms or "").split(",") if p]
    arch = target_arch(platforms)
    requirements = None
    if args.requirements:
        requirements = read_requirement_lines(Path(args.requirements))
    have = read_have(Path(args.have)) if args.have else None
    not_needed = read_not_needed(Path(args.not_needed)) if args.not_needed else {}
    if not_needed:  # left out like what the node has, and recorded for the install's check
        have = {**(have or {}), **dict.fromkeys(not_needed)}
    start = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    try:
        install_lines, dropped = build_wheels(
            root / "wheels", version, platforms, requirements, have
        )
        if args.docker != "none":
            build_docker(args.docker, root / "docker", arch, args.xz_preset)
        header = {
            "python": version,
            "platform": ",".join(platforms) or sysconfig.get_platform().replace("-", "_"),
            "arch": arch,
            "docker": args.docker,
            "requirements": json.dumps(install_lines),
        }
        if have is not None:
            header["have"] = f"{args.have} ({len(dropped)} left out: {' '.join(dropped)})"
        if not_needed:
            header["not_needed"] = json.dumps(not_needed)
        write_manifest(root, header)
    except BaseException:
        log(f"build failed; {root} is incomplete: remove it before building again")
        raise
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    n_wheels = len(list((root / "wheels").glob("*.whl")))
    log(
        f"{root}: {n_wheels} wheels, docker {args.docker}, {size / 2**20:.1f} MiB, "
        f"for Python {version} on {header['platform']} ({time.monotonic() - start:.0f} s)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="offline-bundle.sh", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a bundle (on a machine with network)")
    b.add_argument("dir")
    b.add_argument("python_version", nargs="?", help="the node's Python, e.g. 3.12")
    b.add_argument("platforms", nargs="?", help="the node's wheel platforms, comma-separated")
    b.add_argument(
        "--docker",
        choices=DOCKER_MODES,
        default="none",
        help="the Docker Engine for a node without one (default none)",
    )
    b.add_argument(
        "--requirements",
        metavar="FILE",
        help="bundle these requirement lines instead of the project with [slurm]",
    )
    b.add_argument(
        "--have",
        metavar="FILE",
        help="the node's `pip list --format=freeze`: leave out what it has",
    )
    b.add_argument(
        "--not-needed",
        metavar="FILE",
        help="`name  # why` lines: dependencies this node never imports (left out, and "
        "allowed to be absent at install)",
    )
    b.add_argument(
        "--xz-preset",
        type=int,
        choices=range(10),
        default=KIT_XZ_PRESET,
        metavar="0-9",
        help=f"the static kit's xz preset (default {KIT_XZ_PRESET}, xz's own; 0 takes a "
        "twelfth of its CPU time for a kit 7 MiB larger)",
    )
    i = sub.add_parser("install", help="install from a bundle (on the node)")
    i.add_argument("dir")
    i.add_argument("target", nargs="?", help="a folder to install into (put it on PYTHONPATH)")
    i.add_argument(
        "--no-docker",
        action="store_true",
        help="leave the Docker Engine alone (no docker environment runs here)",
    )
    v = sub.add_parser("verify", help="check a bundle against its manifest")
    v.add_argument("dir")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(args)
        elif args.command == "install":
            install(Path(args.dir).resolve(), args.target, not args.no_docker)
        else:
            verify(Path(args.dir))
            log(f"{args.dir}: every file matches its manifest")
    except BundleError as exc:
        print(f"offline-bundle: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
