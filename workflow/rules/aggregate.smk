# Fan-in: every raw record into one tidy table, the seam to statistics and the paper.


rule aggregate:
    input:
        records=cell_files(R.RAW),
        cooldowns=cell_files(R.COOLDOWN),
        # the analysis code itself, so that editing it re-runs the analysis (never a cell)
        code=str(Path(workflow.basedir) / "src/containertax/aggregate.py"),
    output:
        at(R.RUNS),
    log:
        at("logs/aggregate.log"),
    shell:
        "{CT} aggregate --config {RESOLVED} --out {output} --log {log}"
