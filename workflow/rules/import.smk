# An imported study: a tidy CSV (analysis.import_csv) instead of benchmark cells.


rule import_runs:
    input:
        config=RESOLVED,
        table=CAMPAIGN.analysis.get("import_csv", []),
        code=ANALYSIS_CODE,
    output:
        runs=at(R.RUNS),
        requests=at(R.REQUESTS_ALL),
        report=at(R.IMPORT_REPORT),
    log:
        at(R.STEP_LOG, step="import"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
    shell:
        "{params.ct} import --config {input.config:q} --out {output.runs:q} "
        "--requests-out {output.requests:q} --report-out {output.report:q} --log {log:q}"
