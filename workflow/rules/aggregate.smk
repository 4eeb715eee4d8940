# Fan-in: raw records into one tidy table (runs.csv) and per-request data (requests.csv).
# It depends on the records' folders, not on the cells, so `snakemake paper` never runs a
# cell; in a full run it comes after every cell because its priority is below theirs.


rule aggregate:
    input:
        config=ancient(RESOLVED),
        records=record_folders,
        code=ANALYSIS_CODE,
    output:
        runs=at(R.RUNS),
        requests=at(R.REQUESTS_ALL),
    log:
        at("logs/aggregate.log"),
    priority: 0
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
    shell:
        "{params.ct} aggregate --config {input.config} --out {output.runs} "
        "--requests-out {output.requests} --log {log}"
