r"""The committed H100 campaigns' numbers.tex, rebuilt from their raw records, is what it was
before the architecture refactor (#10): the expected files under tests/data/numbers/ were
computed from main at commit 254387c with `snakemake <root>/paper/numbers.tex`, then
regenerated for the paper issue (#12): the same statistics (every shared value equal), new
keys for the text's conditions (\ifctx), percentages in math mode and no signed zero;
then regenerated for the design-aware statistics (#11): estimates are geometric-mean ratios
of the per-block values with t intervals (wider at 4 blocks than the BCa intervals were),
the primary test is the paired t, counts are of the primary family only, and peak RSS of
these records (ru_maxrss, before VmHWM) is max_rss_rusage_mib, never compared.

h100-engine (run 2026-11-22) was added with its numbers as computed at its first commit,
h100-engine-gqa (run 2026-11-23) likewise; all four were then regenerated for one new key,
host-names (the paper no longer calls two GPUs under one host name "one host"), every
other value unchanged. Then regenerated for degenerate data and small-n details (#21,
#23): new keys only (margin-ratio, margin-low, margin-high, margin-band: the TOST band
printed as the ratio band [-4.76 %, +5 %]; blocks-dropped-any/-max, not-estimable,
no-interval, has-raw-scale, raw-scale-metrics; hl/N/has-rel, has-ci, why, not-estimable)
and rel-ci/<model>/<env>/peak_memory_gib '[--, --]' -> '[n.e.]' (a constant metric has
no interval); no estimate, interval or p changed (g_z and the Wilcoxon p are not in
numbers.tex). Then for the realised order (#23): eleven new keys (order-known,
positions-balanced, position-counts, ...: h100-engine and h100-engine-gqa not
position-balanced, native-aa second in all 6 blocks; h100 and h100-matmul balanced) and
findings one more (the order_effects info finding), every other value unchanged.
Then for the decision table (#23): new keys for the A/A
control's criterion (aa-resolution, aa-inconclusive, per-metric A/A lists, each A/A row's
TOST at the resolution and status) and the verdicts' caveats; h100-engine and
h100-engine-gqa have one model, so their start-up cost is no longer said to hold "for every
model" (startup-robust 0, startup-one 1, with the caveat that their A/A control is
inconclusive on start-up latency), and one more finding (aa_resolution); every other value
unchanged. All four were regenerated together once these changes were merged, with the
clock and host truth (#23: the fraction of each run's measured window under each
clock-lowering reason, where each environment ran): against the files at f8bfe35 no
estimate, interval, p or count changed but `findings` (+2 on h100 and h100-matmul, +3 on
the engine campaigns: order effects, A/A resolution, throttled window), `startup-robust`
(engine campaigns, one model) and the constant peak memory's interval ('[n.e.]'). The
outlier rule per environment (#23) replaced the key outlier-z (3.5) by the thresholds it
used (outlier-n, outlier-k, outlier-pooled-z, outlier-own-z, outlier-level); no value was
flagged differently in these campaigns. The machine-adjusted estimate now keeps the blocks
(equal to the paired one where every block ran on one machine): unchanged at the printed
precision.

A deliberate change of the statistics changes these numbers: regenerate the expected file
with the command above and say so in the commit.

Then for the paper as an argument (#24): new keys only (paper metadata paper-*, the data's
dates data-*, the discussion's prior results and Sani's arithmetic sani-*, start-up cost
startup-cost-*, causal-design, compiled runs compiled-*/steady/*, util-has); a key-by-key
comparison against the files before found no existing key changed or missing (the report
split of #22 left every byte as it was). Then paper-intro of h100 and h100-engine-gqa was
reworded: the paper review flagged 'model sizes' and 'sdpa_gqa' as config names in the text;
no other key changed. Then for the findings table (#31), all four regenerated: no count,
p, verdict or condition changed; relative differences and their intervals are printed with
as many decimals as it takes to show an interval's ends apart (texts.interval_texts:
'$0.0$ [$0.0$, $+0.1$]' became '$+0.05$ [$-0.03$, $+0.12$]'-like texts) in rel/, rel-ci/,
hl/N/rel and ci, aa/N/rel and ci, and the prior-work rows that quote the headline; the
compiled-run comparisons steady/* quote the findings' comparisons (estimate and interval);
and new keys only: the findings rule's lists (f-, fa-, q-, l-, ql-, appendix-count,
thermal-count, interval-truncated), resolution, headline-overridden/-configured,
seq-headline, hl/N/sequential and look-words; the outlier finding's message says 'one value
is' / 'N values are' (no '1 values') and no config key. The discussion's start-up cost
(startup-cost-min/-max, sani-startup-share, the prior-work rows quoting it) is now each
model's comparison's difference of means, the range the abstract prints (startup-min/-max),
not a mean pooled over models: h100-matmul 0.20 -> 0.19 to 0.21 s, h100 0.16 to 0.16 ->
0.16 to 0.17 s; and excluded-family counts the compile-excluded comparisons. Then all four
for the clock finding's shares: '13-18 %' reads '13 to 18 %' (a hyphen between numbers can
break a line and read back as one number); and one new key, sani-startup-none (0 in all
four: their containers start slower), so that a container starting no slower says 'none
of their gap'; no other key changed. Then for integrity (#44), all four regenerated: new
keys has-declared-mounts and declared-mounts (their configs now declare the /etc mount
with a reason), and on h100, h100-engine and h100-engine-gqa one more finding (the images
warning: their Docker runs used 2, 4 and 4 image ids of containertax-hostsw:1, built anew
on each lent machine), so findings +1, ql-count 2 -> 3 and a third ql/3/* item; a
key-by-key comparison found no other key changed.

Then for the facts table and the claims audit (#39), all four regenerated. The runs that
compiled are read from each record (its first warm-up request over twice the model's
median), not taken as the first run of each visit: h100-engine 4 -> 1 (native, block 1:
55.2 s against 13.6 s), h100-engine-gqa 4 -> 2; so the compile-excluded comparisons
(steady/*, the excluded family's f/, fa/, l/ rows, appendix-count, others-wall-max) keep
more blocks, and h100-engine's compile-excluded process time (+15.8 % [+1.5, +32.2]) and
energy now reach the abstract's list. The abstract's findings are ranked by the size of
the difference (f/N renumbered in h100), those restating the start-up cost in per cent left
out of the abstract (f-abstract, f-shown, f-more, f-said, f-listed; new), and a primary
verdict that is not significant is listed apart (fp-*; h100's microbench row moved from
f/4). New keys: blocks-each, blocks-uniform, blocks-per-model, compiled-each, -model,
-models, -model-runs, -wall-min (compiled-envs gone), steady/*/aa-as-much,
sani-same-quantity; headline-metric names each model's metric where they differ (printed
only where the configured headline was overridden); prior-rows lose Arango's 2.89 % (now
arango2019, answer none) and Medeiros' pairing with the headline. No estimate, interval or
p of a primary or secondary comparison changed. Merged with integrity's, h100-engine was
regenerated from the merged code: each key holds the value of the branch that changed it
(a key-by-key three-way comparison with the merge base found no key both changed).

Then for the abstract's 250 words (#39/#43: h100-engine-balanced 328, h100-stopping 339),
all four regenerated: the abstract names one finding beyond the headline (h100-engine:
f-abstract, f-shown 2 -> 1, f-more 1 -> 2) and one data-quality finding (new q-abstract,
q-more, q-listed: the findings section lists them all), the A/A comparisons are listed in
the findings section (new fa-listed) and the reference's kind in the abstract's few words
(new ref-kind); no other key changed.

Then for the split blocks (#39: a block whose runs ran on more than one GPU is named beside
the headline, with the headline without it), all four regenerated: new keys only,
split-count (0 in all four: every block of these campaigns ran on one GPU), split-each
(empty) and has-machine-adjusted (1 on h100-engine-gqa, whose runs measured two GPUs, else
0; the methods print the machine-adjusted headline only where it holds); no other key
changed. Then for Hoefler and Belli's rules (#39), all four regenerated: new keys only,
each headline ratio's base (hl/N/base: the reference's mean with its unit, hl/N/n: the
blocks it rests on, hl/N/ref, hl-bases) and the checklist (hb-count, hb/N/rule, status,
where); a key-by-key comparison found no other key changed. Rebased onto main at 9ec3b32
(whose files here were those of this branch's base) and regenerated, all four: no new key
(the new keys of #39 are those above: split-count, split-each, sp/*, has-machine-adjusted,
hl/N/base, hl/N/n, hl/N/ref, hl-bases, hb-count, hb/N/*); two texts of the checklist
changed, hb/2/where (the hardware the records show, '1 GPU: NVIDIA H100 80GB HBM3', not the
template's 'one GPU per run', which a CPU campaign printed too) and hb/4/where (the
estimator of the campaign's design, paired here: 'geometric means of the per-block
ratios'); no other key changed. Then for the rules in their own words (#39), all four:
hb/N/rule quotes each rule as the paper's box states it (the paraphrase from memory had
swapped rules 7 and 8), and hb/7/status, hb/7/where and hb/8/status, hb/8/where trade
places (rule 7 is the sound comparison, met by the named test; rule 8 the choice of mean,
median or percentiles, met by a latency table); the files were edited key by key and then
matched by this test's build from the raw records; no other key changed. Then for the
claims audit of h200-stopping-hsd (#39: 'at most 19 % of their gap' from a point
estimate), all four regenerated: sani-startup-share is
the upper end of the paired 95 % t interval of the start-up difference of the models that
ran Sani et al.'s product over their gap (h100 17 -> 21: matmul-10k's interval reaches
0.212 s of 1.03 s), '--' where no model did (h100-matmul, h100-engine, h100-engine-gqa:
20, 21, 23 -> '--', never printed there); one new key, sani-startup-bounded (1 on h100,
else 0); no other key changed. Then for h200-factorial's audit (#39: a campaign of Docker
set-ups only printed 'native versus containerised execution'), all four regenerated: one
new key, has-native (1 in all four: each has a native environment); no other key
changed. Then for the threat "Multiple comparisons" (#39: it left out the phases family),
two new keys, phases-family and phases-aa-family (0 in all four: no timelines in their
records), and three keys no text used removed (f-each, fa-each, q-each, with the macros
\findingitem and \aafindingitem); edited key by key, then matched by h100-matmul's build
from its raw records; no other key changed. Then for the demo's abstract (#39: 282 words
against 250 with four headline rows), all four regenerated: new keys only, hl-one-metric
(1 on h100-matmul, whose two headline rows share one metric, which its abstract now names
once; else 0), hl-metric (the shared metric's words, empty on h100, whose rows have
several) and f-budget (0 in all four: none has more than three headline rows with a
finding to name); no other key changed. Then for a look's failed check (#39: a headline at
the maximum whose check failed printed only "inconclusive"), all four regenerated: new keys
only, hl/N/has-check-answer (0 in all four: none has a stopping rule) and hl/N/check-answer
('--'); no other key changed. Then for the referee's audit of the words (sentences
the records contradicted), all four regenerated from their raw records: new keys only,
findings-problems and findings-notes (the quality section's warnings and errors apart from
its info notes: 2+3, 3+3, 4+3, 4+4), blocks-split-count and blocks-split-each (0 and '--':
no block split), appendix-tables, appendix-elsewhere, -families and -words (the comparisons
left for the appendix that Tables 'estimates' and 'tests' hold, and those in no table:
h100-engine-gqa 20 and 2 without the blocks that compiled, the others all in the tables),
excluded-aa-family (2 on the engine campaigns, else 0) and f-passed, f-passed-words (1 and
'start-up latency' on h100-engine, whose abstract's 'largest' was the largest besides
start-up; else 0 and '--'); no other key changed. Then for the demo's abstract again (#39: 264
words with four headline rows, an unresolved A/A control and a named data-quality finding),
all four regenerated: one new key, q-budget (0 in all four: at most three headline rows, so
the abstract still names its first data-quality finding); no other key changed. Then for a
second referee audit (#39), all four regenerated: new keys only, headline-state ('In the
steady state the' in all four: every headline model warmed up; h100-sani-cold's cold
process is no longer called the steady state) and cooldown-missing, -runs, -each (0 missing
in all four: every run has its cooldown record); no other key changed. Then for the
machine-adjusted headline (#39: h100-stopping-exact printed it at 95 % beside its
look-adjusted headline, and called the two equal), all four regenerated: new keys
machine-adjusted-same (the headlines a fixed effect per machine leaves unchanged, named, not
printed again: 'llama3-8b in docker' on h100-engine-gqa, '--' on the others),
has-machine-adjusted-same (1 on h100-engine-gqa) and has-machine-adjusted-differs (0 in all
four), and machine-adjusted now holds only a headline the adjustment changes: h100-engine-gqa
'llama3-8b in docker: +0.1 % [-0.1, +0.3]' -> '--' (its adjusted estimate and interval
equal the paired ones); no other key changed."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("campaign", ["h100-matmul", "h100", "h100-engine", "h100-engine-gqa"])
def test_numbers_of_committed_campaign_are_unchanged(committed_paper, campaign):
    """From the paper built once per run from the committed raw records (conftest)."""
    numbers = f"results/{campaign}/paper/numbers.tex"
    target = committed_paper(campaign, numbers) / numbers
    expected = (REPO / "tests" / "data" / "numbers" / f"{campaign}.tex").read_text()
    assert target.read_text() == expected
