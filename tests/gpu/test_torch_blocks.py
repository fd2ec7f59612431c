"""PyTorch's caching allocator seen from the preload (its trace tracker, no code change): the blocks inside the
segments, against PyTorch's own figures, tolerance zero. Workloads: blocks_train.py (GPT-2 with checkpoints, default
allocator and expandable segments), frag_oom.py (a fragmentation OOM), dataloader_pin.py and graphs_compile.py (the
programs must run unchanged with the tracker attached), gpt2_overhead.py (step time untraced, traced, and under
PyTorch's own memory history).

A checkpoint (allocator_common.checkpoint) reads memory_stats() and the active blocks of _snapshot(), then makes a
driver allocation of a size nothing else asks for; the torch.* events before it are replayed with PyTorch's own
accounting (replay() below): allocation.all.current drops at FREE_REQUESTED, requested_bytes at FREE_COMPLETED."""
import pytest

CHECKPOINTS = ("model_on_gpu", "mid_forward", "after_first_step", "after_training")
STATS = ("allocation.all.current", "requested_bytes.all.current", "requested_bytes.all.peak",
         "reserved_bytes.all.current", "reserved_bytes.all.peak")


def replay(events, upto_seq):
    """PyTorch's counters from the torch.* events with seq < upto_seq."""
    live, pending = {}, {}
    c = {"requested": 0, "requested_peak": 0, "reserved": 0, "reserved_peak": 0, "oom": None}
    for e in events:
        if e["seq"] >= upto_seq:
            break
        api = e["api"]
        if not api.startswith("torch."):
            continue
        addr = int(e["address"], 16)
        if api == "torch.alloc":
            live[addr] = pending[addr] = e["size"]
            c["requested"] += e["size"]
            c["requested_peak"] = max(c["requested_peak"], c["requested"])
        if api in ("torch.free_requested", "torch.free"):
            live.pop(addr, None)
        if api in ("torch.free_completed", "torch.free"):
            c["requested"] -= pending.pop(addr, 0)
        if api in ("torch.segment_alloc", "torch.segment_map"):
            c["reserved"] += e["size"]
            c["reserved_peak"] = max(c["reserved_peak"], c["reserved"])
        if api in ("torch.segment_free", "torch.segment_unmap"):
            c["reserved"] -= e["size"]
        if api == "torch.oom" and c["oom"] is None:
            c["oom"] = {"request": e["size"], "reserved": c["reserved"], "requested": c["requested"]}
    c["live"] = live
    return c


def events_of(run):
    return sorted(run.analyze("events")["events"], key=lambda e: e["seq"])


def at_checkpoint(run, name):
    cp = [c for c in run.truth["checkpoints"] if c["name"] == name]
    assert len(cp) == 1, "checkpoint %s not in the truth" % name
    events = events_of(run)
    marks = [e["seq"] for e in events if e["api"] in ("cuMemAlloc", "cudaMalloc") and e["size"] == cp[0]["marker_size"]]
    assert len(marks) == 1, "marker of %s (%d B) found %d times" % (name, cp[0]["marker_size"], len(marks))
    return cp[0], replay(events, marks[0])


@pytest.mark.parametrize("workload", ["blocks_default", "blocks_expandable", "blocks_nostacks"])
@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
def test_counters_at_checkpoint(suite, row, workload, checkpoint):
    """block events before a checkpoint == memory_stats() there (allocation count, requested bytes and peak,
    reserved bytes and peak)"""
    run = suite.run(workload)
    assert run.rc == 0, run.output[-2000:]
    cp, r = at_checkpoint(run, checkpoint)
    oracle = [cp["stats"][k] for k in STATS]
    measured = [len(r["live"]), r["requested"], r["requested_peak"], r["reserved"], r["reserved_peak"]]
    row(oracle, measured, "%s %s: %s ==" % (workload, checkpoint, ", ".join(STATS)))
    assert measured == oracle, "%s at %s: PyTorch %s, trace %s" % (workload, checkpoint, oracle, measured)


@pytest.mark.parametrize("workload", ["blocks_default", "blocks_expandable"])
@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
def test_live_blocks_equal_snapshot(suite, row, workload, checkpoint):
    """the live blocks (address, requested size) at a checkpoint == the active blocks of torch.cuda.memory._snapshot()"""
    run = suite.run(workload)
    cp, r = at_checkpoint(run, checkpoint)
    snapshot = sorted([a, s] for a, s in cp["active_blocks"])
    trace = sorted([a, s] for a, s in r["live"].items())
    row("%d active blocks" % len(snapshot), "%d live blocks" % len(trace), "%s %s: sets ==" % (workload, checkpoint))
    assert trace == snapshot, "only in _snapshot(): %s; only in the trace: %s" % (
        [b for b in snapshot if b not in trace][:5], [b for b in trace if b not in snapshot][:5])


@pytest.mark.parametrize("workload", ["blocks_default", "blocks_expandable"])
def test_analyzer_peaks_equal_pytorch(suite, row, workload):
    """`peak --json`'s allocator layer: allocated (extents reconstructed), requested and reserved peaks ==
    memory_stats() after training (nothing is allocated after the last checkpoint)"""
    run = suite.run(workload)
    d = run.analyze("peak")["allocator"]["devices"][0]
    s = run.truth["checkpoints"][-1]["stats"]
    oracle = [s["allocated_bytes.all.peak"], s["requested_bytes.all.peak"], s["reserved_bytes.all.peak"]]
    measured = [d["allocated_peak_bytes"], d["requested_peak_bytes"], d["reserved_peak_bytes"]]
    row(oracle, measured, "%s: allocated, requested, reserved peaks ==" % workload)
    assert measured == oracle


def test_fragmentation_oom_verdict(suite, row):
    """fragmentation OOM under a memory fraction: `oom --json` names the cap (PyTorch's message says "allowed"),
    with PyTorch's reserved-but-unallocated in bytes"""
    run = suite.run("frag_oom")
    ooms = run.analyze("oom").get("torch_ooms") or []
    assert ooms, "no torch_ooms in the oom report"
    v = ooms[0]["verdict"]
    cause = "memory_cap" if " allowed" in run.truth["message"] else "fragmentation"
    oracle = [cause, run.truth["request"], run.truth["reserved_minus_allocated_at_oom"]]
    measured = [v["cause"], v["request_bytes"], v["reserved_unallocated_bytes"]]
    row(oracle, measured, "cause, request, reserved - allocated ==")
    assert measured == oracle


def test_validation_oom_verdict(suite, row):
    """validation OOM (story 1): the verdict's reserved-but-unallocated == PyTorch's figure at the failure, and the
    tensors live then are named by the validation line"""
    run = suite.run("story_oom")
    ooms = run.analyze("oom").get("torch_ooms") or []
    assert ooms, "no torch_ooms in the oom report"
    stats = run.truth["memory_stats"]
    top = (ooms[0].get("tensors") or [{}])[0].get("user_frame") or {}
    oracle = [stats["reserved_bytes.all.current"] - stats["allocated_bytes.all.current"], run.truth["validation_line"]]
    measured = [ooms[0]["verdict"]["reserved_unallocated_bytes"], top.get("line")]
    row(oracle, measured, "reserved - allocated, line of the tensors live at the OOM ==")
    assert measured == oracle, ooms[0]["verdict"]


def test_slow_leak_cache_is_not_a_leak(suite, row):
    """slow leak (story 3): PyTorch's reserved bytes == memory_stats(); its cache is flagged, not called a leak"""
    run = suite.run("story_leak")
    report = run.analyze("leaks")
    a = report.get("allocator_leaks") or {}
    flagged = any(l.get("cached_by_pytorch") for l in report.get("leaks") or [])
    oracle = [run.truth["memory_stats"]["reserved_bytes.all.current"], True]
    measured = [a.get("pytorch_reserved_bytes"), flagged]
    row(oracle, measured, "PyTorch reserved, cache flagged ==")
    assert measured == oracle


def test_tracker_attached_at_first_segment(suite, row):
    """the trace says the tracker was attached at the allocator's first segment, with nothing ignored"""
    run = suite.run("blocks_default")
    h = run.health
    row("allocator_events > 0, allocator_ignored 0", "%s, %s" % (h.get("allocator_events"), h.get("allocator_ignored")),
        "==")
    assert (h.get("allocator_events") or 0) > 0 and h.get("allocator_ignored") == 0, h


def test_fragmentation_oom_figures(suite, row):
    """fragmentation OOM: the request, and reserved - allocated at the OOM == PyTorch's (its message's figure)"""
    run = suite.run("frag_oom")
    assert run.rc == 0, run.output[-2000:]
    r = replay(events_of(run), float("inf"))
    assert r["oom"] is not None, "no torch.oom event"
    truth = run.truth
    # Every block of this workload is a multiple of 512 B and split off its segment: allocated == requested there.
    oracle = [truth["request"], truth["reserved_minus_allocated_at_oom"]]
    measured = [r["oom"]["request"], r["oom"]["reserved"] - r["oom"]["requested"]]
    row(oracle, measured, "request, reserved - allocated ==")
    assert measured == oracle


@pytest.mark.parametrize("workload", ["dataloader", "graphs_compile"])
def test_programs_unchanged_with_the_tracker(suite, row, workload):
    """DataLoader workers forked after the attach, torch.compile and CUDA graphs: same exit status and results as
    untraced, with the tracker attached"""
    plain, traced = suite.run(workload, traced=False), suite.run(workload)

    def results(node, path=""):
        if not isinstance(node, dict):
            return {}
        out = {}
        for k, v in node.items():
            if k in ("checksum", "losses"):
                out[path + k] = v
            else:
                out.update(results(v, path + k + "."))
        return out
    a, b = results(plain.truth), results(traced.truth)
    events = traced.health.get("allocator_events") or 0
    row("exit %s, %s" % (plain.rc, a), "exit %s, %s; %d allocator events" % (traced.rc, b, events), "==")
    assert plain.rc == traced.rc == 0 and a == b and a, (plain.rc, traced.rc, a, b)
    assert events > 0, "the tracker was not attached"


def test_step_overhead(suite, row):
    """GPT-2 step time: untraced, under cumemtrace (blocks + Python frames), under PyTorch's
    _record_memory_history(stacks="python"); reported with the ratios (noise on one GPU is about 2 %)"""
    plain = suite.run("gpt2_overhead", traced=False).truth
    traced_run = suite.run("gpt2_overhead")
    traced = traced_run.truth
    history = suite.run("gpt2_history", traced=False).truth
    h = traced_run.health
    events = h.get("events") or 0
    entries = traced["allocations_per_step"] * 3
    ms = [plain["median_ms"], traced["median_ms"], history["median_ms"]]
    row("-", "ms/step untraced %.2f, cumemtrace %.2f (%+.1f %%), history %.2f (%+.1f %%); %.0f entries/step; "
        "recorder %.0f ns/event; %.1f B per allocator entry; history %d entries, %d B pickled" % (
            ms[0], ms[1], 100 * (ms[1] / ms[0] - 1), ms[2], 100 * (ms[2] / ms[0] - 1), entries,
            (h.get("recorder_time_ns") or 0) / max(events, 1),
            (h.get("file_bytes") or 0) / max(h.get("allocator_events") or 1, 1),
            history.get("history_entries", 0), history.get("history_pickle_bytes", 0)), "reported")
    assert all(m > 0 for m in ms)


def test_diff_names_the_leaking_line_first(suite, row):
    """`cumem-analyze diff` of the slow-leak story without and with its leak (two real traces): the first peak group
    that grew is the leaking loop's line"""
    leak, clean = suite.run("story_leak"), suite.run("story_noleak")
    assert leak.trace_path and clean.trace_path, "a run wrote no trace"
    d = suite.analyze(["diff", clean.trace_path, leak.trace_path, "--top", "20"])
    grown = [g for g in d.get("peak_groups") or [] if g.get("change_bytes", 0) > 0]
    assert grown, "diff lists no peak group that grew"
    line = (grown[0].get("user_frame") or {}).get("line")
    lines = [leak.truth["forward_line"], leak.truth["append_line"]]
    row("line %s or %s" % tuple(lines), "line %s (+%s B)" % (line, grown[0].get("change_bytes")), "first grown group ==")
    assert line in lines, grown[0]
