"""The slow-leak story (story 2): a loop keeps every step's loss and graph; the leak report's top group names the
loop's line and grows, and the caching allocator's live bytes follow memory_reserved() step by step. Workload:
story_leak.py. Latest figures: docs/validation.md."""
import os

import pytest

from tracekit import MEMORY_KINDS, is_c10_device, norm_stack, script_frame, to_int


def rising(values):
    return len(values) >= 2 and all(b >= a for a, b in zip(values, values[1:])) and values[-1] > values[0]


def _top_group(suite):
    run = suite.run("story_leak")
    groups = [g for g in run.report("leaks").get("leaks") or [] if g.get("kind") in MEMORY_KINDS]
    assert groups, "the leaks report lists no memory group"
    top = max(groups, key=lambda g: to_int(g.get("bytes"), 0))
    base = (run.truth.get("script") or {}).get("basename") or "story_leak.py"
    uf = top.get("user_frame")
    if not isinstance(uf, dict):
        f = script_frame(norm_stack(top.get("stack")), base)
        uf = {"file": f.file, "line": f.line, "function": f.function} if f else {}
    return run, top, base, uf


def _steps(run):
    return [s for s in run.truth.get("steps") or [] if to_int(s.get("step"), -1) >= 0]


def test_top_leak_group_is_the_loop_line(suite, row):
    """slow leak: the top leak group's user frame is the forward or the append line"""
    run, _, base, uf = _top_group(suite)
    lines = [x for x in (to_int(run.truth.get("forward_line")), to_int(run.truth.get("append_line"))) if x]
    row("%s:%s" % (base, lines), "%s:%s %s" % (uf.get("file"), uf.get("line"), uf.get("function")),
        "== file, one of the lines")
    assert os.path.basename(str(uf.get("file"))) == base and to_int(uf.get("line")) in lines, uf


def test_group_growth_rises(suite, row):
    """slow leak: the group's `growth` rises, as memory_allocated() does"""
    run, top, _, _ = _top_group(suite)
    oracle = [to_int(s.get("memory_allocated")) for s in _steps(run)]
    growth = [to_int(v) for v in top.get("growth") or []]
    row("memory_allocated() %s -> %s" % (oracle[0] if oracle else None, oracle[-1] if oracle else None), growth,
        "rises")
    assert rising(oracle) and rising(growth), "memory_allocated %s, growth %s" % (oracle, growth)


def test_group_stacks_grow_over_the_steps(suite, row):
    """slow leak: the group's stacks, replayed at every step, rise as memory_allocated() does"""
    run, _, base, uf = _top_group(suite)
    ok, why = run.trace.times_comparable(run.truth)
    steps = _steps(run)
    if not ok or not steps:
        pytest.skip(why if not ok else "no steps in the truth")
    line = to_int(uf.get("line"))

    def in_group(e):
        f = script_frame(e.stack, base)
        return e.kind in MEMORY_KINDS and f is not None and to_int(f.line) == line

    series = [run.trace.replay(in_group, until_ns=to_int(s.get("mono_ns")))["current"] for s in steps]
    oracle = [to_int(s.get("memory_allocated")) for s in steps]
    row("memory_allocated() %s -> %s over %d steps" % (oracle[0], oracle[-1], len(steps)),
        "%s -> %s" % (series[0], series[-1]), "both rise")
    assert rising(series) and rising(oracle), "trace %s, memory_allocated %s" % (series, oracle)


def test_caching_allocator_live_at_each_step(suite, row):
    """slow leak: caching-allocator live bytes at each step == memory_reserved()"""
    run = suite.run("story_leak")
    ok, why = run.trace.times_comparable(run.truth)
    if not ok:
        pytest.skip(why)
    points = [s for s in run.truth.get("steps") or [] if "memory_reserved" in s]
    bad = []
    for s in points:
        live = run.trace.replay(is_c10_device, until_ns=to_int(s.get("mono_ns")))["current"]
        if live != to_int(s.get("memory_reserved")):
            bad.append("%s: memory_reserved %s, trace %s" % (s.get("label"), s.get("memory_reserved"), live))
    row("memory_reserved() at %d points" % len(points), "%d of %d equal" % (len(points) - len(bad), len(points)),
        "== at every point")
    assert points and not bad, bad[:10] or "no step in the truth"
