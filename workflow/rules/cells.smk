# One cell = one run of one model in one environment: gate -> run -> cooldown.
# A cell is done when its raw record exists, never because of a timestamp: a done cell's
# cooldown does not depend on its run (run_if_pending), so nothing pulls it back.
# Exactly once, under any interleaving of kill, orphaned step and rerun (issue #16):
# - the raw record is no rule's output (the run's output is its outcome, .ran.json), so
#   Snakemake never deletes it, neither before a forced job nor after a failed one;
# - a run step waits on the campaign's run lock while an orphaned run measures, and one
#   that then finds the record written succeeds without measuring;
# - no input of a cell step that a job may regenerate is ancient(): Snakemake drops a job
#   whose ancient() input a job in the same DAG regenerates, and with it every job
#   downstream of a forced one (e.g. an incomplete gate after a kill), the target
#   included: the pending cells would silently not run;
# - the same for the cooldown's .cooldown.json in raw/ (the cooldown's output is .done.json);
# - after a successful invocation that runs cells, each requested cell must have its
#   record and cooldown (onsuccess below), or the invocation fails naming the cells.


rule gate:
    """Wait until the chip is below the threshold and the minimum interval since the last
    run has passed."""
    input:
        config=ancient(RESOLVED),
        schedule=at(R.SCHEDULE),
        system=at(R.SYSTEM),
        preflight=at(R.PREFLIGHT),
        dataset=cell_dataset,
        derived=derived_options,
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
    shell:
        cell_step("gate", "--out {output:q} --log {log:q}")


rule run:
    """The measured run, with host-side telemetry; its raw record is written last and
    atomically, and never overwritten."""
    input:
        gate=at(R.GATE),
    output:
        # the step's outcome, consumed by the cooldown; the raw record and its .telemetry.csv,
        # .requests.csv and .log are written beside it by the step, read-only, and are
        # no rule's output: Snakemake never deletes them
        temp(at(R.RAN)),
    log:
        at(R.LOG, step="run", model="{model}", environment="{environment}", rep="{rep}"),
    priority: cell_priority
    conda:
        "../../envs/workflow.yaml"
    resources:
        **LANE_RESOURCES,
    shell:
        cell_step("run", "--gate {input.gate:q} --out {output:q} --log {log:q}")


rule cooldown:
    """Wait the configured time after the run, recording the temperature decay."""
    input:
        ran=run_if_pending,
    output:
        # the cell is finished; its .cooldown.json goes to raw/ beside the record, written
        # by the step, read-only, no rule's output
        at(R.DONE),
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
    shell:
        cell_step("cooldown", "--out {output:q} --log {log:q}")


onsuccess:
    missing = unfinished_cells(requested_targets())
    if missing:
        raise WorkflowError(
            f"{len(missing)} requested cell(s) have no record although Snakemake "
            "reported success: "
            + ", ".join(missing[:20])
            + ". Run the same command again (raw records are never rerun)."
        )
