"""What tracing costs on a GPU: a loop of tensor allocations without caching (two events per iteration), untraced,
traced without Python frames and with them; every event is recorded, and the cost per event is reported (the CPU
benchmark in bench/ is where it is measured precisely: docs/performance.md). Workload: cost_loop.py."""
import pytest

from tracekit import to_int


@pytest.mark.parametrize("name", ["cost_nopy", "cost"])
def test_every_iteration_recorded(suite, row, name):
    """cost loop: events recorded >= 2 per iteration"""
    run = suite.run(name)
    want = 2 * (to_int(run.truth.get("n"), 0) + to_int(run.truth.get("warmup"), 0))
    got = sum(1 for e in run.trace.events if e.kind in ("device", ""))
    row(">= %d (2 per iteration)" % want, got, ">=")
    assert got >= want, "%d events for %d expected" % (got, want)


def test_cost_per_event_reported(suite, row):
    """cost per event: untraced, traced without Python frames, traced with them (reported, not compared)"""
    us = {}
    for name in ("cost", "cost_nopy"):
        us[name] = (to_int((suite.run(name, traced=False) if name == "cost" else suite.run(name)).truth.get(
            "ns_per_event"), 0)) / 1000.0
    us["cost_py"] = to_int(suite.run("cost").truth.get("ns_per_event"), 0) / 1000.0
    row("-", "untraced %.2f µs/event; traced without Python frames %.2f; with them %.2f" % (
        us["cost"], us["cost_nopy"], us["cost_py"]), "reported")
    assert all(v > 0 for v in us.values()), us
