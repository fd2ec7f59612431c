"""PyTorch's other allocator modes, each reaching the driver another way: expandable segments (cuMemCreate/cuMemMap
through cudaGetDriverEntryPointByVersion), backend:cudaMallocAsync (stream-ordered pool), and no caching (one
cudaMalloc per tensor). Workloads: torch_expandable.py, torch_async.py, torch_nocache.py. Latest figures:
docs/validation.md."""
import pytest

from tracekit import C10_CUDA, fmt_bytes, has_module, is_c10_device, to_int


def _c10_handle(e):
    return e.kind == "vmm_physical" and has_module(e.stack, C10_CUDA)


def _timed(run):
    ok, why = run.trace.times_comparable(run.truth)
    if not ok:
        pytest.skip("needs event times on the workload's clock: " + why)


def test_expandable_peak(suite, row):
    """expandable segments: peak of live cuMemCreate bytes through libc10_cuda.so == reserved_bytes.all.peak"""
    run = suite.run("torch_expandable")
    oracle = to_int(run.truth["memory_stats"].get("reserved_bytes.all.peak"))
    peak = run.trace.replay(_c10_handle)["peak"]
    row("reserved_bytes.all.peak = %s" % fmt_bytes(oracle), fmt_bytes(peak), "==")
    assert oracle and peak == oracle, "reserved_bytes.all.peak %s, cuMemCreate peak %s" % (oracle, peak)


def test_expandable_checkpoints(suite, row):
    """expandable segments: live c10 cuMemCreate bytes at each checkpoint == memory_reserved()"""
    run = suite.run("torch_expandable")
    _timed(run)
    points = [p for p in run.truth.get("checkpoints") or [] if "memory_reserved" in p]
    bad = []
    for p in points:
        live = run.trace.replay(_c10_handle, until_ns=to_int(p.get("mono_ns")))["current"]
        if live != to_int(p.get("memory_reserved")):
            bad.append("%s: memory_reserved %s, trace %s" % (p.get("label"), p.get("memory_reserved"), live))
    row("memory_reserved() at %d checkpoints" % len(points),
        "%d of %d equal" % (len(points) - len(bad), len(points)), "== at every checkpoint")
    assert points and not bad, bad or "no checkpoint in the truth"


def test_async_pool_peak(suite, row):
    """cudaMallocAsync: peak of live pool bytes == allocated_bytes.all.peak"""
    run = suite.run("torch_async")
    oracle = to_int(run.truth["memory_stats"].get("allocated_bytes.all.peak"))
    peak = run.trace.replay(lambda e: e.kind == "pool")["peak"]
    row("allocated_bytes.all.peak = %s" % fmt_bytes(oracle), fmt_bytes(peak), "==")
    assert oracle and peak == oracle, "allocated_bytes.all.peak %s, pool peak %s" % (oracle, peak)


def test_async_pool_peak_equals_ledger(suite, row):
    """cudaMallocAsync: peak of live pool bytes == the script's own ledger of live tensor bytes"""
    run = suite.run("torch_async")
    ledger = to_int(run.truth.get("ledger_peak_bytes"))
    peak = run.trace.replay(lambda e: e.kind == "pool")["peak"]
    row("live tensor bytes peak = %s" % fmt_bytes(ledger), fmt_bytes(peak), "==")
    assert ledger is not None and peak == ledger, "ledger %s, pool peak %s" % (ledger, peak)


def test_async_one_pool_allocation_per_tensor(suite, row):
    """cudaMallocAsync: pool allocations == tensors allocated"""
    run = suite.run("torch_async")
    n = to_int(run.truth.get("n_tensors"))
    got = len(run.trace.allocs(lambda e: e.kind == "pool"))
    row("tensors allocated = %s" % n, got, "==")
    assert n is not None and got == n, "tensors %s, pool allocations %d" % (n, got)


def test_async_checkpoints(suite, row):
    """cudaMallocAsync: live pool bytes at each checkpoint == the ledger"""
    run = suite.run("torch_async")
    _timed(run)
    points = [p for p in run.truth.get("checkpoints") or [] if "ledger_bytes" in p]
    bad = []
    for p in points:
        live = run.trace.replay(lambda e: e.kind == "pool", until_ns=to_int(p.get("mono_ns")))["current"]
        if live != to_int(p.get("ledger_bytes")):
            bad.append("%s: ledger %s, trace %s" % (p.get("label"), p.get("ledger_bytes"), live))
    row("the ledger at %d checkpoints" % len(points), "%d of %d equal" % (len(points) - len(bad), len(points)),
        "== at every checkpoint")
    assert points and not bad, bad or "no checkpoint in the truth"


def _live_tensors(run):
    return sorted((to_int(r.get("data_ptr")), to_int(r.get("size"))) for r in run.truth.get("live") or [])


def test_nocache_live_at_end(suite, row):
    """no caching: allocations live at the end through libc10_cuda.so == the live tensors (count, sizes, data_ptr)"""
    run = suite.run("torch_nocache")
    want = _live_tensors(run)
    got = sorted((e.addr, e.size) for e in run.trace.replay(is_c10_device)["live"])
    row("%d live tensors, %s" % (len(want), fmt_bytes(sum(s for _, s in want))),
        "%d allocations, %s" % (len(got), fmt_bytes(sum(s for _, s in got))), "== (count, sizes, addresses)")
    assert want and got == want, "tensors %s, trace %s" % (want, got)


def test_nocache_live_when_truth_written(suite, row):
    """no caching: live through libc10_cuda.so when the truth was written == the live tensors"""
    run = suite.run("torch_nocache")
    _timed(run)
    want = _live_tensors(run)
    at = run.trace.replay(is_c10_device, until_ns=to_int(run.truth.get("truth_written_mono_ns")))
    got = sorted((e.addr, e.size) for e in at["live"])
    row("%d live tensors" % len(want), "%d allocations" % len(got), "== (count, sizes, addresses)")
    assert want and got == want, "tensors %s, trace %s" % (want, got)


def test_nocache_one_cudamalloc_per_tensor(suite, row):
    """no caching: cudaMalloc calls through libc10_cuda.so == tensors allocated"""
    run = suite.run("torch_nocache")
    n = to_int(run.truth.get("n_allocated"))
    got = len(run.trace.allocs(is_c10_device))
    row("tensors allocated = %s" % n, got, "==")
    assert n is not None and got == n, "tensors %s, cudaMalloc %d" % (n, got)
