#!/usr/bin/env bash
# Puts this machine back into the state of a new one, as far as the test command is concerned,
# without uninstalling packages: everything that a session or an earlier test run left
# running or made by hand, and that a new machine would not have. Run it as root before
# `scripts/test.sh` in a fresh clone to check that the project's own files create all they
# need (issue #21). It removes no project file, no Debian package and no committed data.
#   scripts/fresh-state.sh           # then: git clone ... && cd ... && scripts/test.sh
set -u
say() { echo "fresh-state: $*"; }
# daemons a test or a session started: SLURM, munge, the Docker Engine (setup.sh starts one)
for p in slurmd slurmctld munged dockerd containerd; do
  if pkill -x "$p" 2>/dev/null; then say "stopped $p"; fi
done
running() { for p in slurmd slurmctld munged dockerd containerd; do pgrep -x "$p"; done; }
for _ in $(seq 30); do [ -n "$(running)" ] || break; sleep 1; done
# the Docker Engine's state: images (the demo image setup.sh builds), containers, volumes
for d in /var/lib/docker /var/lib/containerd; do
  if [ -e "$d" ]; then rm -rf "$d" && say "removed $d"; fi
done
# runtime folders a systemd unit or an earlier run made (a machine without systemd has none)
for d in /run/munge /run/slurm /run/docker /run/containerd /var/run/docker.sock; do
  if [ -e "$d" ]; then rm -rf "$d" && say "removed $d"; fi
done
# keys, caches and logs made by hand or by an earlier run
for f in /etc/munge/munge.key /var/log/containertax-dockerd.log "$HOME/.cache/matplotlib" \
         "$HOME/.texlive"* /tmp/pytest-of-"$(id -un)" /tmp/ct-docker.lock; do
  for g in $f; do
    if [ -e "$g" ]; then rm -rf "$g" && say "removed $g"; fi
  done
done
# container settings written by hand (no Debian package owns them): a containers.conf that
# names an OCI runtime hides what a new machine's Podman does (issue #43: crun refused a
# hybrid cgroup host that a hand-set runtime had hidden)
for f in /etc/containers/containers.conf /etc/containers/containers.conf.d/* \
         "$HOME/.config/containers" /home/containertax/.config/containers; do
  for g in $f; do
    if [ -e "$g" ] && ! dpkg -S "$g" >/dev/null 2>&1; then rm -rf "$g" && say "removed $g"; fi
  done
done
# what this host is, as Podman's OCI runtime sees it (runtimes/podman.py: cgroup_layout):
# a new machine of this project's kind may be cgroup v2, v1 or hybrid
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then layout=v2
elif [ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then
  layout="hybrid, unified controllers: [$(cat /sys/fs/cgroup/unified/cgroup.controllers)]"
else layout=v1; fi
say "this host's cgroups: $layout"
say "done: no munged, SLURM or Docker daemon runs; /run/munge, /run/slurm, the munge key, Docker's images, TeX and matplotlib caches are gone"
