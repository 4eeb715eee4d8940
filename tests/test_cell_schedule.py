"""A cell step reads its cell from the schedule the schedule step wrote (schedule.csv), not
from a plan of its own; a missing schedule or one without the cell names the file and
the fix."""

from __future__ import annotations

import dataclasses

import pytest

from containertax.campaign import config, schedule
from containertax.execution import gating


def _written(config_dict):
    campaign = config.load_campaign(config_dict, "x.yaml")
    campaign.root.mkdir(parents=True)
    cells = schedule.plan(campaign)
    schedule.write_csv(cells, campaign.paths.schedule)
    return campaign, cells


def test_step_reads_the_written_schedule(config_dict):
    """Planted: the written schedule places a cell where a fresh plan would not (as a
    schedule written before a config edit does); the step takes the written place."""
    campaign, cells = _written(config_dict)
    moved = dataclasses.replace(cells[-1], position=999, lane="elsewhere")
    schedule.write_csv([*cells[:-1], moved], campaign.paths.schedule)
    found = gating.find_cell(campaign, moved.model, moved.environment,
                             f"{moved.repetition:03d}")
    assert found == moved and found != cells[-1]
    first = cells[0]
    assert gating.find_cell(campaign, first.model, first.environment,
                            f"{first.repetition:02d}") == first  # a legacy label


def test_missing_schedule_names_the_file_and_the_fix(config_dict):
    campaign = config.load_campaign(config_dict, "x.yaml")
    cell = schedule.plan(campaign)[0]
    with pytest.raises(config.ConfigError) as err:
        gating.find_cell(campaign, cell.model, cell.environment, "001")
    text = str(err.value)
    assert str(campaign.paths.schedule) in text and "does not exist" in text
    assert "Snakemake" in text


def test_schedule_without_the_cell_names_it(config_dict):
    """Planted: a schedule that lacks one cell (written before the config added it)."""
    campaign, cells = _written(config_dict)
    gone = cells[3]
    schedule.write_csv([c for c in cells if c != gone], campaign.paths.schedule)
    with pytest.raises(config.ConfigError) as err:
        gating.find_cell(campaign, gone.model, gone.environment, str(gone.repetition))
    text = str(err.value)
    assert str(campaign.paths.schedule) in text
    assert f"{gone.model}/{gone.environment}/rep{gone.repetition}" in text
    assert "older than the config" in text


def test_damaged_schedule_is_named(config_dict):
    campaign, cells = _written(config_dict)
    campaign.paths.schedule.write_text("position,model\nx,y\n")
    with pytest.raises(config.ConfigError, match="not a schedule this workflow wrote"):
        gating.find_cell(campaign, cells[0].model, cells[0].environment, "1")
