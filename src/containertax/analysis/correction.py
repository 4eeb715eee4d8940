"""Multiple-comparison correction across the whole family of tests: Bonferroni (family-wise
error) and Benjamini-Hochberg (false discovery rate), side by side."""

from __future__ import annotations

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests


def correct(results: pd.DataFrame) -> pd.DataFrame:
    """Bonferroni and Benjamini-Hochberg across the whole family of primary tests."""
    if results.empty:
        return results.assign(p_bonferroni=[], p_bh=[])
    p = results["p"].to_numpy(float)
    ok = ~np.isnan(p)
    bonf = np.full_like(p, np.nan)
    bh = np.full_like(p, np.nan)
    if ok.any():
        bonf[ok] = multipletests(p[ok], method="bonferroni")[1]
        bh[ok] = multipletests(p[ok], method="fdr_bh")[1]
    return results.assign(p_bonferroni=bonf, p_bh=bh, family_size=int(ok.sum()))
