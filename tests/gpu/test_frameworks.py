"""Frameworks that never call cudaMalloc: CuPy (static cudart, driver through cuGetProcAddress) against its pool's
own counters, and JAX/XLA (dlopen + dlsym, cuMemCreate) against its memory_stats. Workloads: cupy_pool.py,
jax_prealloc.py, jax_noprealloc.py. Latest figures: docs/validation.md."""
import pytest

from tracekit import DEVICE_SIDE_KINDS, fmt_bytes, to_int


def _has_cupy(stack):
    return bool(stack) and any("cupy" in f.module.lower() for f in stack)


def _device(e):
    return e.kind in DEVICE_SIDE_KINDS and e.device >= 0


def _cupy(suite):
    run = suite.run("cupy_pool")
    ok, why = run.trace.times_comparable(run.truth)
    if not ok:
        pytest.skip("needs event times on the workload's clock: " + why)
    return run


def test_cupy_live_at_checkpoint(suite, row):
    """CuPy: live device bytes through CuPy at the checkpoint >= MemoryPool total_bytes()"""
    run = _cupy(suite)
    cp = run.truth.get("checkpoint") or {}
    total = to_int(cp.get("total_bytes"))
    live = run.trace.replay(_device, until_ns=to_int(cp.get("mono_ns")))["live"]
    mine = sum(e.size for e in live if _has_cupy(e.stack))
    row("total_bytes() = %s" % fmt_bytes(total), fmt_bytes(mine), ">=")
    assert total and mine >= total, "pool total_bytes %s, traced through CuPy %s" % (total, mine)


def test_cupy_stacks_pass_through_cupy(suite, row):
    """CuPy: every device allocation live at the checkpoint has a stack through a CuPy module"""
    run = _cupy(suite)
    cp = run.truth.get("checkpoint") or {}
    live = run.trace.replay(_device, until_ns=to_int(cp.get("mono_ns")))["live"]
    mine = [e for e in live if _has_cupy(e.stack)]
    row("all of them", "%d of %d" % (len(mine), len(live)), "== all")
    assert live and len(mine) == len(live), "not through CuPy: %s" % [
        (e.api, e.size) for e in live if not _has_cupy(e.stack)][:10]


def test_cupy_pinned(suite, row):
    """CuPy: pinned allocations through CuPy >= the requests' blocks and bytes"""
    run = suite.run("cupy_pool")
    pinned = [e for e in run.trace.allocs(lambda e: e.kind == "pinned_host") if _has_cupy(e.stack)]
    want_n = to_int(run.truth.get("expected_min_pinned_blocks"))
    want_b = to_int(run.truth.get("expected_min_pinned_bytes"))
    got_b = sum(e.size for e in pinned)
    row(">= %s blocks, >= %s" % (want_n, fmt_bytes(want_b)), "%d blocks, %s" % (len(pinned), fmt_bytes(got_b)),
        ">= (count, bytes)")
    assert want_n is not None and want_b is not None and len(pinned) >= want_n and got_b >= want_b


def test_cupy_after_free_all_blocks(suite, row):
    """CuPy: live device bytes through CuPy after free_all_blocks() == total_bytes()"""
    run = _cupy(suite)
    after = run.truth.get("after_free") or {}
    if after.get("mono_ns") is None:
        pytest.skip("the truth has no after_free time")
    live = run.trace.replay(_device, until_ns=to_int(after.get("mono_ns")))["live"]
    mine = sum(e.size for e in live if _has_cupy(e.stack) or not e.stack)
    total = to_int(after.get("total_bytes"))
    row("total_bytes() = %s" % fmt_bytes(total), fmt_bytes(mine), "==")
    assert total is not None and mine == total, "total_bytes %s, traced %s" % (total, mine)


@pytest.mark.parametrize("name", ["jax_prealloc", "jax_noprealloc"])
def test_jax_device_peak_covers_peak_bytes_in_use(suite, row, name):
    """JAX: peak of live device-side bytes >= memory_stats peak_bytes_in_use"""
    run = suite.run(name)
    oracle = to_int((run.truth.get("memory_stats") or {}).get("peak_bytes_in_use"))
    peak = run.trace.replay(_device)["peak"]
    row("peak_bytes_in_use = %s" % fmt_bytes(oracle), fmt_bytes(peak), ">=")
    assert oracle and peak >= oracle, "peak_bytes_in_use %s, traced peak %s" % (oracle, peak)
