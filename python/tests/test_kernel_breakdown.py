"""cpu tier (needs torch; skipped by name without it): tools/bench/kernel_breakdown.py's interval
arithmetic over a call's kernels: the busy time is the union of their intervals (overlaps counted
once), and an idle gap runs from the furthest end so far to the next start, named by the kernel
that reached that end."""

import pytest
from conftest import bench_tool

pytest.importorskip("torch", reason="kernel_breakdown needs PyTorch")


@pytest.fixture(scope="module")
def kernel_breakdown():
    return bench_tool("kernel_breakdown")


def test_busy_time_counts_overlaps_once(kernel_breakdown):
    intervals = [("a", 0.0, 10.0), ("b", 5.0, 15.0), ("c", 7.0, 9.0), ("d", 20.0, 30.0)]
    assert kernel_breakdown.busy_time(intervals) == pytest.approx(25.0)
    assert kernel_breakdown.busy_time([]) == 0.0


def test_gaps_run_from_the_furthest_end(kernel_breakdown):
    # b lies inside a: the gap before c starts at a's end, not b's.
    intervals = [("a", 0.0, 10.0), ("b", 2.0, 5.0), ("c", 12.0, 20.0), ("d", 40.0, 50.0), ("e", 41.0, 42.0)]
    assert kernel_breakdown.longest_gaps(intervals) == [(20.0, "c", "d"), (2.0, "a", "c")]
    assert kernel_breakdown.longest_gaps(intervals, count=1) == [(20.0, "c", "d")]
    assert kernel_breakdown.longest_gaps([("a", 0.0, 1.0), ("b", 0.5, 2.0)]) == []
