# One cell = one run of one model in one environment: gate -> run -> cooldown.


rule gate:
    """Wait until the chip is below the threshold and the minimum interval since the last
    run has passed."""
    input:
        schedule=ancient(at(R.SCHEDULE)),
        system=ancient(at(R.SYSTEM)),
        preflight=ancient(at(R.PREFLIGHT)),
    output:
        at(R.GATE),
    log:
        at(R.LOG, step="gate", model="{model}", environment="{environment}", rep="{rep}"),
    priority: cell_priority
    params:
        cell=cell_args,
    shell:
        "{CT} gate {params.cell} --out {output} --log {log}"


rule run:
    """The measured run, with host-side telemetry; its raw record is written last and
    atomically, and never overwritten."""
    input:
        gate=ancient(at(R.GATE)),
    output:
        record=protected(at(R.RAW)),
        telemetry=protected(at(R.TELEMETRY)),
        requests=protected(at(R.REQUESTS)),
        log=protected(at(R.RUN_LOG)),
    log:
        at(R.LOG, step="run", model="{model}", environment="{environment}", rep="{rep}"),
    priority: cell_priority
    params:
        cell=cell_args,
    shell:
        "{CT} run {params.cell} --gate {input.gate} --log {log}"


rule cooldown:
    """Wait the configured time after the run, recording the temperature decay."""
    input:
        ancient(at(R.RAW)),
    output:
        protected(at(R.COOLDOWN)),
    log:
        at(R.LOG, step="cooldown", model="{model}", environment="{environment}", rep="{rep}"),
    priority: cell_priority
    params:
        cell=cell_args,
    shell:
        "{CT} cooldown {params.cell} --out {output} --log {log}"
