# One cell = one run of one model in one environment: gate -> run -> cooldown.
# Only a missing output makes a cell run again, never a timestamp: a done cell's cooldown
# does not depend on its run (record_if_pending), so nothing pulls it back. The gate's
# schedule, system and preflight inputs are plain, not ancient(): Snakemake drops a job
# whose ancient() input a job in the same DAG regenerates, so after a config edit
# (schedule and system rewritten) the pending cells would silently not run.


rule gate:
    """Wait until the chip is below the threshold and the minimum interval since the last
    run has passed."""
    input:
        config=ancient(RESOLVED),
        schedule=at(R.SCHEDULE),
        system=at(R.SYSTEM),
        preflight=at(R.PREFLIGHT),
        dataset=cell_dataset,
    output:
        # temp(): consumed by the run; a token left by an interrupted invocation is
        # detected as stale by the run step, which gates again
        temp(at(R.GATE)),
    log:
        at(
            R.LOG,
            step="gate",
            model="{model}",
            environment="{environment}",
            rep="{rep}",
        ),
    priority: cell_priority
    conda:
        "../../envs/workflow.yaml"
    resources:
        **LANE_RESOURCES,
    params:
        ct=CT,
        cell=CELL_ARGS,
    shell:
        "{params.ct} gate --config {input.config} {params.cell} --out {output} --log {log}"


rule run:
    """The measured run, with host-side telemetry; its raw record is written last and
    atomically, and never overwritten."""
    input:
        config=ancient(RESOLVED),
        gate=ancient(at(R.GATE)),
    output:
        record=protected(at(R.RAW)),
        telemetry=protected(at(R.TELEMETRY)),
        requests=protected(at(R.REQUESTS)),
        log=protected(at(R.RUN_LOG)),
    log:
        at(R.LOG, step="run", model="{model}", environment="{environment}", rep="{rep}"),
    priority: cell_priority
    conda:
        "../../envs/workflow.yaml"
    resources:
        **LANE_RESOURCES,
    params:
        ct=CT,
        cell=CELL_ARGS,
    shell:
        "{params.ct} run --config {input.config} {params.cell} --gate {input.gate} --log {log}"


rule cooldown:
    """Wait the configured time after the run, recording the temperature decay."""
    input:
        config=ancient(RESOLVED),
        record=record_if_pending,
    output:
        protected(at(R.COOLDOWN)),
    log:
        at(
            R.LOG,
            step="cooldown",
            model="{model}",
            environment="{environment}",
            rep="{rep}",
        ),
    priority: cell_priority
    conda:
        "../../envs/workflow.yaml"
    resources:
        **LANE_RESOURCES,
    params:
        ct=CT,
        cell=CELL_ARGS,
    shell:
        "{params.ct} cooldown --config {input.config} {params.cell} --out {output} --log {log}"
