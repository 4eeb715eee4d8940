"""The stopping rule as part of the design (config `stopping:`): its looks, its alpha
spending and the decision at one look, and what a rule can be expected to save before a
campaign starts (`plan`, read by the rehearsal).

The rule's statistics live here, below the campaign's config and schedule, because the
plan (check, the workflow's checkpoints, the rehearsal) needs them before any record
exists; analysis/sequential.py applies them to a campaign's records at each look. Rule
and its guarantees: analysis/sequential.py's docstring and docs/measurement.md,
"Sequential stopping". numpy/scipy only, imported by the functions that compute (a cell step and the
workflow's planning read the looks without them: tests/test_cli_speed.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from containertax.campaign import designs

if TYPE_CHECKING:  # numpy and scipy load where a rule is computed, not where it is planned
    import numpy as np

SPENDING = ("obrien-fleming", "pocock")


@dataclass(frozen=True)
class Rule:
    """A stopping rule: spending function, looks (in blocks) and the study's alpha and
    equivalence margin."""
    min_blocks: int
    max_blocks: int
    every: int
    spending: str = "obrien-fleming"
    alpha: float = 0.05
    margin: float = 0.05

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> Rule:
        """The rule of a config with `stopping:` (its looks from `looks`; alpha and margin
        the analysis', schema defaults where a config not yet validated leaves them out)."""
        at = looks(data)
        analysis = data.get("analysis", {})
        return cls(min_blocks=at[0], max_blocks=at[-1],
                   every=at[1] - at[0] if len(at) > 1 else 1,
                   spending=str(data["stopping"].get("spending", "obrien-fleming")),
                   alpha=float(analysis.get("alpha", 0.05)),
                   margin=float(analysis.get("equivalence_margin", 0.05)))

    @classmethod
    def from_campaign(cls, campaign: Any) -> Rule:
        """The campaign's rule."""
        return cls.from_config(campaign.raw)

    def looks(self) -> list[int]:
        """Blocks at each look: min_blocks, then every `every`, and max_blocks last."""
        out = list(range(self.min_blocks, self.max_blocks, max(self.every, 1)))
        return [*out, self.max_blocks] if self.max_blocks not in out else out

    def spent(self) -> np.ndarray:
        """The level a_k of each look: increments of the spending function."""
        import numpy as np

        t = np.array(self.looks(), dtype=float) / self.max_blocks
        return np.diff(np.concatenate([[0.0], spending(self.spending, t, self.alpha)]))


def spending(kind: str, t: np.ndarray, alpha: float) -> np.ndarray:
    """Lan and DeMets (1983) spending functions: error spent up to information fraction t
    (alpha at t = 1). O'Brien-Fleming-type 2 - 2 Phi(z_{1-alpha/2} / sqrt t) spends almost
    nothing early; Pocock-type alpha log(1 + (e - 1) t) spends evenly."""
    import numpy as np
    from scipy import stats as sps

    t = np.clip(np.asarray(t, dtype=float), 1e-12, 1.0)
    if kind == "obrien-fleming":
        return 2.0 - 2.0 * sps.norm.cdf(sps.norm.ppf(1 - alpha / 2) / np.sqrt(t))
    if kind == "pocock":
        return alpha * np.log1p((math.e - 1) * t)
    raise ValueError(f"unknown spending function {kind!r}; choose one of {SPENDING}")


def min_blocks_exact(alpha: float) -> int:
    """The fewest blocks at which an exact sign-flip or Wilcoxon signed-rank test (the
    paper's secondary tests) can reach alpha: smallest attainable two-sided p 2^(1-n)."""
    n = 2
    while 2.0 ** (1 - n) >= alpha:
        n += 1
    return n


# --- one look -----------------------------------------------------------------------


def look_stats(mean: np.ndarray, sd: np.ndarray, n: int, a: float,
               margin: float) -> dict[str, np.ndarray]:
    """Vectorised decisions of one look at level a from the mean and SD of n log ratios:
    difference shown, equivalence shown, and the (1 - a) repeated interval (log scale).
    Zero SD: the interval is the point; a mean of exactly 0 shows no difference."""
    import numpy as np
    from scipy import stats as sps

    mean, sd = np.asarray(mean, float), np.asarray(sd, float)
    se = sd / math.sqrt(n)
    df = n - 1
    q = sps.t.ppf(1 - a / 2, df)
    q_tost = sps.t.ppf(1 - a, df)
    band = math.log1p(margin)
    with np.errstate(divide="ignore", invalid="ignore"):
        tstat = np.where(se > 0, mean / se, np.where(mean == 0, 0.0, np.inf))
    p = 2 * sps.t.sf(np.abs(tstat), df)
    diff = p < a
    equiv = (mean - q_tost * se > -band) & (mean + q_tost * se < band)
    return {"p": p, "difference": diff, "equivalence": equiv,
            "low": mean - q * se, "high": mean + q * se}


def run_rule(d: np.ndarray, rule: Rule) -> dict[str, np.ndarray]:
    """Apply the rule to simulated or replayed log ratios d (replicates x max_blocks, in
    block order) of one comparison: the look each stops at, its blocks, its answer and
    its repeated interval (log scale). NaN blocks are not allowed here."""
    import numpy as np

    d = np.atleast_2d(np.asarray(d, float))
    reps = d.shape[0]
    csum, csq = np.cumsum(d, axis=1), np.cumsum(d * d, axis=1)
    stopped = np.zeros(reps, bool)
    out = {k: np.full(reps, np.nan) for k in ("blocks", "low", "high", "p")}
    out["answer"] = np.full(reps, "", dtype=object)
    for n, a in zip(rule.looks(), rule.spent(), strict=True):
        mean = csum[:, n - 1] / n
        var = np.maximum(csq[:, n - 1] - n * mean * mean, 0) / (n - 1)
        s = look_stats(mean, np.sqrt(var), n, a, rule.margin)
        now = ~stopped & (s["difference"] | s["equivalence"] | (n == rule.max_blocks))
        for k in ("low", "high", "p"):
            out[k][now] = s[k][now]
        out["blocks"][now] = n
        out["answer"][now] = np.where(s["difference"][now], "difference",
                                      np.where(s["equivalence"][now], "equivalence", "none"))
        stopped |= now
    return out


# --- the rule in the config ------------------------------------------------------


def looks(data: dict[str, Any]) -> list[int]:
    """Blocks at each look of a validated config's stopping rule (empty without one): from
    min_blocks every `every` (default: the design's period), and repetitions last. One home:
    Rule and the workflow's checkpoints read these."""
    stop = data.get("stopping")
    if not stop:
        return []
    reps = int(data["repetitions"])
    period = designs.period(data["schedule"]["design"], len(data["environments"])) or 1
    every = int(stop.get("every") or period)
    at = list(range(int(stop["min_blocks"]), reps, every))
    return [*at, reps]


def summary(data: dict[str, Any], cells: int) -> str:
    """The plan under a stopping rule, in words (`containertax check`)."""
    at = looks(data)
    per_block = cells // max(int(data["repetitions"]), 1)
    spend = data["stopping"].get("spending", "obrien-fleming")
    return (f"stopping: {spend} spending, looks after {', '.join(map(str, at))} blocks; "
            f"{per_block * at[0]} to {cells} cells (every model stopping at its first "
            "look, or none before the maximum)")


def problems(data: dict[str, Any]) -> list[str]:
    """What a stopping rule cannot do as configured, with the fix."""
    stop = data.get("stopping")
    if not stop:
        return []
    out = []
    reps, lo = int(data["repetitions"]), int(stop["min_blocks"])
    alpha = float(data.get("analysis", {}).get("alpha", 0.05))
    exact = min_blocks_exact(alpha)
    design = data["schedule"]["design"]
    period = designs.period(design, len(data.get("environments", {}))) or 1
    if "import_csv" in data.get("analysis", {}):
        out.append("key 'stopping': an import has no blocks to stop; remove stopping "
                   "(benchmarks/replay_stopping.py replays a rule on imported records).")
    if stop.get("max_blocks", reps) != reps:
        out.append(f"key 'stopping.max_blocks': {stop['max_blocks']} differs from "
                   f"repetitions {reps}, which is the maximum; set them equal or drop "
                   "stopping.max_blocks.")
    if lo > reps:
        out.append(f"key 'stopping.min_blocks': {lo} exceeds repetitions {reps}; lower it.")
    if lo < exact:
        out.append(f"key 'stopping.min_blocks': {lo} blocks cannot let an exact sign-flip "
                   f"or Wilcoxon test reach alpha {alpha:g} (smallest p 2^(1-n)); set at "
                   f"least {exact}.")
    for key, value in (("min_blocks", lo), ("every", stop.get("every") or period)):
        if int(value) % period:
            out.append(f"key 'stopping.{key}': {value} is not a whole number of the "
                       f"{design} design's period of {period} blocks; use a multiple of "
                       f"{period} so that every look sees balanced blocks.")
    return out


# --- what a rule can be expected to save, before the campaign ------------------------

# Per-block SDs of a log ratio to plan with (planning values, not measurements: the spread
# of a comparison is known only at its first look): a quiet workload, a middling one and a
# noisy one. results/h100-stopping measured both ends on the H100 (a 10k fp32 matmul that
# stopped at its first look, a bf16 4096 matmul that ran to the maximum).
PLAN_SD = (0.005, 0.02, 0.05)


def default_stopping(data: dict[str, Any]) -> dict[str, Any] | None:
    """The rule a config without one could add: O'Brien-Fleming-type spending, the first
    look at the fewest whole design periods with which the exact tests reach alpha, then
    every period; None where the repetitions leave no look before the last."""
    alpha = float(data.get("analysis", {}).get("alpha", 0.05))
    period = designs.period(data["schedule"]["design"], len(data["environments"])) or 1
    first = -(-min_blocks_exact(alpha) // period) * period
    if first >= int(data["repetitions"]):
        return None
    return {"spending": "obrien-fleming", "min_blocks": first}


def expected_blocks(rule: Rule, comparisons: int, sd: float, effect: float,
                    sims: int = 2000, seed: int = 20261124) -> dict[str, float]:
    """Monte Carlo, per model: the blocks it runs when each of its `comparisons` primary
    comparisons (one metric each, all against one reference, so correlated 0.5) has true
    ratio 1 + effect and per-block log-ratio SD sd. A model runs until every comparison has
    its answer: the largest of their stopping blocks. Seeded: the same plan every time."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = rule.max_blocks
    own = rng.normal(0.0, sd / math.sqrt(2), (comparisons, sims, n))
    ref = rng.normal(0.0, sd / math.sqrt(2), (sims, n))
    blocks = np.max([run_rule(math.log1p(effect) + own[j] - ref, rule)["blocks"]
                     for j in range(max(comparisons, 1))], axis=0)
    return {"mean": float(blocks.mean()),
            "first_look": float(np.mean(blocks == rule.looks()[0]))}


def plan(data: dict[str, Any], comparisons: int, sds: tuple[float, ...] = PLAN_SD
         ) -> dict[str, Any]:
    """The expected blocks per model under the config's rule, or under default_stopping
    where it has none (said so), for each planning SD with no true difference (the costly
    case: equivalence must be shown) and with a clear one (twice the equivalence margin)."""
    own = bool(data.get("stopping"))
    stop = data.get("stopping") if own else default_stopping(data)
    if stop is None:
        return {"rule": None, "why": (
            f"{data['repetitions']} repetitions leave no look before the last (the exact "
            f"tests need {min_blocks_exact(float(data.get('analysis', {}).get('alpha', 0.05)))}"
            " blocks); no stopping rule can save runs")}
    rule = Rule.from_config({**data, "stopping": stop})
    scenarios = []
    for sd in sds:
        for effect in (0.0, 2 * rule.margin):
            e = expected_blocks(rule, comparisons, sd, effect)
            scenarios.append({"sd": sd, "effect": effect, "expected_blocks": e["mean"],
                              "first_look": e["first_look"]})
    return {"rule": {"spending": rule.spending, "looks": rule.looks(), "from_config": own,
                     "stopping": stop}, "comparisons": comparisons, "scenarios": scenarios}
