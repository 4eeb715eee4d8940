# One cell = one run of one model in one environment: gate -> run -> cooldown.
# Inputs are ancient(): only a missing output makes a cell run again, never a timestamp.


rule gate:
    """Wait until the chip is below the threshold and the minimum interval since the last
    run has passed."""
    input:
        config=ancient(RESOLVED),
        schedule=ancient(at(R.SCHEDULE)),
        system=ancient(at(R.SYSTEM)),
        preflight=ancient(at(R.PREFLIGHT)),
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
    params:
        ct=CT,
        cell=cell_args,
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
    params:
        ct=CT,
        cell=cell_args,
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
    params:
        ct=CT,
        cell=cell_args,
    shell:
        "{params.ct} cooldown --config {input.config} {params.cell} --out {output} --log {log}"
