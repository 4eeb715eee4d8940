# Fan-in: raw records into one tidy table (runs.csv) and per-request data (requests.csv).
# It depends on the records' folders and, when this invocation runs the cells, on every
# pending cell: the paper then holds each record present at the end (a failed cell stops
# it, and the invocation exits non-zero naming that cell). `snakemake paper` runs no cell.


rule aggregate:
    input:
        config=ancient(RESOLVED),
        records=record_folders,
        cells=pending_cells,
        code=ANALYSIS_CODE,
    output:
        runs=at(R.RUNS),
        requests=at(R.REQUESTS_ALL),
    log:
        at(R.STEP_LOG, step="aggregate"),
    priority: 0
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
    shell:
        "{params.ct} aggregate --config {input.config:q} --out {output.runs:q} "
        "--requests-out {output.requests:q} --log {log:q}"
