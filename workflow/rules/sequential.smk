# Sequential stopping (config `stopping:`; statistics/sequential.py). After each look the
# interim checkpoint decides, per model, whether another block is needed; the cells of the
# next look exist in the DAG only for the models that continue. All environments of a model
# stop together (blocks stay complete and paired). The schedule (schedule.csv) still lists
# every possible cell (repetitions = the maximum); each interim file says how many blocks
# each model ran and may run. Cells keep their rules (cells.smk): exactly-once as there.
STOP_LOOKS = ct_stopping.looks(CAMPAIGN.raw)
STOP_RULE = ct_stopping.Rule.from_campaign(CAMPAIGN)
# Every look written so far must be whole and decided under the config's rule: a damaged
# one, or one of another rule, stops the invocation naming the file and the fix (looks.py).
try:
    ct_looks.read_looks(PATHS, STOP_RULE)
except ct_looks.LookError as exc:
    raise WorkflowError(str(exc)) from None
# (model, repetition) -> (raw, cooldown, done) of each of the block's cells
_CELL_TRIPLES = {}
for _c, _raw, _cool, _done in zip(
    CELLS, cell_files(R.RAW), cell_files(R.COOLDOWN), cell_files(R.DONE)
):
    _CELL_TRIPLES.setdefault((_c.model, _c.repetition), []).append((_raw, _cool, _done))


def _cells_up_to(allowed):
    """The .done.json of every unfinished cell of each model's blocks 1..allowed[model]."""
    return [
        done
        for (model, rep), cells in _CELL_TRIPLES.items()
        if rep <= allowed.get(model, 0)
        for raw, cooldown, done in cells
        if raw not in RAW_PRESENT or not Path(cooldown).exists()
    ]


def _allowed_after(look):
    """Blocks each model may run before look `look` + 1 (look 0: the first look's)."""
    if look == 0:
        return {m.id: STOP_LOOKS[0] for m in CAMPAIGN.models}
    state = ct_looks.read_look(checkpoints.interim.get(look=look).output[0], STOP_RULE)
    return {m: v["blocks_allowed"] for m, v in state["models"].items()}


def interim_cells(wildcards):
    """A look waits for the cells of the blocks it looks at."""
    return _cells_up_to(_allowed_after(int(wildcards.look) - 1))


def sequential_targets(wildcards=None):
    """Every look's decision, up to the one after which no model continues, and the cells
    they allow: the campaign's cells under the rule (`all`, `cells`, aggregate)."""
    files = []
    for look in range(1, len(STOP_LOOKS) + 1):
        out = checkpoints.interim.get(look=look).output[0]
        files.append(out)
        if not ct_looks.read_look(out, STOP_RULE).get("continuing"):
            break
    return files + _cells_up_to(_allowed_after(len(files)))


def sequential_allowed_now():
    """Blocks each model may run by the interim files present (after the jobs: onsuccess)."""
    return ct_schedule.stopping_allowed(CAMPAIGN)


checkpoint interim:
    """The interim analysis after one look: per model, stop or another block."""
    input:
        config=ancient(RESOLVED),
        cells=interim_cells,
    output:
        at(R.INTERIM, look="{look}"),
    log:
        at("logs/interim/look{look}.log"),
    wildcard_constraints:
        look=r"[1-9]\d*",
    conda:
        "../../envs/workflow.yaml"
    # a shell step through the CLI, as the cell steps: a `run:` job re-parses the workflow in
    # a subprocess, where the profile's replace-workflow-config does not hold and
    # config/config.yaml's environments were merged into the campaign's (seen on the H100)
    shell:
        f"{_literal(CT)} interim --config {{input.config:q}} --look {{wildcards.look}} "
        "--out {output:q} --log {log:q}"
