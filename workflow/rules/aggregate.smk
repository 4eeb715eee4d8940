# Fan-in: every raw record into one tidy table, the seam to statistics and the paper.


rule aggregate:
    input:
        config=ancient(RESOLVED),
        records=cell_files(R.RAW),
        cooldowns=cell_files(R.COOLDOWN),
        # the analysis code itself, so that editing it re-runs the analysis (never a cell)
        code=str(Path(workflow.basedir) / "src/containertax/aggregate.py"),
    output:
        at(R.RUNS),
    log:
        at("logs/aggregate.log"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
    shell:
        "{params.ct} aggregate --config {input.config} --out {output} --log {log}"
