# Before any cell: the schedule, the system's facts, and a check of every environment.
from containertax.environments import _slug as image_slug

IMAGES = {image_slug(e.image): e.image for e in CAMPAIGN.environments if e.kind == "chroot"}


rule schedule:
    input:
        RESOLVED,
    output:
        at(R.SCHEDULE),
    log:
        at("logs/schedule.log"),
    priority: FIRST
    shell:
        "{CT} schedule --config {RESOLVED} --out {output} --log {log}"


rule system:
    input:
        RESOLVED,
    output:
        at(R.SYSTEM),
    log:
        at("logs/system.log"),
    priority: FIRST
    shell:
        "{CT} system --config {RESOLVED} --out {output} --log {log}"


rule rootfs:
    """The image's root filesystem, exported once, for chroot environments."""
    output:
        tree=directory(at(R.ROOTFS)),
        marker=at(R.ROOTFS + ".image.json"),
    params:
        image=lambda wc: IMAGES[wc.image],
    log:
        at("logs/rootfs/{image}.log"),
    priority: FIRST
    shell:
        "{CT} rootfs --image {params.image:q} --out {output.tree} --log {log}"


def preflight_inputs(wildcards):
    env = ENVS[wildcards.environment]
    if env.kind == "chroot":
        return [ancient(at(R.ROOTFS + ".image.json", image=image_slug(env.image)))]
    return []


rule preflight:
    """Can this environment start the workload here? One broken environment blocks only
    its own cells."""
    input:
        preflight_inputs,
    output:
        at(R.PREFLIGHT),
    log:
        at("logs/preflight/{environment}.log"),
    priority: FIRST
    shell:
        "{CT} preflight --config {RESOLVED} --environment {wildcards.environment} "
        "--out {output} --log {log}"
