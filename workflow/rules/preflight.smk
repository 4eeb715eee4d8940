# Before any cell: the schedule, the system's facts, and a check of every environment.


rule schedule:
    input:
        config=RESOLVED,
    output:
        at(R.SCHEDULE),
    log:
        at(R.STEP_LOG, step="schedule"),
    priority: FIRST
    conda:
        "../../envs/workflow.yaml"
    resources:
        **ALL_LANES,
    params:
        ct=CT,
    shell:
        "{params.ct} schedule --config {input.config:q} --out {output:q} --log {log:q}"


rule system:
    input:
        config=RESOLVED,
    output:
        at(R.SYSTEM),
    log:
        at(R.STEP_LOG, step="system"),
    priority: FIRST
    conda:
        "../../envs/workflow.yaml"
    resources:
        **ALL_LANES,
    params:
        ct=CT,
    shell:
        "{params.ct} system --config {input.config:q} --out {output:q} --log {log:q}"


rule rootfs:
    """The image's root filesystem, exported once, for chroot environments."""
    output:
        tree=directory(at(R.ROOTFS)),
        marker=at(R.ROOTFS_MARKER),
    log:
        at(R.ROOTFS_LOG),
    priority: FIRST
    conda:
        "../../envs/workflow.yaml"
    resources:
        **ALL_LANES,
    params:
        ct=CT,
        image=lambda wc: IMAGES[wc.image],
    shell:
        "{params.ct} rootfs --image {params.image:q} --out {output.tree:q} --log {log:q}"


rule provide:
    """The image handed from the local Docker Engine to the environment's runtime (Podman's
    store, Charliecloud's directory, Apptainer's SIF: runtimes/<kind>.py provide), once.
    """
    input:
        config=ancient(RESOLVED),
    output:
        at(R.PROVIDED),
    log:
        at(R.PROVIDED_LOG),
    priority: FIRST
    conda:
        "../../envs/workflow.yaml"
    resources:
        **ALL_LANES,
    params:
        ct=CT,
    shell:
        "{params.ct} provide --config {input.config:q} --environment {wildcards.environment} "
        "--out {output:q} --log {log:q}"


rule preflight:
    """Can this environment start the workload here? One broken environment blocks only
    its own cells."""
    input:
        config=ancient(RESOLVED),
        image=image_marker,
        # the datasets first: preflight checks their folder from inside the environment
        datasets=list(DATASETS),
        # the checkpoints made here (rules/quantise.smk): preflight checks them, as it
        # checks a downloaded one, and every later run reads them
        quantised=[job.marker for job in QUANTISE.values()],
    output:
        at(R.PREFLIGHT),
    log:
        at(R.PREFLIGHT_LOG),
    priority: FIRST
    conda:
        "../../envs/workflow.yaml"
    resources:
        **ALL_LANES,
    params:
        ct=CT,
    shell:
        "{params.ct} preflight --config {input.config:q} --environment {wildcards.environment} "
        "--out {output:q} --log {log:q}"


rule dataset:
    """A trtllm model's synthetic token dataset (random ids within its vocabulary, fixed
    lengths, seeded, with its sha256), written once on the host before any run: no
    measured run makes it, and every environment reads the same bytes."""
    input:
        config=ancient(RESOLVED),
        # its vocabulary is read from the checkpoint: a quantised one is made first
        quantised=dataset_quantised,
    output:
        data="{dataset_dir}/{dataset_name}.jsonl",
        meta="{dataset_dir}/{dataset_name}.jsonl.json",
    log:
        at(R.DATASET_LOG),
    wildcard_constraints:
        dataset_dir=DATASET_DIRS,
        dataset_name=r"[^/]+",
    priority: FIRST
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
        model=dataset_model,
    shell:
        "{params.ct} dataset --config {input.config:q} --model {params.model:q} "
        "--out {output.data:q} --log {log:q}"
