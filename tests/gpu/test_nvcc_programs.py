"""Programs nvcc builds: leaky.cu with nvcc's default static cudart and with a shared one (three planted leaks, memory
of every kind properly freed) against compute-sanitizer --leak-check full and the addresses the program printed;
driver_api.cu (no runtime at all) against its own printed ledger, event by event."""
import collections

import pytest

from tracekit import (DEVICE_SIDE_KINDS, MEMORY_KINDS, fmt_bytes, has_function, norm_api, norm_stack,
                      parse_ledger, parse_planted, parse_sanitizer, to_int)

MiB = 1 << 20
# What leaky.cu plants (keep in step with its header comment).
PLANTED_FUNCTIONS = {"leak_model_weights": (8 * MiB, 2), "leak_scratch": (7 * MiB, 1)}
LEAKY = {"leaky": ("leaky", ()), "leaky_noreset": ("leaky", ("--no-reset",)), "leaky_shared": ("leaky_shared", ())}


def planted_function(stack):
    for f in stack or []:
        for name in PLANTED_FUNCTIONS:
            if name in f.function:
                return name
    return None


def leaks_by_function(run):
    per = collections.defaultdict(lambda: [0, 0])
    for entry in run.summary.get("leaks") or []:
        fn = planted_function(norm_stack(entry.get("stack")))
        if fn:
            per[fn][0] += to_int(entry.get("bytes"), 0)
            per[fn][1] += to_int(entry.get("count"), 0)
    return per


@pytest.mark.parametrize("name", ["leaky", "leaky_shared"])
def test_sanitizer_sees_what_leaky_planted(suite, row, name):
    """compute-sanitizer lists the leaks leaky planted (a check of the oracle itself)"""
    text = suite.sanitizer(*LEAKY[name])
    leaks, summary = parse_sanitizer(text)
    planted = sorted((size, addr) for _, size, addr in parse_planted(text))
    row("planted %s" % [s for s, _ in planted], "sanitizer %s" % sorted(s for s, _ in leaks), "== (size, address)")
    assert planted and sorted(leaks) == planted, "planted %s, sanitizer %s (summary %s)" % (planted, leaks, summary)


@pytest.mark.parametrize("name", ["leaky", "leaky_noreset", "leaky_shared"])
def test_leak_report_matches_sanitizer(suite, row, name):
    """`leaks` report: entries from leak_* functions == compute-sanitizer's leaks (bytes, count)"""
    program, args = LEAKY[name]
    if name == "leaky_noreset":
        # Without cudaDeviceReset the sanitizer lists no leak: the plan is the oracle.
        oracle = (sum(b for b, _ in PLANTED_FUNCTIONS.values()), sum(c for _, c in PLANTED_FUNCTIONS.values()))
    else:
        leaks, _ = parse_sanitizer(suite.sanitizer(program, args))
        oracle = (sum(s for s, _ in leaks), len(leaks))
    per = leaks_by_function(suite.run(name))
    got = (sum(v[0] for v in per.values()), sum(v[1] for v in per.values()))
    row("%s in %d" % (fmt_bytes(oracle[0]), oracle[1]), "%s in %d" % (fmt_bytes(got[0]), got[1]), "== (bytes, count)")
    assert oracle[1] > 0 and got == oracle, "oracle %s, leaks report %s (%s)" % (oracle, got, dict(per))


def test_leaking_functions_named(suite, row):
    """leaky: the leaking functions are named in the stacks, with their bytes and counts"""
    per = leaks_by_function(suite.run("leaky"))
    want = {fn: list(v) for fn, v in PLANTED_FUNCTIONS.items()}
    row(want, dict(per), "== per function")
    assert dict(per) == want, "planted %s, trace %s" % (want, dict(per))


@pytest.mark.parametrize("name", ["leaky", "leaky_noreset", "leaky_shared"])
def test_planted_addresses_live_at_end(suite, row, name):
    """the planted leaks are live at the end of the trace (exact address and size)"""
    run = suite.run(name)
    planted = parse_planted(run.output)
    live = {(e.addr, e.size) for e in run.trace.replay(lambda e: e.kind in MEMORY_KINDS)["live"]}
    missing = [(fn, size, hex(addr)) for fn, size, addr in planted if (addr, size) not in live]
    row("leaky printed %d" % len(planted), "%d live" % (len(planted) - len(missing)), "== all")
    assert planted and not missing, "not live at the end: %s" % missing


def test_leak_sizes_match_sanitizer(suite, row):
    """leaky: sizes of the live leak_* allocations == compute-sanitizer's (multiset)"""
    leaks, _ = parse_sanitizer(suite.sanitizer("leaky"))
    run = suite.run("leaky")
    live = run.trace.replay(lambda e: e.kind in DEVICE_SIDE_KINDS or e.kind in ("pinned_host",
                                                                               "registered_host"))["live"]
    got = sorted(e.size for e in live if planted_function(e.stack))
    want = sorted(s for s, _ in leaks)
    row("sanitizer %s" % want, "trace %s" % got, "== (multiset)")
    assert got == want, "sanitizer %s, trace %s" % (want, got)


@pytest.mark.parametrize("name", ["leaky", "leaky_shared"])
def test_properly_freed_memory(suite, row, name):
    """properly_freed(): device, managed, pinned and pool memory all seen, none live at the end"""
    trace = suite.run(name).trace
    allocs = trace.allocs(lambda e: has_function(e.stack, "properly_freed"))
    live = [e for e in trace.replay(lambda e: e.kind in MEMORY_KINDS)["live"]
            if has_function(e.stack, "properly_freed")]
    kinds = sorted(set(e.kind for e in allocs))
    want = ["device", "managed", "pinned_host", "pool"]
    row("kinds %s, all freed" % want, "kinds %s, %d live" % (kinds, len(live)), "== kinds, 0 live")
    assert kinds == want and not live, "kinds %s, live %s" % (kinds, [(e.api, e.size) for e in live])


def _driver_api(suite):
    run = suite.run("driver_api")
    allocs, frees = parse_ledger(run.output)
    assert allocs, "driver_api printed no LEDGER lines (rc %s):\n%s" % (run.rc, run.output[-2000:])
    return run, allocs, frees


def _match(suite):
    """Pairs the ledger with the trace's events: (unmatched allocations, unmatched frees, extra events)."""
    run, allocs, frees = _driver_api(suite)
    events = [e for e in run.trace.events if e.ok]
    used, missing_a, missing_f = set(), [], []
    for api, kind, device, size, addr in allocs:
        hit = [i for i, e in enumerate(events) if i not in used and e.op == "alloc" and
               norm_api(e.api) == api.lower() and e.addr == addr and e.size == size and e.kind == kind]
        used.add(hit[0]) if hit else missing_a.append("%s %s %d at %#x" % (api, kind, size, addr))
    for api, addr in frees:
        hit = [i for i, e in enumerate(events) if i not in used and e.op == "free" and
               norm_api(e.api) == api.lower() and e.addr == addr]
        used.add(hit[0]) if hit else missing_f.append("%s %#x" % (api, addr))
    extra = [e for i, e in enumerate(events) if i not in used and e.op in ("alloc", "free")]
    return run, allocs, frees, missing_a, missing_f, extra


def test_driver_api_allocations(suite, row):
    """driver API: every ledger allocation is an event (api, kind, size, address)"""
    _, allocs, _, missing, _, _ = _match(suite)
    row("%d allocations printed" % len(allocs), "%d matched" % (len(allocs) - len(missing)), "== all")
    assert not missing, "not in the trace: %s" % missing


def test_driver_api_frees(suite, row):
    """driver API: every ledger free is an event (api, address)"""
    _, _, frees, _, missing, _ = _match(suite)
    row("%d frees printed" % len(frees), "%d matched" % (len(frees) - len(missing)), "== all")
    assert not missing, "not in the trace: %s" % missing


def test_driver_api_no_extra_events(suite, row):
    """driver API: events the program did not make"""
    extra = _match(suite)[5]
    row("0 (the ledger is every call)", len(extra), "== 0")
    assert not extra, [(e.op, e.api, e.kind, e.size, hex(e.addr)) for e in extra[:20]]


def test_driver_api_live_at_end(suite, row):
    """driver API: live at the end of the trace == the planted leak (address, size)"""
    run, _, _ = _driver_api(suite)
    want = sorted((addr, size) for _, size, addr in parse_planted(run.output))
    live = sorted((e.addr, e.size) for e in run.trace.replay(lambda e: True)["live"])
    row("planted %s" % ["%#x %d" % w for w in want], ["%#x %d" % x for x in live], "== (address, size)")
    assert want and live == want, "planted %s, live %s" % (want, live)


def test_driver_api_leak_summary(suite, row):
    """driver API: the summary's leak_summary == the planted leak (bytes, count)"""
    run, _, _ = _driver_api(suite)
    planted = parse_planted(run.output)
    ls = run.summary.get("leak_summary") or {}
    want = (sum(size for _, size, _ in planted), len(planted))
    got = (to_int(ls.get("memory_bytes")), to_int(ls.get("memory_count")))
    row("%s in %d" % (fmt_bytes(want[0]), want[1]), "%s in %s" % (fmt_bytes(got[0]), got[1]), "== (bytes, count)")
    assert got == want, "planted %s, leak_summary %s" % (want, ls)


def test_driver_api_leak_named(suite, row):
    """driver API: the leak's stack names its function"""
    run, _, _ = _driver_api(suite)
    names = sorted(set(f.function for entry in run.summary.get("leaks") or []
                       for f in norm_stack(entry.get("stack")) or [] if "leak_driver_buffer" in f.function))
    row("leak_driver_buffer", names or "-", "named")
    assert names, "no leak entry names leak_driver_buffer"
