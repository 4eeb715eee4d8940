"""Issue #35: hostile imports. Before: `& % $ _ { } \\ ^ ~` or a CJK character in an id
passed `check`, then failed in a Snakemake wildcard or in LaTeX; '#' inside an id cut
the row silently; a repetition of NaN or inf was an IntCastingNaNError traceback, 2.5
was truncated to 2; values near 1e308 a traceback in the figures; a table repeating a
(model, environment, repetition) passed `check` and stopped only in the quality step;
and 200,000 rows an OverflowError in min_mannwhitney_p. Each is planted below, and a
property test feeds `check` and the analysis such tables: every one is either refused
with a clear error (exit 1, no traceback) or analysed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from containertax import cli
from containertax.campaign import config
from containertax.statistics import comparisons, importer, steps

HEADER = "model,environment,repetition,metric,value,unit\n"


def _table(rows: list[tuple]) -> str:
    return HEADER + "".join(",".join(str(x) for x in r) + "\n" for r in rows)


def _good_rows(model: str = "m1", env: str = "docker", reps: int = 4) -> list[tuple]:
    return [(model, e, r, "time_s", 1.0 + 0.01 * r + (0.1 if e == env else 0), "s")
            for r in range(1, reps + 1) for e in ("native", env)]


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "runs.csv").write_text(text, encoding="utf-8")
    cfg = tmp_path / "imp.yaml"
    cfg.write_text("campaign: imp\nreference_environment: native\nanalysis:\n"
                   "  import_csv: runs.csv\n  headline_metric: time_s\n"
                   "  bootstrap_resamples: 1000\n")
    return cfg


def _check(tmp_path: Path, text: str, capsys) -> tuple[int, str]:
    code = cli.main(["check", str(_write(tmp_path, text)), "-d", str(tmp_path)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("char", list("&%$#{}\\^~") + ["模", " x"])
def test_an_id_with_a_character_that_names_no_file_is_refused_with_the_rule(
        tmp_path, capsys, char):
    rows = _good_rows()
    rows[0] = (f"m{char}1", *rows[0][1:])
    code, text = _check(tmp_path, _table(rows), capsys)
    assert code == 1, text
    assert "row 2: column 'model'" in text and "letters A-Z a-z, digits" in text, text
    assert "Traceback" not in text


def test_an_underscore_is_an_id_and_is_typeset_escaped(tmp_path, capsys):
    from containertax.statistics.texts import tex

    code, text = _check(tmp_path, _table(_good_rows(model="m_1", env="dock_er")), capsys)
    assert code == 0, text
    assert tex("m_1") == "m\\_\\allowbreak{}1" or "\\_" in tex("m_1")


def test_a_hash_inside_a_row_is_data_not_a_comment(tmp_path, capsys):
    """'#' cut the row at the '#' (pandas' comment=): now the row is read whole, and its
    id refused by the rule; a comment line stays a comment."""
    rows = _good_rows()
    rows[1] = (rows[1][0], "dock#er", *rows[1][2:])
    code, text = _check(tmp_path, "# a comment line\n" + _table(rows), capsys)
    assert code == 1 and "row 4: column 'environment' = 'dock#er'" in text, text


@pytest.mark.parametrize("rep,why", [(2.5, "2.5"), ("nan", "nan"), ("inf", "inf"),
                                     (-1e300, "-1e+300")])
def test_repetitions_must_be_whole_numbers(tmp_path, capsys, rep, why):
    rows = _good_rows()
    rows[2] = (*rows[2][:2], rep, *rows[2][3:])
    code, text = _check(tmp_path, _table(rows), capsys)
    assert code == 1 and "row 4: column 'repetition'" in text, text
    assert "is not a whole number" in text and "Traceback" not in text


def test_check_runs_the_quality_steps_duplicate_check(tmp_path, capsys):
    rows = _good_rows()
    rows.append(rows[0])
    code, text = _check(tmp_path, _table(rows), capsys)
    assert code == 1 and "rows 2, 10 repeat (model, environment, repetition, metric)" in text
    assert "duplicate check" in text, text


def test_values_near_the_largest_double_are_refused_with_the_reason(tmp_path, capsys):
    rows = [(*r[:4], 1.7e308, r[5]) for r in _good_rows()]
    code, text = _check(tmp_path, _table(rows), capsys)
    assert code == 1 and "exceeds 1e+150 in magnitude" in text, text


def test_min_mannwhitney_p_of_a_huge_table_is_defined():
    """Before: OverflowError (int too large to convert to float) from 2 / C(n, k)."""
    assert comparisons.min_mannwhitney_p(100_000, 100_000) == 0.0
    assert comparisons.min_mannwhitney_p(4, 4) == pytest.approx(2 / 70)
    assert comparisons.min_mannwhitney_p(600, 600) == pytest.approx(
        math.exp(math.log(2) - math.log(math.comb(1200, 600))))


# --- property: any such table is refused cleanly or analysed -----------------------------

HOSTILE = st.sampled_from(["m1", "m_2", "native", "docker", "a&b", "50%", "$x", "a#b",
                           "{x}", "a\\b", "x^2", "~x", "模型", "", " ", "d,e"])
NUMBER = st.one_of(st.integers(-3, 40), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([2.5, 1e308, -1e308, 1e-308, 0.0]))


@st.composite
def tables(draw) -> str:
    rows = _good_rows()
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(rows) - 1))
        field = draw(st.integers(0, 4))
        value = draw(NUMBER if field in (2, 4) else HOSTILE)
        rows[i] = tuple(value if j == field else x for j, x in enumerate(rows[i]))
    if draw(st.booleans()):
        rows.append(rows[draw(st.integers(0, len(rows) - 1))])
    return _table(rows)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=tables())
def test_hostile_tables_are_refused_cleanly_or_analysed(tmp_path_factory, capsys, text):
    tmp = tmp_path_factory.mktemp("prop")
    code, out = _check(tmp, text, capsys)
    assert code in (0, 1) and "Traceback" not in out, out
    if code == 1:
        assert str(tmp / "imp.yaml") in out
        return
    campaign = config.load_file(tmp / "imp.yaml", tmp)
    frame = steps.read_import(campaign)
    runs = tmp / "runs-imported.csv"
    runs.write_text(frame.to_csv(index=False))
    try:
        steps.run_quality(campaign, runs, tmp / "quality", tmp / "order.csv")
    except importer.ContainertaxError:
        return  # a clear refusal of the quality step (e.g. every value excluded)
    kept = tmp / "quality" / "kept.csv"
    models = sorted(set(frame["model"]))
    steps.run_stats(campaign, kept, None, {m: (tmp / f"{m}.csv", tmp / f"{m}.desc.csv")
                                            for m in models})


@pytest.mark.parametrize("shape", [(1, 201), (1, 500), (3, 301)])
def test_the_fast_leave_one_out_statistics_equal_the_direct_ones(monkeypatch, shape):
    """Above LOO_DIRECT_UP_TO values the outlier rule's leave-one-out medians and mean
    deviations come from the sorted values (a 200,000-row import was n^2): the same
    numbers as leaving each value out in turn, ties included."""
    import numpy as np

    from containertax.statistics import quality

    x = np.random.default_rng(35).standard_normal(shape)
    x[..., 5] = x[..., 7]
    fast_med = quality._median_of_others(x)
    fast_dev = quality._mean_abs_dev_of_others(x, fast_med)
    monkeypatch.setattr(quality, "LOO_DIRECT_UP_TO", 10**9)
    np.testing.assert_array_equal(fast_med, quality._median_of_others(x))
    np.testing.assert_allclose(fast_dev, quality._mean_abs_dev_of_others(x, fast_med),
                               rtol=1e-12, atol=1e-12)


def test_a_huge_table_gets_no_permutation_test_but_says_so():
    import numpy as np

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(15_000) + 10, rng.standard_normal(15_000) + 10
    assert math.isnan(comparisons.permutation_p(a, b, 0))
    s = comparisons.Settings("native", primary_test="signflip")
    out = comparisons.primary(a, b, None, s)
    assert out["primary_test"].startswith("Welch t (permutation not run above")
    assert out["p"] == out["t_p"]


def test_a_row_wider_than_the_header_is_named(tmp_path, capsys):
    """Found by the property test: an id holding a comma made the first row one field
    wider, and pandas took its first field as the index (a ValueError traceback)."""
    rows = _good_rows()
    rows[0] = ("d,e", *rows[0][1:])
    code, text = _check(tmp_path, _table(rows), capsys)
    assert code == 1 and "row 2: 7 fields, but the header has 6" in text, text


def test_drifts_normal_limit_matches_its_permutation_null(monkeypatch):
    """Above DRIFT_EXACT_UP_TO values per group the drift test takes the normal limit of
    its permutation null (mean 0, variance 1 / (n - 1) per group): at 1,200 values the
    two p agree to within the Monte Carlo error of 4,999 draws (0.580 and 0.580 here)."""
    import numpy as np
    import pandas as pd

    from containertax.statistics import quality

    rng = np.random.default_rng(3)
    n = 1200
    rows = [{"model": "m", "environment": env, "repetition": r, "position": 2 * r + i,
             "metric": "time_s", "value": 1 + 0.00008 * r + rng.standard_normal(),
             "flag_non_finite": False}
            for i, env in enumerate(("native", "docker")) for r in range(n)]
    runs = pd.DataFrame(rows)
    limit = quality.drift(runs, alpha=1.0)[0].details["p"]
    monkeypatch.setattr(quality, "DRIFT_EXACT_UP_TO", 10**9)
    exact = quality.drift(runs, alpha=1.0)[0].details["p"]
    assert abs(limit - exact) < 4 * math.sqrt(exact * (1 - exact) / 4999) + 1e-3, (limit, exact)
