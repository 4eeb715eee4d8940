"""A kind's meaning in its module (issue 43): what the paper says of an environment is what
its kind renders from the options that ran; the review reads a runtime's version only where
the paper names one; an edited kind rebuilds the paper (tests/test_analysis_reruns.py)."""

from __future__ import annotations

from containertax.publishing.review import check_runtime_labels


def test_a_runtime_named_like_its_environment_raises_no_false_version_warning():
    """A kind whose runtime is named like the environment that runs it: the tables print
    the environment's numbers after its id, which the review once read as three versions
    the records never ran. Planted: a system table naming a version that did not run is
    still caught, and a recorded version never named."""
    system = "Item Value\nPodman 4.3.1\n"
    tables = ("Podman 0.52 [0.40, 0.61]\nPodman 1.7 s\nmodel Podman 12.25 [11.0, 13.1] %\n")
    ran = {"Podman": {"4.3.1"}}
    assert len(check_runtime_labels(system + tables, ran)) == 3  # the defect, as measured
    assert check_runtime_labels(system + tables, ran, {"Podman"}) == []
    wrong = check_runtime_labels("Item Value\nPodman 4.4.0\n" + tables, ran, {"Podman"})
    assert [p.message for p in wrong] == [
        "the paper names Podman 4.4.0, but the records ran Podman 4.3.1",
        "the records ran Podman 4.3.1; the paper never names it with that version"]
