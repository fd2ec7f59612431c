#!/usr/bin/env python3
"""Checks cumemtrace's coverage of the ways frameworks reach CUDA memory, against each framework's own numbers.

scripts/gpu-coverage.sh runs every workload of this folder once without and once with the preload, runs the analyzer
on each trace, puts every output in one directory, and then runs

    check.py --dir WORKDIR [--md coverage.md] [--only NAME ...] [--print table|all]

Inputs per workload W (names as the runner writes them): W_truth.json (the traced run's ground truth),
W_plain_truth.json (the untraced run's), W_events.json, W_peak.json, W_leaks.json, W_oom.json (`cumem-analyze
... --json --top 100000`), rc.txt ("STEP RC" lines, steps W_plain and W_traced) and times.txt ("STEP SECONDS").

The table: `workload | oracle | cumemtrace | relation | result`; PASS / FAIL for checked relations, INFO for
numbers without an oracle, MISSING where an input is absent or not JSON, ERROR where this script raised, SKIP where a
relation cannot be evaluated on these inputs. Details follow the table. Exit status: 0 when no row is FAIL, ERROR or
MISSING, else 1.

How the trace is read: events are replayed in sequence order. Allocations and frees pair by address within one
address space: plain allocations (device, managed, pool, pinned_host, registered_host: one unified address space),
VMM physical handles (cuMemCreate / cuMemRelease; address = the handle), VMM mappings (cuMemMap / cuMemUnmap) and
address reservations (cuMemAddressReserve / cuMemAddressFree). A free's space comes from the `kind` the events JSON
gives it (the kind of the allocation the analyzer paired it with) and, where that is absent, from its api. Event
times are relative to process.start_time_ns (CLOCK_MONOTONIC); absolute = start_time_ns + time_ns is the clock of
the workloads' time.monotonic_ns() checkpoints. `events --json` carries stack ids only: their frames come from the
peak/leaks/oom reports of the same trace (every allocation live at some kind's peak or at the end).

Only the standard library; Python 3.8+.
"""
import argparse
import collections
import json
import os
import sys
import traceback

# gpu_common.py is in tests/gpu/, the parent of this script's folder: put that folder on sys.path, found from this
# file's own location so that the script runs from any working directory.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gpu_common  # noqa: E402
from gpu_common import (BaseEvent, BaseTrace, Missing, fmt_bytes, has_module, load_json, load_pairs,  # noqa: E402
                        load_reports, stack_summary, to_int, verdict)

WORKLOADS = ("torch_expandable", "torch_async", "torch_nocache", "cupy_pool", "jax_prealloc", "jax_noprealloc")

C10_CUDA = "libc10_cuda.so"
# Frames that do not own an allocation: the tool, the driver, the runtime, libc.
PLUMBING_MODULES = ("libcumemtrace", "libcuda.so", "libcudart", "libc.so", "ld-linux", "libpthread")
DEVICE_SIDE_KINDS = ("device", "pool", "managed", "vmm_physical")  # memory on the GPU, each byte counted once
KIND_SPACE = {"vmm_physical": "handle", "vmm_mapped": "mapping", "address_reserve": "reserve"}
API_SPACE = {"cumemcreate": "handle", "cumemrelease": "handle", "cumemmap": "mapping", "cumemunmap": "mapping",
             "cumemaddressreserve": "reserve", "cumemaddressfree": "reserve"}
FREE_APIS = {"cumemfree", "cumemfreehost", "cumemhostunregister", "cumemfreeasync", "cumemrelease",
             "cumemaddressfree", "cumemunmap", "cudafree", "cudafreehost", "cudahostunregister", "cudafreeasync",
             "cudafreearray", "cudafreemipmappedarray"}

RC_FILE = "rc.txt"
TIMES_FILE = "times.txt"


# ----------------------------------------------------------------------------------------------------------------
# Inputs


def norm_api(api):
    s = str(api or "").strip().lower()
    for suffix in ("_v2", "_v3", "_ptds", "_ptsz"):
        if s.endswith(suffix):
            s = s[:-len(suffix)]
    return s


class Frame(gpu_common.Frame):
    __slots__ = ()

    def short(self):
        where = os.path.basename(self.module) if self.module else (
            "%s:%s" % (os.path.basename(str(self.file)), self.line) if self.file else "?")
        return "%s [%s]" % (self.function or "?", where)


def norm_stack(raw):
    return gpu_common.norm_stack(raw, Frame)


def collect_stacks(doc, table):
    """Adds every {"stack_id": N, "stack": [frames]} found anywhere in a report to table (id -> frames)."""
    return gpu_common.collect_stacks(doc, table, Frame)


def has_cupy(stack):
    return bool(stack) and any("cupy" in f.module.lower() for f in stack)


def owner_module(stack):
    """The innermost frame outside the tool, the driver, the runtime and libc: who asked."""
    return gpu_common.owner_module(stack, PLUMBING_MODULES)


class Event(BaseEvent):
    __slots__ = ("stack_id",)

    def __init__(self, raw, stacks, time_base):
        BaseEvent.__init__(self, raw)
        self.time += time_base
        api = norm_api(self.api)
        op = str(raw.get("op") or "").lower()
        if not op:
            op = "free" if api in FREE_APIS else "alloc"
        self.op = op  # "alloc", "free" or something else (ignored by the replay)
        if self.kind == "unknown":  # a free the analyzer found nothing live for
            self.kind = ""
        self.stack_id = raw.get("stack_id")
        self.stack = norm_stack(raw.get("stack"))
        if self.stack is None and self.stack_id is not None:
            self.stack = stacks.get(str(self.stack_id))
        # The address space: the kind decides (for a free, the kind of the allocation the analyzer paired it with);
        # without one, the api.
        if self.kind:
            self.space = KIND_SPACE.get(self.kind, "alloc")
        else:
            self.space = API_SPACE.get(api, "alloc")


class Trace(BaseTrace):
    REPLAY_STOPS_AT_CUT = False  # replay(until_ns=...) leaves later events out, whatever their place in seq order

    def __init__(self, events_doc, reports):
        raw = events_doc.get("events") if isinstance(events_doc, dict) else None
        if not isinstance(raw, list):
            raise Missing("events JSON has no list 'events'")
        stacks = {}
        for report in reports:
            collect_stacks(report, stacks)
        self.stacks_known = len(stacks)
        process = events_doc.get("process") or {}
        self.time_base = to_int(process.get("start_time_ns"), 0) or 0
        self.pid = process.get("pid")
        self.events = [Event(e, stacks, self.time_base) for e in raw if isinstance(e, dict)]
        self.events.sort(key=lambda e: (e.seq, e.time))
        self.health = events_doc.get("health") or {}
        self.process = process
        self.devices = events_doc.get("devices") or []
        self.reports_loaded = []


def load_trace(directory, name):
    reports = load_reports(directory, name, ("peak", "leaks", "oom", "pinned"))
    trace = Trace(load_json(directory, "%s_events.json" % name), [doc for _, doc in reports])
    trace.reports_loaded = [what for what, _ in reports]
    return trace


def times_comparable(trace, truth):
    """(True, why) when event times and the workload's time.monotonic_ns() are one clock, so a cut is meaningful."""
    t0 = to_int(truth.get("t0_mono_ns"))
    t_end = to_int(truth.get("truth_written_mono_ns"))
    times = [e.time for e in trace.events]
    if not trace.time_base:
        return False, "the events JSON has no process.start_time_ns"
    if not t0 or not t_end or not times:
        return False, "no workload times or no events"
    if min(times) < t0 - 10 * 10**9 or max(times) > t_end + 300 * 10**9:
        return False, "event times %d..%d are outside the workload's run %d..%d" % (min(times), max(times), t0,
                                                                                    t_end)
    return True, "event times (start_time_ns + time_ns) lie within the workload's run"


# ----------------------------------------------------------------------------------------------------------------
# The table


class Table(gpu_common.Table):
    FIRST_COLUMN = "workload"

    def add(self, workload, check, oracle, ours, relation, status, details=None):
        details = [str(d) for d in details] if details else None
        gpu_common.Table.add(self, "%s: %s" % (workload, check), oracle, ours, relation, status, details)



def guarded(table, workload, what, fn, *args):
    """Runs one group of checks; an exception becomes a row instead of ending the comparison."""
    try:
        return fn(*args)
    except Missing as e:
        table.add(workload, what, "-", "-", "input missing", "MISSING", [str(e)])
    except Exception:  # noqa: BLE001  a bug here must not hide the other rows
        table.add(workload, what, "-", "-", "check.py raised", "ERROR", traceback.format_exc().rstrip().splitlines())
    return None


def stats_dict(truth, key="memory_stats"):
    value = truth.get(key) if isinstance(truth, dict) else None
    return value if isinstance(value, dict) and "error" not in value else {}


def plain_line(plain, key):
    """The same memory_stats figure in the run without the preload: the preload must not change what the program
    sees (printed, not compared: allocators need not be deterministic across runs)."""
    if plain is None:
        return "oracle in the untraced run: no truth (that run failed or was skipped)"
    return "oracle in the untraced run: %s = %s" % (key, stats_dict(plain).get(key))


def api_counts(events):
    counts = collections.OrderedDict()
    for e in events:
        c = counts.setdefault(e.api, [0, 0])
        c[0] += 1
        c[1] += e.size
    return ", ".join("%s x%d (%s)" % (api, c[0], fmt_bytes(c[1])) for api, c in
                     sorted(counts.items(), key=lambda kv: -kv[1][1]))


def unresolved_line(events):
    missing = [e for e in events if not e.stack]
    return "allocations without resolved stacks: %d (%s)" % (len(missing), fmt_bytes(sum(e.size for e in missing)))


# ----------------------------------------------------------------------------------------------------------------
# Rows every workload gets


def check_exit(table, name, rcs, times, plain):
    p, t = rcs.get(name + "_plain"), rcs.get(name + "_traced")
    tp, tt = times.get(name + "_plain"), times.get(name + "_traced")
    det = ["plain run: rc %s in %s s; traced run: rc %s in %s s" % (p, tp, t, tt)]
    if tp and tt:
        det.append("traced / plain wall time: %.2f" % (tt / tp))
    if p is not None and p != 0:
        det.append("the workload failed WITHOUT the preload: an environment problem, not the tool's (see the log)")
    if p == 125 or t == 125:
        det.append("rc 125: the step was skipped, the coverage budget was spent")
    table.add(name, "exit status traced == untraced", "untraced rc %s" % p, "traced rc %s" % t, "== (and 0)",
              verdict(p == 0 and t == p), det)


def check_health(table, name, trace):
    h = trace.health
    keys = ("dropped_events", "unwind_failures", "wrapper_slots_exhausted")
    bad = [k for k in keys if to_int(h.get(k)) != 0]
    ok = bool(h.get("has_trailer")) and not bad
    cell = "trailer %s; %s" % (h.get("has_trailer"), ", ".join("%s %s" % (k, h.get(k)) for k in keys))
    det = ["health: %s" % json.dumps(h, sort_keys=True),
           "truncated_stacks %s, unknown_api_events %s, unmatched_frees (analyzer) %s, failed_allocations %s" % (
               h.get("truncated_stacks"), h.get("unknown_api_events"), h.get("unmatched_frees"),
               h.get("failed_allocations"))]
    table.add(name, "tool health", "trailer, 0 dropped, 0 unwind failures, 0 wrapper slots exhausted", cell,
              "== 0 each", verdict(ok), det)


def check_frees(table, name, trace):
    r = trace.replay(lambda e: False)
    unmatched = r["unmatched"]
    by_api = collections.Counter(e.api for e in unmatched)
    det = ["frees of a nonzero address that found no live traced allocation in their space: %d, by api %s" % (
        len(unmatched), dict(by_api))]
    for e in unmatched[:10]:
        det.append("  seq %d %s %#x kind %r on %r: %s" % (e.seq, e.api, e.addr, e.kind, e.thread_name,
                                                         stack_summary(e.stack)))
    if r["stale"]:
        det.append("allocations at an address already live in their space (a missed free?): %d" % r["stale"])
    table.add(name, "every free pairs with a traced allocation", "0 unpaired", "%d unpaired" % len(unmatched),
              "== 0", verdict(not unmatched), det)


def check_events(table, name, trace):
    allocs = [e for e in trace.events if e.op == "alloc"]
    frees = [e for e in trace.events if e.op == "free"]
    failed = [e for e in trace.events if not e.ok]
    det = ["allocations by api: %s" % api_counts([e for e in allocs if e.ok]),
           "kinds (allocations): %s" % dict(collections.Counter(e.kind for e in allocs if e.ok)),
           "frees by api: %s" % dict(collections.Counter(e.api for e in frees)),
           "other ops: %s" % dict(collections.Counter((e.op, e.api) for e in trace.events
                                                      if e.op not in ("alloc", "free"))),
           "threads: %s" % dict(collections.Counter(e.thread_name or str(e.thread) for e in trace.events)),
           "stacks known from the reports (%s): %d; %s" % (
               ", ".join(trace.reports_loaded) or "none", trace.stacks_known,
               unresolved_line([e for e in allocs if e.ok])),
           "pid %s, argv %s" % (trace.pid, trace.process.get("argv"))]
    for e in failed[:10]:
        det.append("failed: seq %d %s size %d result %s: %s" % (e.seq, e.api, e.size, e.result,
                                                                stack_summary(e.stack)))
    table.add(name, "events total", "-", "%d events: %d allocations, %d frees, %d failed" % (
        len(trace.events), len(allocs), len(frees), len(failed)), "-", "INFO", det)


# ----------------------------------------------------------------------------------------------------------------
# PyTorch, expandable segments


def check_expandable(table, name, trace, truth, plain):
    ms = stats_dict(truth)
    oracle = to_int(ms.get("reserved_bytes.all.peak"))

    def is_c10_handle(e):
        return e.kind == "vmm_physical" and has_module(e.stack, C10_CUDA)

    handles = trace.allocs(lambda e: e.kind == "vmm_physical")
    c10 = trace.replay(is_c10_handle)
    c10_handles = [e for e in handles if has_module(e.stack, C10_CUDA)]
    segments = truth.get("segments")
    det = [
        "cuMemCreate handles: %d in all, %d through %s; %s" % (len(handles), len(c10_handles), C10_CUDA,
                                                               unresolved_line(handles)),
        "handle sizes (bytes: count): %s" % sorted(collections.Counter(e.size for e in c10_handles).items()),
        "c10 handles live at the end of the trace: %s" % fmt_bytes(c10["current"]),
        "memory_stats: reserved_bytes.all.current=%s allocated_bytes.all.peak=%s segment.all.allocated=%s "
        "num_alloc_retries=%s num_ooms=%s" % (ms.get("reserved_bytes.all.current"), ms.get("allocated_bytes.all.peak"),
                                              ms.get("segment.all.allocated"), ms.get("num_alloc_retries"),
                                              ms.get("num_ooms")),
        "PYTORCH_CUDA_ALLOC_CONF=%s PYTORCH_ALLOC_CONF=%s; allocator backend %s" % (
            (truth.get("env") or {}).get("PYTORCH_CUDA_ALLOC_CONF"), (truth.get("env") or {}).get("PYTORCH_ALLOC_CONF"),
            truth.get("allocator_backend")),
        "allocator segments (type, size, is_expandable): %s" % (
            [(s.get("segment_type"), s.get("total_size"), s.get("is_expandable")) for s in segments]
            if isinstance(segments, list) else segments),
        plain_line(plain, "reserved_bytes.all.peak"),
    ]
    if not handles:
        det.insert(0, "NO cuMemCreate in the trace: either expandable segments were not in effect (see the segments "
                      "line) or the driver entry points c10 uses were not wrapped")
    for e in c10_handles[:3]:
        det.append("e.g. %s: %s" % (fmt_bytes(e.size), stack_summary(e.stack, 10)))
    table.add(name, "peak of live cuMemCreate bytes through %s" % C10_CUDA,
              "reserved_bytes.all.peak = %s" % fmt_bytes(oracle), fmt_bytes(c10["peak"]), "==",
              verdict(oracle is not None and c10["peak"] == oracle and c10["peak"] > 0), det)

    ok_time, why = times_comparable(trace, truth)
    points = [p for p in truth.get("checkpoints") or [] if "memory_reserved" in p]
    if ok_time and points:
        bad = []
        lines = []
        for p in points:
            live = trace.replay(is_c10_handle, until_ns=to_int(p.get("mono_ns")))["current"]
            want = to_int(p.get("memory_reserved"))
            lines.append("%-18s memory_reserved %s, c10 handles live %s" % (p.get("label"), want, live))
            if live != want:
                bad.append(p.get("label"))
        table.add(name, "live c10 cuMemCreate bytes at each checkpoint", "memory_reserved() at %d checkpoints" %
                  len(points), "%d of %d equal" % (len(points) - len(bad), len(points)), "== at every checkpoint",
                  verdict(not bad), lines)
    else:
        table.add(name, "live c10 cuMemCreate bytes at each checkpoint", "memory_reserved()", "-",
                  "needs event times on the workload's clock", "SKIP", [why])

    # Mapped bytes and address space: printed, not compared.
    mapped_all = trace.replay(lambda e: e.kind == "vmm_mapped")
    mapped_c10 = trace.replay(lambda e: e.kind == "vmm_mapped" and has_module(e.stack, C10_CUDA))
    maps = trace.allocs(lambda e: e.kind == "vmm_mapped")
    table.add(name, "peak of live cuMemMap bytes (vmm_mapped)", "reserved_bytes.all.peak = %s" % fmt_bytes(oracle),
              "%s (through c10: %s)" % (fmt_bytes(mapped_all["peak"]), fmt_bytes(mapped_c10["peak"])),
              "printed, not compared", "INFO",
              ["cuMemMap calls: %d, %s; live at the end %s" % (len(maps), fmt_bytes(sum(e.size for e in maps)),
                                                               fmt_bytes(mapped_all["current"])),
               "unmaps: %d" % sum(1 for e in trace.events if e.op == "free" and e.space == "mapping")])
    reserves = trace.allocs(lambda e: e.kind == "address_reserve")
    res = trace.replay(lambda e: e.kind == "address_reserve")
    table.add(name, "address space reserved (cuMemAddressReserve)", "-",
              "%d reservations, %s in all, live at the end %s" % (len(reserves), fmt_bytes(sum(e.size for e in
                                                                                               reserves)),
                                                                  fmt_bytes(res["current"])),
              "address space, not memory", "INFO",
              ["%s at %#x: %s" % (fmt_bytes(e.size), e.addr, stack_summary(e.stack, 8)) for e in reserves[:6]])


# ----------------------------------------------------------------------------------------------------------------
# PyTorch, cudaMallocAsync backend


def check_async(table, name, trace, truth, plain):
    ms = stats_dict(truth)
    oracle = to_int(ms.get("allocated_bytes.all.peak"))
    pool_allocs = trace.allocs(lambda e: e.kind == "pool")
    pool_frees = [e for e in trace.events if e.op == "free" and e.kind == "pool"]
    pool = trace.replay(lambda e: e.kind == "pool")
    det = [
        "pool events: %d allocations, %d frees; apis %s" % (len(pool_allocs), len(pool_frees),
                                                           api_counts(pool_allocs)),
        "through %s: %d; %s" % (C10_CUDA, sum(1 for e in pool_allocs if has_module(e.stack, C10_CUDA)),
                               unresolved_line(pool_allocs)),
        "memory_stats (nonzero): %s" % {k: v for k, v in sorted(ms.items()) if v},
        "allocator backend %s; PYTORCH_CUDA_ALLOC_CONF=%s PYTORCH_ALLOC_CONF=%s" % (
            truth.get("allocator_backend"), (truth.get("env") or {}).get("PYTORCH_CUDA_ALLOC_CONF"),
            (truth.get("env") or {}).get("PYTORCH_ALLOC_CONF")),
        plain_line(plain, "allocated_bytes.all.peak"),
        "pool bytes live at the end of the trace: %s" % fmt_bytes(pool["current"]),
    ]
    if oracle is not None and pool["peak"] != oracle:
        det.insert(0, "difference trace - oracle: %d bytes; %d pool events" % (pool["peak"] - oracle,
                                                                                len(pool_allocs) + len(pool_frees)))
    if truth.get("allocator_backend") not in (None, "cudaMallocAsync") and not isinstance(
            truth.get("allocator_backend"), dict):
        det.insert(0, "the backend is %r, not cudaMallocAsync: the environment did not take" %
                   truth.get("allocator_backend"))
    table.add(name, "peak of live pool bytes", "allocated_bytes.all.peak = %s" % fmt_bytes(oracle),
              fmt_bytes(pool["peak"]), "==", verdict(oracle is not None and pool["peak"] == oracle and oracle > 0), det)

    ledger = to_int(truth.get("ledger_peak_bytes"))
    table.add(name, "peak of live pool bytes vs the script's ledger", "live tensor bytes peak = %s" %
              fmt_bytes(ledger), fmt_bytes(pool["peak"]), "==", verdict(ledger is not None and pool["peak"] == ledger))

    n = to_int(truth.get("n_tensors"))
    sizes_truth = sorted(to_int(s) for s in truth.get("tensor_sizes") or [])
    sizes_trace = sorted(e.size for e in pool_allocs)
    table.add(name, "pool allocations, one per tensor", "tensors allocated = %s" % n, len(pool_allocs), "==",
              verdict(n is not None and len(pool_allocs) == n),
              ["sizes: script %s" % sizes_truth, "sizes: trace  %s" % sizes_trace])

    ok_time, why = times_comparable(trace, truth)
    points = [p for p in truth.get("checkpoints") or [] if "ledger_bytes" in p]
    if ok_time and points:
        lines, bad = [], []
        for p in points:
            live = trace.replay(lambda e: e.kind == "pool", until_ns=to_int(p.get("mono_ns")))["current"]
            lines.append("%-10s ledger %s, pool live %s" % (p.get("label"), p.get("ledger_bytes"), live))
            if live != to_int(p.get("ledger_bytes")):
                bad.append(p.get("label"))
        table.add(name, "live pool bytes at each checkpoint", "the ledger at %d checkpoints" % len(points),
                  "%d of %d equal" % (len(points) - len(bad), len(points)), "== at every checkpoint",
                  verdict(not bad), lines)
    else:
        table.add(name, "live pool bytes at each checkpoint", "the ledger", "-",
                  "needs event times on the workload's clock", "SKIP", [why])


# ----------------------------------------------------------------------------------------------------------------
# PyTorch, no caching


def check_nocache(table, name, trace, truth, plain):
    def is_c10_device(e):
        return e.kind == "device" and has_module(e.stack, C10_CUDA)

    want = sorted((to_int(r.get("data_ptr")), to_int(r.get("size"))) for r in truth.get("live") or [])
    end = trace.replay(is_c10_device)
    got = sorted((e.addr, e.size) for e in end["live"])
    device_live = trace.replay(lambda e: e.kind == "device")["live"]
    det = ["truth: %s" % ["%#x %d" % (a, s) for a, s in want],
           "trace: %s" % ["%#x %d" % (a, s) for a, s in got],
           "all device allocations live at the end: %d (%s); %s" % (
               len(device_live), fmt_bytes(sum(e.size for e in device_live)), unresolved_line(device_live)),
           "PYTORCH_NO_CUDA_MEMORY_CACHING=%s" % (truth.get("env") or {}).get("PYTORCH_NO_CUDA_MEMORY_CACHING")]
    for e in device_live:
        if not is_c10_device(e):
            det.append("  not c10: %s %#x %s: %s" % (fmt_bytes(e.size), e.addr, e.api, stack_summary(e.stack, 8)))
    table.add(name, "live at the end through %s" % C10_CUDA,
              "%d live tensors, %s" % (len(want), fmt_bytes(sum(s for _, s in want))),
              "%d allocations, %s" % (len(got), fmt_bytes(sum(s for _, s in got))),
              "== (count, sizes, data_ptr addresses)", verdict(bool(want) and got == want), det)

    ok_time, why = times_comparable(trace, truth)
    t = to_int(truth.get("truth_written_mono_ns"))
    if ok_time and t:
        at = trace.replay(is_c10_device, until_ns=t)
        got_t = sorted((e.addr, e.size) for e in at["live"])
        table.add(name, "live when the truth was written, through %s" % C10_CUDA, "%d live tensors" % len(want),
                  "%d allocations" % len(got_t), "== (count, sizes, data_ptr addresses)",
                  verdict(bool(want) and got_t == want),
                  ["trace: %s" % ["%#x %d" % (a, s) for a, s in got_t]])
    else:
        table.add(name, "live when the truth was written", "-", "-", "needs event times on the workload's clock",
                  "SKIP", [why])

    c10_allocs = trace.allocs(is_c10_device)
    n = to_int(truth.get("n_allocated"))
    all_sizes = sorted(to_int(r.get("size")) for r in truth.get("allocations") or [])
    table.add(name, "cudaMalloc calls through %s" % C10_CUDA, "tensors allocated = %s" % n, len(c10_allocs), "==",
              verdict(n is not None and len(c10_allocs) == n),
              ["apis: %s" % api_counts(c10_allocs), "sizes: script %s" % all_sizes,
               "sizes: trace  %s" % sorted(e.size for e in c10_allocs),
               unresolved_line(trace.allocs(lambda e: e.kind == "device"))])


# ----------------------------------------------------------------------------------------------------------------
# CuPy


def check_cupy(table, name, trace, truth, plain):
    cp = truth.get("checkpoint") or {}
    after = truth.get("after_free") or {}
    total = to_int(cp.get("total_bytes"))
    ok_time, why = times_comparable(trace, truth)

    def is_dev(e):
        return e.kind in DEVICE_SIDE_KINDS and e.device >= 0

    if ok_time:
        at = trace.replay(is_dev, until_ns=to_int(cp.get("mono_ns")))
        where = "at the checkpoint"
    else:
        full = trace.replay(is_dev)
        at = {"live": [], "current": full["peak"]}
        where = "at the device peak (event times not on the workload's clock: %s)" % why
    live = at["live"]
    cupy_live = [e for e in live if has_cupy(e.stack)]
    unresolved = [e for e in live if not e.stack]
    cupy_bytes = sum(e.size for e in cupy_live) if ok_time else at["current"]
    det = ["%s: %d live device-side allocations, %s; through a CuPy module %d, %s; %s" % (
        where, len(live), fmt_bytes(sum(e.size for e in live)), len(cupy_live), fmt_bytes(cupy_bytes),
        unresolved_line(live)),
        "pool at the checkpoint: %s" % json.dumps(cp, sort_keys=True),
        "owners: %s" % dict(collections.Counter(owner_module(e.stack) for e in live)),
        "apis: %s" % api_counts(live),
        "cupy %s; untraced run's total_bytes at its checkpoint: %s" % (
            truth.get("cupy_version"), ((plain or {}).get("checkpoint") or {}).get("total_bytes"))]
    for e in live[:4]:
        det.append("e.g. %s %s: %s" % (fmt_bytes(e.size), e.api, stack_summary(e.stack, 10)))
    table.add(name, "live device bytes through CuPy at the checkpoint",
              "MemoryPool total_bytes() = %s (used_bytes() = %s)" % (fmt_bytes(total), cp.get("used_bytes")),
              fmt_bytes(cupy_bytes), ">=", verdict(total is not None and total > 0 and cupy_bytes >= total), det)
    if ok_time:
        table.add(name, "stacks of those allocations pass through a CuPy module", "all of them",
                  "%d of %d" % (len(cupy_live), len(live)), "== all", verdict(live and len(cupy_live) == len(live)),
                  ["without a resolved stack: %d" % len(unresolved)] +
                  ["  not CuPy: %s %s: %s" % (fmt_bytes(e.size), e.api, stack_summary(e.stack, 10))
                   for e in live if not has_cupy(e.stack)][:10])
    else:
        table.add(name, "stacks pass through a CuPy module", "-", "-", "needs event times on the workload's clock",
                  "SKIP", [why])

    pinned = trace.allocs(lambda e: e.kind == "pinned_host")
    cupy_pinned = [e for e in pinned if has_cupy(e.stack)]
    want_n = to_int(truth.get("expected_min_pinned_blocks"))
    want_b = to_int(truth.get("expected_min_pinned_bytes"))
    got_b = sum(e.size for e in cupy_pinned)
    table.add(name, "pinned allocations through CuPy",
              ">= %s blocks, >= %s (requests %s); pinned pool n_free_blocks %s at the checkpoint, %s after "
              "free_all_blocks" % (want_n, fmt_bytes(want_b), truth.get("pinned_requests"),
                                   cp.get("pinned_n_free_blocks"), after.get("pinned_n_free_blocks")),
              "%d blocks, %s" % (len(cupy_pinned), fmt_bytes(got_b)), ">= (count, bytes)",
              verdict(want_n is not None and want_b is not None and len(cupy_pinned) >= want_n and got_b >= want_b),
              ["all pinned_host allocations: %d, apis %s" % (len(pinned), api_counts(pinned)),
               "threads: %s" % dict(collections.Counter(e.thread_name for e in pinned)),
               unresolved_line(pinned)] +
              ["  %s %s: %s" % (fmt_bytes(e.size), e.api, stack_summary(e.stack, 8)) for e in pinned[:6]])

    if ok_time and after.get("mono_ns") is not None:
        at2 = trace.replay(is_dev, until_ns=to_int(after.get("mono_ns")))
        mine = [e for e in at2["live"] if has_cupy(e.stack) or not e.stack]
        total2 = to_int(after.get("total_bytes"))
        pinned2 = trace.replay(lambda e: e.kind == "pinned_host", until_ns=to_int(after.get("mono_ns")))
        table.add(name, "live device bytes through CuPy after free_all_blocks()",
                  "total_bytes() = %s" % fmt_bytes(total2), fmt_bytes(sum(e.size for e in mine)), "==",
                  verdict(total2 is not None and sum(e.size for e in mine) == total2),
                  ["counted: device-side allocations through CuPy or without a resolved stack: %d" % len(mine),
                   "pinned_host live then: %d allocations, %s (pinned pool n_free_blocks %s)" % (
                       len(pinned2["live"]), fmt_bytes(pinned2["current"]), after.get("pinned_n_free_blocks"))])
    else:
        table.add(name, "live device bytes after free_all_blocks()", "-", "-",
                  "needs event times on the workload's clock", "SKIP", [why])


# ----------------------------------------------------------------------------------------------------------------
# JAX


def check_jax(table, name, trace, truth, plain, prealloc):
    ms = stats_dict(truth)
    oracle = to_int(ms.get("peak_bytes_in_use"))

    def is_dev(e):
        return e.kind in DEVICE_SIDE_KINDS and e.device >= 0

    dev = trace.replay(is_dev)
    per_kind = {k: trace.replay(lambda e, k=k: e.kind == k and e.device >= 0)["peak"] for k in DEVICE_SIDE_KINDS}
    det = ["peak per kind: %s" % ", ".join("%s %s" % (k, fmt_bytes(v)) for k, v in per_kind.items()),
           "memory_stats: %s" % json.dumps(truth.get("memory_stats"), sort_keys=True),
           plain_line(plain, "peak_bytes_in_use"),
           "env: %s" % {k: v for k, v in (truth.get("env") or {}).items() if v and k.startswith("XLA")},
           "jax %s, jaxlib %s, %s, %s" % (truth.get("jax_version"), truth.get("jaxlib_version"),
                                          truth.get("device_kind"), truth.get("platform_version"))]
    table.add(name, "peak of live device-side bytes (device+vmm_physical, and pool/managed if any)",
              "peak_bytes_in_use = %s" % fmt_bytes(oracle), fmt_bytes(dev["peak"]), ">=",
              verdict(oracle is not None and oracle > 0 and dev["peak"] >= oracle), det)

    allocs = trace.allocs()
    focus = ("cuMemCreate", "cuMemAlloc", "cuMemHostAlloc")
    counts = collections.Counter(norm_api(e.api) for e in allocs)
    cell = ", ".join("%s %d" % (api, counts.get(api.lower(), 0)) for api in focus)
    table.add(name, "driver APIs used", "-", cell, "printed, not compared", "INFO",
              ["all allocations by api: %s" % api_counts(allocs),
               "by kind: %s" % dict(collections.Counter(e.kind for e in allocs))])

    owners = collections.defaultdict(lambda: [0, 0, set()])
    for e in allocs:
        o = owners[owner_module(e.stack)]
        o[0] += 1
        o[1] += e.size
        o[2].add(e.api)
    ranked = sorted(owners.items(), key=lambda kv: -kv[1][1])
    cell = "; ".join("%s: %d (%s)" % (mod, c, ", ".join(sorted(apis))) for mod, (c, b, apis) in ranked[:4])
    det = ["owner = innermost frame outside libcumemtrace, libcuda, libcudart, libc:"]
    det += ["  %-45s %4d allocations %s apis %s" % (mod, c, fmt_bytes(b), sorted(apis)) for mod, (c, b, apis) in
            ranked]
    for e in sorted(allocs, key=lambda e: -e.size)[:4]:
        det.append("largest: %s %s: %s" % (fmt_bytes(e.size), e.api, stack_summary(e.stack, 10)))
    table.add(name, "modules owning the allocations", "-", cell or "-", "attribution", "INFO", det)

    if prealloc:
        limit = to_int(ms.get("bytes_limit"))
        largest = max([e.size for e in allocs if is_dev(e)] or [0])
        frac = (truth.get("env") or {}).get("XLA_PYTHON_CLIENT_MEM_FRACTION")
        table.add(name, "preallocation", "bytes_limit = %s (MEM_FRACTION %s)" % (fmt_bytes(limit), frac),
                  "device-side peak %s, largest allocation %s" % (fmt_bytes(dev["peak"]), fmt_bytes(largest)),
                  "printed, not compared", "INFO",
                  ["bytes_reserved %s, pool_bytes %s, peak_pool_bytes %s" % (
                      ms.get("bytes_reserved"), ms.get("pool_bytes"), ms.get("peak_pool_bytes"))])


# ----------------------------------------------------------------------------------------------------------------


def check_workload(directory, table, name, rcs, times):
    truth_file = "%s_truth.json" % name
    try:
        plain = load_json(directory, "%s_plain_truth.json" % name)
    except Missing:
        plain = None
    guarded(table, name, "exit status", check_exit, table, name, rcs, times, plain)
    trace = guarded(table, name, "trace and reports", load_trace, directory, name)
    if trace is None:
        return
    guarded(table, name, "tool health", check_health, table, name, trace)
    guarded(table, name, "frees", check_frees, table, name, trace)
    guarded(table, name, "events total", check_events, table, name, trace)
    truth = guarded(table, name, "ground truth (%s)" % truth_file, load_json, directory, truth_file)
    if truth is None:
        return
    if trace.pid is not None and truth.get("pid") is not None and to_int(trace.pid) != to_int(truth.get("pid")):
        table.add(name, "trace belongs to the workload", "pid %s" % truth.get("pid"), "pid %s" % trace.pid, "==",
                  "FAIL", ["the runner picked another process's trace"])
    specific = {
        "torch_expandable": check_expandable,
        "torch_async": check_async,
        "torch_nocache": check_nocache,
        "cupy_pool": check_cupy,
        "jax_prealloc": lambda *a: check_jax(*a, prealloc=True),
        "jax_noprealloc": lambda *a: check_jax(*a, prealloc=False),
    }[name]
    guarded(table, name, "relations", specific, table, name, trace, truth, plain)


def header_lines(directory, names):
    lines = ["# cumemtrace GPU coverage"]
    seen = []
    for name in names:
        try:
            t = load_json(directory, "%s_truth.json" % name)
        except Missing:
            continue
        for key in ("torch_version", "cupy_version", "jax_version"):
            if t.get(key) and key not in [k for k, _ in seen]:
                seen.append((key, t.get(key)))
        if t.get("device_name") and ("device", t.get("device_name")) not in seen:
            seen.append(("device", t.get("device_name")))
    if seen:
        lines.append("")
        lines.append(", ".join("%s %s" % kv for kv in seen))
    rcs = load_pairs(directory, RC_FILE, int)
    lines.extend(gpu_common.exit_code_lines(rcs))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, help="directory with the outputs of scripts/gpu-coverage.sh")
    parser.add_argument("--md", help="write the table and its details as markdown here")
    parser.add_argument("--only", nargs="*", choices=WORKLOADS, help="check only these workloads")
    parser.add_argument("--print", dest="print_what", choices=("table", "all"), default="all",
                        help="what to print on stdout (the --md file always has everything)")
    args = parser.parse_args(argv)
    names = args.only or list(WORKLOADS)
    rcs = load_pairs(args.dir, RC_FILE, int)
    times = load_pairs(args.dir, TIMES_FILE, float)

    table = Table()
    for name in names:
        check_workload(args.dir, table, name, rcs, times)

    header = header_lines(args.dir, names)
    if args.md:
        with open(args.md, "w") as f:
            f.write(table.markdown(header))
    sys.stdout.write(table.markdown(header, with_details=args.print_what == "all"))
    return 1 if table.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
