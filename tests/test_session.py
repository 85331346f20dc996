"""The test session itself: what the suite relies on from its tools."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("session-check")


def test_tests_of_one_xdist_group_run_in_one_test_process(request):
    """Tests of one ``xdist_group`` share something machine-wide (the module's Ray
    cluster and its node folders, Chromium) and must run in one test process. Under
    ``--dist loadgroup`` pytest-xdist groups them by suffixing their node ids; pytest 9.2
    keeps node ids elsewhere, so with pytest-xdist 3.8 the suffix, and the grouping, are
    silently lost and such tests run side by side, disturbing each other."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by a --dist loadgroup worker")
    assert request.node.nodeid.endswith("@session-check"), (
        f"pytest {pytest.__version__} with this pytest-xdist does not group tests: install "
        "the test tools from constraints.txt (pip install -c constraints.txt -e '.[dev]')"
    )
