"""Every traced workload: the program runs as it would untraced (same exit status), and the trace is whole (a
trailer, no dropped events, no wrapper slot exhausted; the coverage workloads also 0 unwind failures and every free
paired with a traced allocation), checked for each workload."""
import pytest

from conftest import WORKLOADS

# Workloads whose untraced run is the oracle for the exit status (the others must exit 0).
WITH_PLAIN = {"torch_nocache", "torch_expandable", "torch_async", "cupy_pool", "jax_noprealloc", "jax_prealloc",
              "leaky", "leaky_shared", "driver_api", "pinned_register", "dataloader", "profiler", "cost",
              "graphs_compile"}
PLAIN_OF = {"dataloader_fork": "dataloader"}
# The coverage workloads: also no unwind failure, and every free pairs with an allocation.
COVERAGE = ("torch_nocache", "torch_expandable", "torch_async", "cupy_pool", "jax_noprealloc", "jax_prealloc")


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_exit_status(suite, row, name):
    """exit status traced == untraced == 0"""
    traced = suite.run(name)
    plain_name = PLAIN_OF.get(name, name if name in WITH_PLAIN else None)
    plain = suite.run(plain_name, traced=False).rc if plain_name else 0
    row("untraced rc %s" % plain, "traced rc %s" % traced.rc, "== (and 0)")
    assert plain == 0 and traced.rc == plain, "%s: untraced rc %s, traced rc %s; output tail:\n%s" % (
        name, plain, traced.rc, traced.output[-2000:])


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_tool_health(suite, row, name):
    """tool health: trailer, 0 dropped events, 0 wrapper slots exhausted"""
    h = suite.run(name).health
    keys = ["dropped_events", "wrapper_slots_exhausted"] + (["unwind_failures"] if name in COVERAGE else [])
    measured = "trailer %s, truncated %s; %s" % (h.get("has_trailer"), h.get("truncated"),
                                                 ", ".join("%s %s" % (k, h.get(k)) for k in keys))
    row("trailer, 0 each", measured, "== 0 each")
    assert h.get("has_trailer") is True and not h.get("truncated") and all(h.get(k) == 0 for k in keys), \
        "%s: health %s" % (name, h)


@pytest.mark.parametrize("name", COVERAGE)
def test_every_free_pairs(suite, row, name):
    """every free pairs with a traced allocation"""
    unmatched = suite.run(name).trace.replay(lambda e: False)["unmatched"]
    row("0 unpaired", "%d unpaired" % len(unmatched), "== 0")
    assert not unmatched, "%s: frees of nothing traced: %s" % (
        name, [(e.seq, e.api, hex(e.addr)) for e in unmatched[:10]])
