"""The statistics a reader can try alone (issue 43): the public functions of the paired
comparison, the TOST, the correction and the sequential boundaries carry numpydoc
Parameters, Returns and Examples (pingouin's style), and the examples run here."""

from __future__ import annotations

import doctest

import pytest

from containertax.campaign import stopping
from containertax.statistics import comparisons, correction

DOCUMENTED = {
    comparisons: ("paired_estimate", "welch_estimate", "signflip_p", "min_signflip_p",
                  "tost_paired", "tost_welch", "primary", "compare", "hedges_correction",
                  "mde_at_level"),
    correction: ("correct", "holm"),
    # the boundaries: spending functions, their z levels and crossing probabilities, the
    # constants of Jennison and Turnbull's tables, and the exact boundaries on the t law
    stopping: ("spending", "exact_boundaries", "min_blocks_exact", "crossing", "z_constant",
               "z_levels"),
}


@pytest.mark.parametrize("module", DOCUMENTED, ids=lambda m: m.__name__)
def test_the_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted >= len(DOCUMENTED[module])


@pytest.mark.parametrize(("module", "name"), [(m, n) for m, names in DOCUMENTED.items()
                                              for n in names])
def test_each_function_says_its_parameters_returns_and_an_example(module, name):
    doc = getattr(module, name).__doc__ or ""
    for section in ("Parameters\n    ----------", "Returns\n    -------",
                    "Examples\n    --------", ">>> "):
        assert section in doc, f"{module.__name__}.{name} lacks {section.split()[0]!r}"


def test_a_wrong_example_is_caught():
    """Planted: min_signflip_p's example with a wrong value fails the runner above."""
    doc = comparisons.min_signflip_p.__doc__.replace("(0.125, 0.03125)", "(0.25, 0.03125)")
    test = doctest.DocTestParser().get_doctest(doc, vars(comparisons), "planted", None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=lambda _text: None)
    assert runner.summarize(verbose=False).failed == 1
