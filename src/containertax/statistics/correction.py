"""Multiple-comparison correction within each family of tests: Bonferroni (family-wise
error) and Benjamini-Hochberg (false discovery rate), side by side; Holm for a family of
equivalence claims (holm: a study's TOSTs, each a claim of no effect beyond the margin).

Families are fixed by the plan before data (comparisons.Plan): 'primary' (the primary
metrics of every environment against the reference: what the abstract counts),
'secondary' (every other metric), 'calibration' and 'calibration-secondary' (A/A
replicas against the environment they copy). A family's size is its number of tests.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _adjust(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from statsmodels.stats.multitest import multipletests

    bonf = np.full_like(p, np.nan)
    bh = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        bonf[ok] = multipletests(p[ok], method="bonferroni")[1]
        bh[ok] = multipletests(p[ok], method="fdr_bh")[1]
    return bonf, bh


def correct(results: pd.DataFrame) -> pd.DataFrame:
    """Bonferroni and Benjamini-Hochberg within each family (column 'family'; one family
    where there is no such column).

    Parameters
    ----------
    results : DataFrame
        One row per test, with its uncorrected ``p`` (NaN: no test, counted in no family)
        and, optionally, its ``family``.

    Returns
    -------
    DataFrame
        A copy with ``p_bonferroni`` (family-wise error), ``p_bh`` (false discovery rate,
        Benjamini-Hochberg) and ``family_size`` (the tests of the row's family).

    Examples
    --------
    Three primary tests and one secondary: each family is corrected on its own.

    >>> import pandas as pd
    >>> tests = pd.DataFrame({"family": ["primary", "primary", "primary", "secondary"],
    ...                       "p": [0.01, 0.04, 0.03, 0.2]})
    >>> correct(tests)
          family     p  p_bonferroni  p_bh  family_size
    0    primary  0.01          0.03  0.03            3
    1    primary  0.04          0.12  0.04            3
    2    primary  0.03          0.09  0.04            3
    3  secondary  0.20          0.20  0.20            1
    """
    if results.empty:
        return results.assign(p_bonferroni=[], p_bh=[], family_size=[])
    out = results.copy()
    families = out["family"] if "family" in out else pd.Series("all", index=out.index)
    out["p_bonferroni"] = np.nan
    out["p_bh"] = np.nan
    out["family_size"] = 0
    for _, idx in out.groupby(families, sort=False).groups.items():
        p = out.loc[idx, "p"].to_numpy(float)
        bonf, bh = _adjust(p)
        out.loc[idx, "p_bonferroni"] = bonf
        out.loc[idx, "p_bh"] = bh
        out.loc[idx, "family_size"] = int((~np.isnan(p)).sum())
    return out


def holm(p: pd.Series | np.ndarray) -> np.ndarray:
    """Holm's step-down adjustment of one family's p values (NaN: no test, left NaN and
    counted in no family): family-wise error at alpha, uniformly more powerful than
    Bonferroni. A study claims 'equivalent' across its campaigns only with these (issue
    #39: h100 study, mm-4096's TOST p 0.018 is 0.071 after Holm over its 8 tests).

    Parameters
    ----------
    p : array of float
        The family's p values, NaN where a comparison has no test.

    Returns
    -------
    array of float
        Each p adjusted (at most 1), in the order given; NaN stays NaN.

    Examples
    --------
    The smallest of three is multiplied by 3, the next by 2 (and never below the one
    before), the largest by 1:

    >>> holm([0.01, 0.04, 0.03])
    array([0.03, 0.06, 0.06])
    >>> holm([0.02, float("nan")])  # one test in the family
    array([0.02,  nan])
    """
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p, float)
    out = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out
