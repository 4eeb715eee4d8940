"""chroot: the image's exported root filesystem, entered with chroot inside a private mount
namespace (ChrootLauncher below writes the mount script; export_rootfs, the rootfs rule, exports
the image from the local Docker Engine); every bind
mount disappears with the namespace."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from containertax.core import records
from containertax.runtimes import passthrough
from containertax.runtimes.base import HOST_CONTEXT, Entry, Ran, Runtime, Spec
from containertax.runtimes.docker import (
    cleanup_stale_containers,
    copy_is_current,
    docker_client,
    image_facts,
)
from containertax.runtimes.launch import (
    DOCKER_DEFAULT_ENV,
    INSIDE,
    PROJECT_ENV,
    EnvironmentFailure,
    Launch,
    Launcher,
    Outcome,
    driver_libraries,
    image_config,
    owner_labels,
    parse_mount,
    run_process,
    telemetry_state,
)


def explain(env_id: str, spec: Spec, message: str, source: str) -> str | None:
    return f"environment {env_id}: {message}"


def describe(ran: Ran) -> Entry:
    """The exported root filesystem; the GPU through the host's /dev (bound whole) and,
    with `gpu`, the driver's libraries bound into the root."""
    if ran.resolved.get("driver_libraries"):
        gpu = "host's /dev and driver libraries bound into the root"
    else:
        gpu = "host's /dev (shared)" if ran.gpu_recorded else "none"
    limits = {str(k): (int(v[0]), int(v[1]))
              for k, v in (ran.resolved.get("ulimits") or {}).items()}
    return Entry(software=f"root filesystem exported from {ran.image}",
                 mounts=tuple(map(str, ran.resolved.get("binds") or [])), gpu=gpu,
                 isolation="mount namespace and root directory",
                 flags=(f"prlimit {' '.join(prlimit_flags(limits))}",) if limits else ())


def prlimit_flags(limits: dict[str, tuple[int, int]]) -> list[str]:
    """options.ulimits (docker's names, (soft, hard), -1 unlimited) as util-linux prlimit
    takes them: what the chroot's shell runs, and what the environments table prints."""
    def word(v: int) -> str:
        return "unlimited" if v == -1 else str(v)
    return [f"--{name}={word(s)}:{word(h)}" for name, (s, h) in sorted(limits.items())]


class ChrootLauncher(Launcher):
    """A chroot into the image's exported root filesystem, inside a private mount
    namespace: every bind mount disappears with the namespace, even after SIGKILL."""

    def rootfs(self) -> Path:
        return self.campaign.paths.rootfs(self.env.image or "").resolve()

    def rootfs_marker(self) -> Path:
        """The exported image's facts, written beside its root filesystem."""
        return self.campaign.paths.rootfs_marker(self.env.image or "").resolve()

    @property
    def gpu(self) -> bool:
        return bool(self.env.spec.get("gpu"))

    def image(self) -> dict[str, Any]:
        """What the rootfs rule recorded of the image: id, ENV, WORKDIR."""
        import json

        marker = self.rootfs_marker()
        return json.loads(marker.read_text()) if marker.exists() else {}

    def environment_vars(self, launch: Launch) -> dict[str, str]:
        """The image's own ENV (as Docker would start it), then the project's and the
        config's variables: native and container run the same environment."""
        image_env = self.image().get("config", {}).get("env", {})
        env = {**DOCKER_DEFAULT_ENV, **image_env, **PROJECT_ENV, **launch.env,
               **self.env.spec.get("env", {})}
        if self.gpu:
            env["LD_LIBRARY_PATH"] = passthrough.ld_library_path(env.get("LD_LIBRARY_PATH"))
        return env

    def preflight(self) -> dict[str, Any]:
        """The exported root filesystem is still the image's current content."""
        import json

        exported = records.read_json(self.rootfs_marker())
        image = image_facts(docker_client(), self.env, self.campaign.source)
        current = image["id"]
        if current == exported["id"] and "entrypoint" not in exported.get("config", {}):
            # exported by an older containertax: the same image's ENV, WORKDIR, ENTRYPOINT
            # and CMD, added
            exported["config"] = image["config"]
            records.atomic_write_text(self.rootfs_marker(),
                                      json.dumps(exported, indent=2) + "\n")
        copy_is_current(self.env, exported["id"], current, f"{self.rootfs()} was exported from",
                        "that folder and its .image.json to export the current image")
        return {"rootfs": exported}

    def gpu_lines(self, libraries: dict[str, str]) -> list[str]:
        """The host driver's libraries under their sonames in a tmpfs (gone with the mount
        namespace), and the image's dynamic-linker cache refreshed to include them, as the
        NVIDIA Container Toolkit's update-ldcache hook does: the image's own ldconfig
        writes a cache into that tmpfs, bound over the image's /etc/ld.so.cache for this
        namespace only (the exported root filesystem is not changed). /dev, bound whole,
        holds the device nodes: nvidia-uvm is created first where it is missing (it is made
        on the first CUDA call as root, and may be absent after a reboot), as the toolkit's
        nvidia-container-cli does with nvidia-modprobe."""
        d = shlex.quote(str(passthrough.DRIVER_DIR))
        cache = shlex.quote(f"{passthrough.DRIVER_DIR}/ld.so.cache")
        lines = ["[ -e /dev/nvidia-uvm ] || ! command -v nvidia-modprobe >/dev/null || "
                 "nvidia-modprobe -u -c=0 || true",
                 f'mkdir -p "$R"{d}', f'mount -t tmpfs -o size=16m,mode=755 tmpfs "$R"{d}']
        for soname, path in sorted(libraries.items()):
            t = shlex.quote(f"{passthrough.DRIVER_DIR}/{soname}")
            lines += [f'touch "$R"{t}', f'mount --bind {shlex.quote(path)} "$R"{t}',
                      f'mount -o remount,bind,ro "$R"{t}']
        lines += ['if [ -f "$R/etc/ld.so.cache" ] && [ -x "$R/sbin/ldconfig" ]; then',
                  f'  {self.chroot_binary()} "$R" /sbin/ldconfig -X -C {cache} {d} >/dev/null 2>&1 '
                  f'&& mount --bind "$R"{cache} "$R/etc/ld.so.cache" || true',
                  # the bind keeps the cache; the driver folder holds only the libraries
                  f'  rm -f "$R"{cache}',
                  "fi"]
        return lines

    @staticmethod
    def chroot_binary() -> str:
        return shutil.which("chroot", path=DOCKER_DEFAULT_ENV["PATH"]) or "chroot"

    def limits(self) -> dict[str, tuple[int, int]]:
        """options.ulimits as (soft, hard), -1 for unlimited: docker's names and values."""
        out = {}
        for name, value in ((self.env.spec.get("options") or {}).get("ulimits") or {}).items():
            soft, hard = ((int(value), int(value)) if isinstance(value, int)
                          else tuple(int(v) for v in str(value).split(":")))
            out[name] = (soft, hard)
        return out

    def limit_lines(self) -> list[str]:
        """options.ulimits applied to the shell that execs the chroot (util-linux prlimit,
        bytes as Docker's --ulimit takes them): the process inherits them."""
        flags = prlimit_flags(self.limits())
        return [f"prlimit --pid $$ {' '.join(flags)}"] if flags else []

    def script(self, launch: Launch, libraries: dict[str, str] | None = None) -> str:
        root = shlex.quote(str(self.rootfs()))
        lines = [
            "set -eu",
            # the host's tools for the mounts; the process gets the image's PATH back below
            f"PATH={DOCKER_DEFAULT_ENV['PATH']}",
            f"R={root}",
            'mount -t proc proc "$R/proc"',
            'mount --rbind /sys "$R/sys"',
            'mount --rbind /dev "$R/dev"',
        ]
        binds = [
            (launch.probe_dir, INSIDE / "probe", True),
            (launch.work_dir, INSIDE / "work", False),
        ]
        if launch.cache_dir is not None:
            binds.append((launch.cache_dir, self.cache_inside(launch.cache_dir), False))
        for spec in self.env.spec.get("mounts", []):
            host, target, ro = parse_mount(spec, self.env.id)
            binds.append((host, self.inside_rootfs(target, spec), ro))
        for host, target, ro in binds:
            h, t = shlex.quote(str(host)), shlex.quote(str(target))
            lines.append(f'mkdir -p "$R"{t}')
            lines.append(f'mount --bind {h} "$R"{t}')
            if ro:
                lines.append(f'mount -o remount,bind,ro "$R"{t}')
        if libraries:
            lines += self.gpu_lines(libraries)
        lines += self.limit_lines()
        workdir = shlex.quote(self.image().get("config", {}).get("working_dir", "/"))
        # the image's ENTRYPOINT runs around the workload, as Docker runs it: NVIDIA's images
        # set up their environment there (nvidia_entrypoint.sh sources entrypoint.d/*.sh,
        # then exec "$@"); running it rather than copying what it exports keeps the chroot
        # right for any image and release, including what a script does besides exporting
        entry = " ".join(shlex.quote(w) for w in self.entrypoint())
        # the image's WORKDIR, as Docker starts the container there
        path = shlex.quote(self.environment_vars(launch)["PATH"])
        chroot = self.chroot_binary()
        enter = "'cd \"$0\" && unset OLDPWD PWD && exec \"$@\"'"
        lines.append(f'exec env PATH={path} {chroot} "$R" /bin/sh -c {enter} {workdir} '
                     f'{entry + " " if entry else ""}"$@"')
        return "\n".join(lines)

    def entrypoint(self) -> list[str]:
        """The image's ENTRYPOINT as recorded at export (Docker's: an exported root
        filesystem of an older containertax lacks it until preflight refreshes it)."""
        return list(self.image().get("config", {}).get("entrypoint") or [])

    def inside_rootfs(self, target: Path, spec: str) -> Path:
        """A mount target, normalised, that stays in the root filesystem: mkdir -p of
        '$R/../x', or through a symlink of the image to an absolute path, would create a
        folder on the host."""
        norm = Path("/" + os.path.normpath("/" + str(target)).lstrip("/"))
        root = self.rootfs()
        real = (root / norm.relative_to("/")).resolve()
        if not real.is_relative_to(root):
            raise EnvironmentFailure(
                f"environments.{self.env.id}.mounts: '{spec}': the target leaves the image's "
                f"root filesystem ({real}); give a path inside it, e.g. /data.")
        return norm

    def run(self, launch: Launch) -> Outcome:
        if not (self.rootfs() / "bin").exists():
            raise EnvironmentFailure(
                f"environment {self.env.id}: root filesystem {self.rootfs()} is missing; the "
                "workflow's rootfs rule exports it from the image (run snakemake, not this step "
                "alone)."
            )
        unshare = shutil.which("unshare")
        if unshare is None:
            raise EnvironmentFailure("chroot environments need unshare (util-linux).")
        libraries = driver_libraries(self.env) if self.gpu else None
        argv = [unshare, "--mount", "--propagation", "private", "--", "sh", "-c",
                self.script(launch, libraries), "containertax-chroot", *launch.argv]
        marks: dict[str, float] = {}
        rc, t_in, t_out, wall, out, to = run_process(
            argv, self.environment_vars(launch), launch.timeout_s, launch.cpuset, marks)
        env_vars = self.environment_vars(launch)
        resolved = {"argv": launch.argv, "rootfs": str(self.rootfs()), "wrapper": argv[:5],
                    "driver_libraries": libraries, "image": self.image(),
                    "entrypoint": self.entrypoint(), "env": env_vars,
                    "ulimits": {k: list(v) for k, v in self.limits().items()},
                    "telemetry": telemetry_state(env_vars)}
        return Outcome(rc, t_in, t_out, wall, out, resolved, to, marks=marks)



def sibling_export(dest: Path, image_id: str) -> Path | None:
    """An export of the same image (by id) by another campaign of the same results folder
    (<results_dir>/<other campaign>/rootfs/<image>): the study's campaigns share its bytes."""
    for marker in sorted(dest.parent.parent.parent.glob(f"*/{dest.parent.name}/"
                                                        f"{dest.name}.image.json")):
        other = marker.with_name(dest.name)
        if other == dest or not (other / "bin").exists():
            continue
        try:
            import json

            if json.loads(marker.read_text()).get("id") == image_id:
                return other
        except (OSError, ValueError):
            continue
    return None


def export_rootfs(image: str, dest: Path) -> dict[str, Any]:
    """Export an image's root filesystem into dest (via a temporary folder and a rename),
    so that chroot runs the same bytes the container does. Where another campaign of the
    same results folder has exported the same image (by id), its tree is hard-linked
    instead (`cp -al`: one copy of the bytes on disk for every campaign of a study, in
    seconds); a file changed in place by a run would change in both."""
    import json

    import docker

    client = docker_client()
    try:
        img = client.images.get(image)
    except docker.errors.ImageNotFound:  # the engine's 404: a sentence, not a traceback
        raise EnvironmentFailure(
            f"image '{image}' is not in the local Docker Engine, so its root filesystem "
            f"cannot be exported for the chroot. Fix: docker pull {image} (or build/load "
            "it), or correct the chroot environment's image in the config.") from None
    tmp = dest.parent / f".{dest.name}.partial"
    if tmp.exists():
        shutil.rmtree(tmp)
    shared = sibling_export(dest, img.id)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if shared is not None and subprocess.run(
            ["cp", "-al", str(shared), str(tmp)], capture_output=True).returncode == 0:
        facts = {"name": image, "id": img.id, "exported_unix": time.time(),
                 "config": image_config(img.attrs), "shared_from": str(shared)}
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
        (dest.parent / f"{dest.name}.image.json").write_text(json.dumps(facts, indent=2) + "\n")
        return facts
    if tmp.exists():  # a hard link across file systems failed part-way
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    root = dest.parent.parent  # <results_dir>/<campaign>/rootfs/<image>
    cleanup_stale_containers(client, root.name, root)  # an export killed before this one
    container = client.containers.create(
        img.id, command=["true"],
        labels={**owner_labels(root.name, root), "containertax.cell": f"rootfs/{dest.name}"})
    try:
        tar = subprocess.Popen(["tar", "-x", "-C", str(tmp)], stdin=subprocess.PIPE)
        assert tar.stdin is not None
        for chunk in container.export():
            tar.stdin.write(chunk)
        tar.stdin.close()
        if tar.wait() != 0:
            raise EnvironmentFailure(f"tar failed while exporting {image} into {tmp}")
    finally:
        container.remove(force=True)
    (tmp / ".dockerenv").unlink(missing_ok=True)  # docker's marker, not part of the image
    for d in ("proc", "sys", "dev", "containertax/probe", "containertax/work",
              str(passthrough.DRIVER_DIR).lstrip("/")):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    facts = {"name": image, "id": img.id, "exported_unix": time.time(),
             "config": image_config(img.attrs)}
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    (dest.parent / f"{dest.name}.image.json").write_text(json.dumps(facts, indent=2) + "\n")
    return facts



RUNTIME = Runtime(
    kind="chroot", launcher="chroot", launcher_class=ChrootLauncher,
    words=lambda spec: "chroot (exported image)",
    runtime="", describe=describe, needs_image=True, image_step="rootfs",
    options_schema="chroot_options", keys=frozenset({"gpu", "mounts", "options"}),
    needs_root=True, binaries=("unshare", "prlimit"),
    problems=lambda env_id, spec: [], explain=explain,
    cleanup_words="nothing: the mount namespace goes with the process", image_env=True,
    context=HOST_CONTEXT)
