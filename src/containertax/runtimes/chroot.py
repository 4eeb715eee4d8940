"""chroot: the image's exported root filesystem, entered with chroot inside a private mount
namespace (execution/environments.py ChrootLauncher writes the mount script); every bind
mount disappears with the namespace."""

from __future__ import annotations

from containertax.runtimes.base import Runtime, Spec


def explain(env_id: str, spec: Spec, message: str, source: str) -> str | None:
    return f"environment {env_id}: {message}"


RUNTIME = Runtime(
    kind="chroot", launcher="chroot", words=lambda spec: "chroot (exported image)",
    runtime="", isolation="mount namespace and root directory",
    software="root filesystem exported from {image}", needs_image=True, image_step="rootfs",
    keys=frozenset({"gpu", "mounts"}), needs_root=True, binaries=("unshare",),
    problems=lambda env_id, spec: [], explain=explain,
    cleanup_words="nothing: the mount namespace goes with the process", image_env=True)
