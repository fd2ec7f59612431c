"""PyTorch's caching allocator seen from the driver: its segments (stacks through libc10_cuda.so) against PyTorch's
own counters, the analyzer's peak against an independent replay, and the whole process against the driver. Also
CUDA graphs and torch.compile (row 2). Workloads: torch_train_pinned.py (MLP training with a pinned DataLoader),
graphs_compile.py. Latest figures: docs/validation.md."""
import collections

import pytest

from tracekit import DEVICE_SIDE_KINDS, C10_CUDA, fmt_bytes, has_module, is_c10_device, to_int


def test_events_carry_stacks(suite, row):
    """the training run's events carry stacks (the per-owner relations need them)"""
    trace = suite.run("torch_train").trace
    with_stack = sum(1 for e in trace.events if e.stack)
    row("> 0", "%d of %d events" % (with_stack, len(trace.events)), ">")
    assert trace.events and with_stack > 0, "no event's stack resolved (%d stacks known)" % trace.stacks_known


def test_segments_peak_equals_reserved_peak(suite, row):
    """caching-allocator segments: peak live bytes == reserved_bytes.all.peak"""
    run = suite.run("torch_train")
    oracle = to_int(run.truth["memory_stats"].get("reserved_bytes.all.peak"))
    peak = run.trace.replay(is_c10_device)["peak"]
    row("reserved_bytes.all.peak = %s" % fmt_bytes(oracle), fmt_bytes(peak), "==")
    assert oracle and peak == oracle, "reserved_bytes.all.peak %s, trace %s" % (oracle, peak)


def test_segment_count_equals_segments_allocated(suite, row):
    """caching-allocator segments: number of cudaMalloc == segment.all.allocated"""
    run = suite.run("torch_train")
    oracle = to_int(run.truth["memory_stats"].get("segment.all.allocated"))
    n = len(run.trace.allocs(is_c10_device))
    row("segment.all.allocated = %s" % oracle, n, "==")
    assert oracle is not None and n == oracle, "segment.all.allocated %s, trace %d" % (oracle, n)


def test_segments_live_at_each_sample(suite, row):
    """caching-allocator live bytes at each of the script's samples == memory_reserved()"""
    run = suite.run("torch_train")
    ok, why = run.trace.times_comparable(run.truth)
    samples = run.truth.get("mem_samples") or []
    if not ok or not samples:
        pytest.skip(why if not ok else "the script wrote no samples")
    bad = []
    for s in samples:
        live = run.trace.replay(is_c10_device, until_ns=to_int(s.get("mono_ns")))["current"]
        if live != to_int(s.get("memory_reserved")):
            bad.append("step %s %s: reserved %s, trace %s" % (s.get("step"), s.get("label"),
                                                              s.get("memory_reserved"), live))
    row("memory_reserved() at %d samples" % len(samples), "%d of %d equal" % (len(samples) - len(bad), len(samples)),
        "== at every sample")
    assert not bad, bad[:10]


def test_peak_report_equals_replay(suite, row):
    """analyzer `peak` report, kind device == an independent replay of the events"""
    run = suite.run("torch_train")
    peaks = run.analyze("peak", "--group-by", "stack", "--top", "100000").get("peaks", [])
    devices = sorted(set(e.device for e in run.trace.allocs(lambda e: e.kind == "device"))) or [0]
    for dev in devices:
        mine = run.trace.replay(lambda e, d=dev: e.kind == "device" and e.device == d)["peak"]
        theirs = [to_int(p.get("peak_bytes")) for p in peaks if to_int(p.get("device")) == dev and
                  p.get("kind") == "device"]
        row("replay of events, device %d: %s" % (dev, fmt_bytes(mine)), fmt_bytes(theirs[0] if theirs else None),
            "==")
        assert theirs and theirs[0] == mine, "device %d: replay %s, peak report %s" % (dev, mine, theirs)


def test_live_device_memory_within_driver_used(suite, row):
    """live device memory at the end <= the driver's used (total - free)"""
    run = suite.run("torch_train")
    used = to_int((run.truth.get("mem_get_info_end") or {}).get("used_bytes"))
    live = run.trace.replay(lambda e: e.kind in DEVICE_SIDE_KINDS and e.device >= 0)["current"]
    row("mem_get_info used = %s" % fmt_bytes(used), fmt_bytes(live), "cumemtrace <= driver used")
    assert used is not None and live <= used, "driver used %s, traced live %s" % (used, live)


def test_live_device_memory_within_driver_used_at_least_free_sample(suite, row):
    """live device memory at the least-free sample <= the driver's used then"""
    run = suite.run("torch_train")
    sample = run.truth.get("mem_get_info_peak")
    ok, why = run.trace.times_comparable(run.truth)
    if not ok or not sample:
        pytest.skip(why if not ok else "the script wrote no sample")
    used = to_int(sample.get("used_bytes"))
    live = run.trace.replay(lambda e: e.kind in DEVICE_SIDE_KINDS and e.device >= 0,
                            until_ns=to_int(sample.get("mono_ns")))["current"]
    row("mem_get_info used = %s" % fmt_bytes(used), fmt_bytes(live), "cumemtrace <= driver used")
    assert used is not None and live <= used, "driver used %s, traced live %s" % (used, live)


def test_memory_outside_the_caching_allocator(suite, row):
    """device memory outside the caching allocator: attributed to its library (cuBLAS; see docs/validation.md)"""
    run = suite.run("torch_train")
    others = run.trace.allocs(lambda e: e.kind in DEVICE_SIDE_KINDS and e.device >= 0 and
                              not has_module(e.stack, C10_CUDA))
    cublas = [e for e in others if has_module(e.stack, "libcublas")]
    row("allocations outside libc10_cuda.so come from cuBLAS",
        "%d allocations, %s; %d through libcublas" % (len(others), fmt_bytes(sum(e.size for e in others)),
                                                    len(cublas)), "attributed")
    assert cublas, "no device allocation through libcublas: %s" % collections.Counter(e.api for e in others)


def _graphs(suite):
    run = suite.run("graphs_compile")
    ok, why = run.trace.times_comparable(run.truth)
    if not ok:
        pytest.skip("per-phase windows need event times on the workload's clock: " + why)
    return run, run.truth.get("phases") or {}


def test_graphs_phase_peak(suite, row):
    """CUDA graphs phase: caching-allocator peak == reserved_bytes.all.peak"""
    run, phases = _graphs(suite)
    end = (phases.get("graphs") or {}).get("end") or {}
    oracle = to_int((end.get("stats") or {}).get("reserved_bytes.all.peak"))
    peak = run.trace.replay(is_c10_device, until_ns=to_int(end.get("mono_ns")))["peak"]
    row("reserved_bytes.all.peak = %s" % fmt_bytes(oracle), fmt_bytes(peak), "==")
    assert oracle and peak == oracle, "graphs phase: reserved peak %s, trace %s" % (oracle, peak)


def test_compile_phase_peak(suite, row):
    """torch.compile phase: caching-allocator peak == reserved_bytes.all.peak since reset"""
    run, phases = _graphs(suite)
    c = phases.get("compile") or {}
    t0, t1 = to_int((c.get("start") or {}).get("mono_ns")), to_int((c.get("end") or {}).get("mono_ns"))
    oracle = to_int(((c.get("end") or {}).get("stats") or {}).get("reserved_bytes.all.peak"))
    assert t0 is not None and t1 is not None, "the truth has no compile phase times: %s" % sorted(c)
    _, peak, _ = run.trace.window(is_c10_device, t0, t1)
    row("reserved_bytes.all.peak since reset = %s" % fmt_bytes(oracle), fmt_bytes(peak), "==")
    assert oracle and peak == oracle, "compile phase: reserved peak %s, trace %s" % (oracle, peak)


def test_graphs_compile_phase_boundaries(suite, row):
    """caching-allocator live bytes at the phase boundaries == memory_reserved()"""
    run, phases = _graphs(suite)
    g, c = phases.get("graphs") or {}, phases.get("compile") or {}
    points = [p for p in (g.get("start"), g.get("end"), c.get("start"), c.get("end"))
              if isinstance(p, dict) and "memory_reserved" in p]
    bad = []
    for p in points:
        live = run.trace.replay(is_c10_device, until_ns=to_int(p.get("mono_ns")))["current"]
        if live != to_int(p.get("memory_reserved")):
            bad.append("%s: memory_reserved %s, trace %s" % (p.get("label"), p.get("memory_reserved"), live))
    row("memory_reserved() at %d points" % len(points), "%d of %d equal" % (len(points) - len(bad), len(points)),
        "== at every point")
    assert points and not bad, bad or "no phase boundary in the truth"
