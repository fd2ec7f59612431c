#!/usr/bin/env python3
"""Checks cumemtrace's GPU traces against independent oracles and prints the verdicts as a table.

scripts/gpu-check.sh runs the workloads (tests/gpu/torch_train_pinned.py, tests/gpu/leaky.cu) and the analyzer, puts
every output in one directory, and then runs

    compare.py --dir WORKDIR [--md summary.md]

The table has one row per relation: `check | oracle | cumemtrace | relation | result`, with PASS / FAIL for checked
relations, INFO for numbers without an oracle, MISSING where an input file is absent, empty or not JSON (an
analyzer step failed), ERROR where compare.py itself raised, SKIP where a relation cannot be evaluated on these
inputs (e.g. event times not on the script's clock). Details (module lists, per-thread bytes, stacks of unexpected
entries) follow the table. Exit status: 0 when no row is FAIL, ERROR or MISSING; 1 otherwise.

The oracles: PyTorch's own counters (memory_stats, host_memory_stats, mem_get_info, written by
torch_train_pinned.py), compute-sanitizer's leak check, and what leaky.cu itself printed about its planted leaks.
The cumemtrace side is read from `cumem-analyze ... --json` (events, peak, leaks, pinned, oom, each with a large
--top); peaks and live sets are recomputed here from the events by replaying allocations and frees in sequence
order, so that the analyzer's own reports are checked too. `events --json` carries stack ids only: their frames come
from the same trace's other reports (see collect_stacks), or from the events themselves where a later analyzer
inlines them ("stack") or adds a "stacks" table. Event times are relative to process.start_time_ns.

Only the standard library; Python 3.8+.
"""
import argparse
import collections
import json
import os
import re
import sys

# gpu_common.py sits beside this script, and a script's own folder is first on sys.path.
import gpu_common
from gpu_common import (MiB, BaseEvent, BaseTrace, Missing, Table, collect_stacks, fmt_bytes, has_module, load_json,
                        load_pairs, load_reports, norm_stack, stack_summary, to_int, verdict)
OOM_REQUEST = 1 << 50

# What leaky.cu plants (keep in step with its header comment).
PLANTED_FUNCTIONS = {
    "leak_model_weights": (8 * MiB, 2),  # 3 MiB + 5 MiB
    "leak_scratch": (7 * MiB, 1),
}
PLANTED_SIZES = sorted([3 * MiB, 5 * MiB, 7 * MiB])

# Modules whose frames say "PyTorch's caching allocators made this call".
C10_CUDA = "libc10_cuda.so"
TORCH_CUDA = "libtorch_cuda.so"
# Frames that are not the owner of an allocation: the tool itself, the driver, the runtime, libc.
PLUMBING_MODULES = ("libcumemtrace", "libcuda.so", "libcudart.so", "libc.so", "ld-linux", "libpthread")

DEVICE_SIDE_KINDS = ("device", "pool", "managed", "vmm_physical")  # memory on the GPU, each byte counted once

FREE_APIS = {"cumemfree", "cumemfreehost", "cumemhostunregister", "cumemfreeasync", "cumemrelease",
             "cumemaddressfree", "cumemunmap", "cudafree", "cudafreehost", "cudahostunregister", "cudafreeasync"}
HANDLE_APIS = {"cumemcreate", "cumemrelease"}
MAPPING_APIS = {"cumemmap", "cumemunmap"}
RESERVE_APIS = {"cumemaddressreserve", "cumemaddressfree"}

# Files in the work directory (scripts/gpu-check.sh writes them under these names).
TORCH_TRUTH = "torch_truth.json"
RC_FILE = "rc.txt"


def trace_file(trace, what):
    return "%s_%s.json" % (trace, what)


# ----------------------------------------------------------------------------------------------------------------
# Reading inputs


def load_text(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        raise Missing("%s is missing" % name)
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def load_rcs(directory):
    return load_pairs(directory, RC_FILE, int)


def norm_api(api):
    s = str(api or "").strip()
    s = re.sub(r"_v\d+$", "", s)
    return s.lower()


def has_function(stack, fragment):
    return bool(stack) and any(fragment in f.function for f in stack)


def owner_module(stack):
    """The innermost frame that is not plumbing (the tool, the driver, the runtime, libc): who asked."""
    return gpu_common.owner_module(stack, PLUMBING_MODULES, fallback_to_last=True)


class Event(BaseEvent):
    __slots__ = ()

    def __init__(self, raw, stacks_table):
        BaseEvent.__init__(self, raw)
        api = norm_api(self.api)
        op = str(raw.get("op") or "").lower()
        if op not in ("alloc", "free"):
            op = "free" if api in FREE_APIS else "alloc"
        self.op = op
        stack = norm_stack(raw.get("stack"))
        if stack is None and stacks_table:
            sid = raw.get("stack_id")
            stack = stacks_table.get(str(sid))
        self.stack = stack
        if api in HANDLE_APIS or (op == "alloc" and self.kind == "vmm_physical"):
            self.space = "handle"
        elif api in MAPPING_APIS or (op == "alloc" and self.kind == "vmm_mapped"):
            self.space = "mapping"
        elif api in RESERVE_APIS or (op == "alloc" and self.kind == "address_reserve"):
            self.space = "reserve"
        else:
            self.space = "alloc"


def build_stacks_table(doc):
    table = {}
    if not isinstance(doc, dict):
        return table
    raw = doc.get("stacks")
    if isinstance(raw, dict):
        for key, value in raw.items():
            st = norm_stack(value)
            if st is not None:
                table[str(key)] = st
    elif isinstance(raw, list):
        for item in raw:
            if isinstance(item, dict):
                key = item.get("id", item.get("stack_id"))
                st = norm_stack(item.get("frames", item.get("stack")))
                if key is not None and st is not None:
                    table[str(key)] = st
    return table


class Trace(BaseTrace):
    REPLAY_STOPS_AT_CUT = True  # replay(until_ns=...) ends at the first later event

    def __init__(self, doc, other_reports=()):
        raw_events = doc.get("events", []) if isinstance(doc, dict) else doc
        if not isinstance(raw_events, list):
            raise Missing("events JSON has no list 'events'")
        table = build_stacks_table(doc)
        for report in other_reports:
            collect_stacks(report, table)
        self.stack_table_size = len(table)
        # The analyzer writes time_ns relative to the trace's start; process.start_time_ns (CLOCK_MONOTONIC) makes
        # them absolute, comparable with the workload's time.monotonic_ns().
        process = doc.get("process") if isinstance(doc, dict) else None
        self.time_base = to_int(process.get("start_time_ns"), 0) if isinstance(process, dict) else 0
        self.events = [Event(e, table) for e in raw_events if isinstance(e, dict)]
        for e in self.events:
            e.time += self.time_base
        self.events.sort(key=lambda e: (e.seq, e.time))
        self.with_stack = sum(1 for e in self.events if e.stack)
        self.extra_keys = sorted(k for k in doc.keys() if k != "events") if isinstance(doc, dict) else []
        self.health = doc.get("health") if isinstance(doc, dict) else None

    def unresolved(self, kinds):
        """Successful allocations of these kinds whose stack could not be resolved: (count, bytes)."""
        missing = [e for e in self.allocs(lambda e: e.kind in kinds) if not e.stack]
        return len(missing), sum(e.size for e in missing)


def load_trace(directory, trace_name):
    """The events of a trace with their stacks resolved through the trace's other JSON reports."""
    others = [doc for _, doc in load_reports(directory, trace_name, ("leaks", "peak", "oom", "pinned"))]
    return Trace(load_json(directory, trace_file(trace_name, "events")), others)

def guarded(table, name):
    """Runs one group of checks; an exception becomes an ERROR row instead of ending the comparison."""
    def wrap(fn):
        def run(*args):
            try:
                fn(*args)
            except Missing as e:
                table.add(name, "-", "-", "input missing", "MISSING", [str(e)])
            except Exception as e:  # noqa: BLE001  a bug here must not hide the other rows
                import traceback
                table.add(name, "-", "-", "compare.py raised", "ERROR",
                          traceback.format_exc().rstrip().splitlines())
        return run
    return wrap


# ----------------------------------------------------------------------------------------------------------------
# PyTorch checks


def time_is_absolute(trace, truth):
    """True when the events' time_ns is CLOCK_MONOTONIC as the script's time.monotonic_ns(), so they can be cut."""
    t0 = to_int(truth.get("t0_mono_ns"))
    t_end = to_int(truth.get("truth_written_mono_ns"))
    times = [e.time for e in trace.events if e.time]
    # Relative times (from the trace's start, about the script's start) would all be under the run's length, far
    # below t0 unless the machine booted moments ago; below 2 minutes of uptime the two cannot be told apart.
    if not t0 or not t_end or not times or t0 < 120 * 10**9:
        return False
    return min(times) >= t0 - 10 * 10**9 and max(times) <= t_end + 300 * 10**9


def host_stats_key(hs):
    """Which host_memory_stats key counts the bytes PyTorch's CachingHostAllocator got from CUDA (cached + in use).

    Older layouts (HostStats: allocation/segment/allocated_bytes/reserved_bytes): reserved_bytes is the slow-path
    total of cudaHostAlloc'd blocks (exact), allocated_bytes is in-use bytes summed over per-size buckets.
    Newer layouts (allocations/allocated_bytes/active_requests/active_bytes): allocated_bytes is the owned blocks
    (active + cached) and active_bytes the in-use part."""
    if "active_bytes.peak" in hs or "active_requests.peak" in hs:
        return "allocated_bytes.peak", "newer layout (active_*) present: allocated_bytes = owned blocks"
    if "reserved_bytes.peak" in hs:
        return "reserved_bytes.peak", "older layout (reserved_bytes present): reserved_bytes = cudaHostAlloc'd blocks"
    return "allocated_bytes.peak", "neither reserved_bytes nor active_* present: falling back to allocated_bytes"


def check_torch(directory, table, trace_name):
    truth = load_json(directory, TORCH_TRUTH)
    ms = truth.get("memory_stats") or {}
    hs = truth.get("host_memory_stats") or {}
    trace = load_trace(directory, trace_name)
    absolute = time_is_absolute(trace, truth)

    n_dev, b_dev = trace.unresolved(("device",))
    n_pin, b_pin = trace.unresolved(("pinned_host",))
    table.add("torch: events with stacks", "-", "%d of %d events" % (trace.with_stack, len(trace.events)),
              "stacks needed for per-owner checks", verdict(trace.with_stack > 0) if trace.events else "FAIL",
              ["events JSON top-level keys besides 'events': %s" % trace.extra_keys,
               "stacks known: %d (inline, a 'stacks' table, or from the peak/leaks/oom/pinned reports)" %
               trace.stack_table_size,
               "allocations without a resolved stack: device %d (%s), pinned_host %d (%s)" % (
                   n_dev, fmt_bytes(b_dev), n_pin, fmt_bytes(b_pin)),
               "trace health: %s" % json.dumps(trace.health),
               "event times are %s" % ("CLOCK_MONOTONIC (absolute): time-cut checks enabled" if absolute
                                       else "not comparable with the script's clock: time-cut checks skipped")])

    # (a) caching allocator segments vs reserved_bytes.all.peak
    def is_c10(e):
        return e.kind == "device" and has_module(e.stack, C10_CUDA)

    c10 = trace.replay(is_c10)
    c10_allocs = trace.allocs(is_c10)
    oracle = to_int(ms.get("reserved_bytes.all.peak"))
    details = [
        "c10 device allocations (stack through %s): %d, bytes allocated in all %d" % (
            C10_CUDA, len(c10_allocs), sum(e.size for e in c10_allocs)),
        "apis: %s" % dict(collections.Counter(e.api for e in c10_allocs)),
        "sizes (bytes: count): %s" % sorted(collections.Counter(e.size for e in c10_allocs).items()),
        "innermost %s function (count): %s" % (C10_CUDA, sorted(collections.Counter(
            next((f.function for f in e.stack if C10_CUDA in f.module), "?") for e in c10_allocs).items())),
        "threads (count): %s" % sorted(collections.Counter(e.thread_name or str(e.thread)
                                                           for e in c10_allocs).items()),
        "memory_stats allocated_bytes.all.peak=%s reserved_bytes.all.current=%s num_alloc_retries=%s num_ooms=%s" % (
            ms.get("allocated_bytes.all.peak"), ms.get("reserved_bytes.all.current"), ms.get("num_alloc_retries"),
            ms.get("num_ooms")),
        "allocator backend: %s, PYTORCH_CUDA_ALLOC_CONF=%s" % (
            truth.get("allocator_backend"), (truth.get("env") or {}).get("PYTORCH_CUDA_ALLOC_CONF")),
        "trace: c10 live at the end %s" % fmt_bytes(c10["current"]),
    ]
    table.add("(a) torch: caching-allocator segments, peak live bytes",
              "reserved_bytes.all.peak = %s" % fmt_bytes(oracle), fmt_bytes(c10["peak"]), "==",
              verdict(oracle is not None and c10["peak"] == oracle), details)
    seg_oracle = to_int(ms.get("segment.all.allocated"))
    table.add("(a) torch: caching-allocator segments, number of cudaMalloc",
              "segment.all.allocated = %s" % seg_oracle, len(c10_allocs), "==",
              verdict(seg_oracle is not None and len(c10_allocs) == seg_oracle))
    if absolute and truth.get("mem_samples"):
        bad = []
        for s in truth["mem_samples"]:
            live = trace.replay(is_c10, until_ns=to_int(s.get("mono_ns")))["current"]
            if live != to_int(s.get("memory_reserved")):
                bad.append("step %s %s: reserved %s, trace %s" % (s.get("step"), s.get("label"),
                                                                   s.get("memory_reserved"), live))
        n = len(truth["mem_samples"])
        table.add("(a) torch: c10 live bytes at each sample time", "memory_reserved() at %d samples" % n,
                  "%d of %d equal" % (n - len(bad), n), "== at every sample", verdict(not bad), bad[:20])
    else:
        table.add("(a) torch: c10 live bytes at each sample time", "memory_reserved()", "-",
                  "needs CLOCK_MONOTONIC event times", "SKIP")

    # The analyzer's own peak report against the replay of all device-kind events.
    devices = sorted(set(e.device for e in trace.allocs(lambda e: e.kind == "device")))
    try:
        peaks = load_json(directory, trace_file(trace_name, "peak")).get("peaks", [])
        for dev in devices or [0]:
            mine = trace.replay(lambda e, d=dev: e.kind == "device" and e.device == d)["peak"]
            theirs = [p for p in peaks if to_int(p.get("device")) == dev and p.get("kind") == "device"]
            value = to_int(theirs[0].get("peak_bytes")) if theirs else None
            top = theirs[0].get("top", []) if theirs else []
            det = ["top %d groups at the analyzer's peak:" % len(top)]
            for g in top[:12]:
                det.append("  %s x%s  %s" % (fmt_bytes(to_int(g.get("bytes"))), g.get("count"),
                                             stack_summary(norm_stack(g.get("stack")))))
            table.add("(a) torch: analyzer `peak` report, device %d kind device" % dev,
                      "replay of events: %s" % fmt_bytes(mine), fmt_bytes(value), "==",
                      verdict(value is not None and value == mine), det)
    except Missing as e:
        table.add("(a) torch: analyzer `peak` report", "-", "-", "input missing", "MISSING", [str(e)])

    # (b) pinned memory of PyTorch's CachingHostAllocator vs host_memory_stats
    pinned_all = trace.allocs(lambda e: e.kind == "pinned_host")

    def is_torch_pinned(e):
        return e.kind == "pinned_host" and (has_module(e.stack, TORCH_CUDA) or has_module(e.stack, C10_CUDA))

    pinned = trace.replay(is_torch_pinned)
    torch_pinned = trace.allocs(is_torch_pinned)
    key, why = host_stats_key(hs) if isinstance(hs, dict) else ("allocated_bytes.peak", "no host stats")
    oracle = to_int(hs.get(key)) if isinstance(hs, dict) else None
    by_module = collections.Counter()
    for e in pinned_all:
        mods = [m for m in (TORCH_CUDA, C10_CUDA, "libtorch_cpu.so", "libtorch_python.so") if has_module(e.stack, m)]
        by_module[",".join(mods) or "none of libtorch_cuda/libc10_cuda/libtorch_cpu/libtorch_python"] += 1
    by_thread = collections.defaultdict(lambda: [0, 0])
    for e in torch_pinned:
        by_thread[e.thread_name or str(e.thread)][0] += 1
        by_thread[e.thread_name or str(e.thread)][1] += e.size
    details = [
        "oracle key %r: %s" % (key, why),
        "candidate host_memory_stats keys:",
    ]
    if isinstance(hs, dict):
        for k in sorted(hs):
            if any(w in k for w in ("bytes", "alloc", "segment", "active", "num_host")):
                details.append("  %s = %s" % (k, hs[k]))
    else:
        details.append("  host_memory_stats unavailable: %r" % (hs,))
    details.append("pinned_host allocations in the trace: %d, by module in stack: %s" % (
        len(pinned_all), dict(by_module)))
    details.append("PyTorch's (through %s or %s): %d, sizes %s" % (
        TORCH_CUDA, C10_CUDA, len(torch_pinned), sorted(collections.Counter(e.size for e in torch_pinned).items())))
    for name, (count, total) in sorted(by_thread.items()):
        details.append("  thread %r: %d allocations, %s" % (name, count, fmt_bytes(total)))
    for e in [e for e in torch_pinned if "pt_data_pin" not in e.thread_name][:5]:
        details.append("  PyTorch's, not on pt_data_pin: %s on %r: %s" % (fmt_bytes(e.size), e.thread_name,
                                                                           stack_summary(e.stack, 10)))
    others = [e for e in pinned_all if not is_torch_pinned(e)]
    for e in others[:10]:
        details.append("  not PyTorch's: %s on %r via %s: %s" % (fmt_bytes(e.size), e.thread_name, e.api,
                                                                  stack_summary(e.stack)))
    table.add("(b) torch: CachingHostAllocator pinned blocks, peak live bytes",
              "host_memory_stats[%r] = %s" % (key, fmt_bytes(oracle)), fmt_bytes(pinned["peak"]), "==",
              verdict(oracle is not None and pinned["peak"] == oracle), details)
    n_oracle = to_int(hs.get("num_host_alloc")) if isinstance(hs, dict) else None
    if n_oracle is not None:
        table.add("(b) torch: CachingHostAllocator pinned blocks, number of cudaHostAlloc",
                  "num_host_alloc = %d" % n_oracle, len(torch_pinned), "==", verdict(len(torch_pinned) == n_oracle))
    names = set(by_thread)
    table.add("(b) torch: thread of the pinned allocations", "DataLoader pins on 'pt_data_pin'",
              ", ".join(sorted(names)) or "-", "contains pt_data_pin",
              verdict(any("pt_data_pin" in n for n in names)))
    try:
        spikes = load_json(directory, trace_file(trace_name, "pinned")).get("pinned_spikes", [])
        if spikes:
            top = max(spikes, key=lambda s: to_int(s.get("rise_bytes"), 0))
            thread = str(top.get("thread"))
            table.add("(b) torch: analyzer `pinned` report, largest spike", "on thread pt_data_pin",
                      "%s on %s" % (fmt_bytes(to_int(top.get("rise_bytes"))), thread), "thread matches",
                      verdict("pt_data_pin" in thread),
                      ["%d spikes; largest: %s" % (len(spikes), stack_summary(norm_stack(top.get("stack"))))])
        else:
            table.add("(b) torch: analyzer `pinned` report, largest spike", "on thread pt_data_pin", "no spikes",
                      "-", "INFO")
    except Missing as e:
        table.add("(b) torch: analyzer `pinned` report", "-", "-", "input missing", "MISSING", [str(e)])

    # (c) device memory outside the caching allocator
    def is_other_device(e):
        return e.kind in DEVICE_SIDE_KINDS and e.device >= 0 and not has_module(e.stack, C10_CUDA)

    other_allocs = trace.allocs(is_other_device)
    other = trace.replay(is_other_device)
    groups = collections.defaultdict(lambda: [0, 0, set(), set()])
    for e in other_allocs:
        g = groups[owner_module(e.stack)]
        g[0] += 1
        g[1] += e.size
        g[2].add(e.api)
        g[3].add(e.kind)
    details = ["owner = innermost frame outside the tool, driver, runtime and libc:"]
    for mod, (count, total, apis, kinds) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        details.append("  %-40s %3d allocations %s  apis %s kinds %s" % (mod, count, fmt_bytes(total),
                                                                       sorted(apis), sorted(kinds)))
    for e in other_allocs[:8]:
        details.append("  e.g. %s %s: %s" % (fmt_bytes(e.size), e.api, stack_summary(e.stack, 8)))
    table.add("(c) torch: device memory outside the caching allocator", "(no oracle; DESIGN measured 6 = 128 MiB)",
              "%d allocations, %s in all; peak live %s, live at end %s" % (
                  len(other_allocs), fmt_bytes(sum(e.size for e in other_allocs)), fmt_bytes(other["peak"]),
                  fmt_bytes(other["current"])),
              "attribution", "INFO", details)

    # (d) process total against the driver
    def is_device_side(e):
        return e.kind in DEVICE_SIDE_KINDS and e.device >= 0

    end = truth.get("mem_get_info_end") or {}
    used_end = to_int(end.get("used_bytes"))
    live_end = trace.replay(is_device_side)["current"]
    det = ["driver used (total - free) at the end: %s; traced live device memory at the end of the trace: %s" % (
        fmt_bytes(used_end), fmt_bytes(live_end))]
    if used_end is not None:
        det.append("difference (context, module images, allocator granularity, other processes): %s" % fmt_bytes(
            used_end - live_end))
    table.add("(d) torch: live device memory at the end", "mem_get_info used = %s" % fmt_bytes(used_end),
              fmt_bytes(live_end), "cumemtrace <= driver used",
              verdict(used_end is not None and live_end <= used_end), det)
    peak_sample = truth.get("mem_get_info_peak")
    if absolute and peak_sample:
        t = to_int(peak_sample.get("mono_ns"))
        live = trace.replay(is_device_side, until_ns=t)["current"]
        used = to_int(peak_sample.get("used_bytes"))
        table.add("(d) torch: live device memory at the least-free sample (step %s, %s)" % (
            peak_sample.get("step"), peak_sample.get("label")),
            "mem_get_info used = %s" % fmt_bytes(used), fmt_bytes(live), "cumemtrace <= driver used",
            verdict(used is not None and live <= used),
            ["difference: %s" % fmt_bytes(used - live) if used is not None else "no sample"])
    try:
        ooms = load_json(directory, trace_file(trace_name, "oom")).get("ooms", [])
        table.add("torch: failed allocations", "none expected", len(ooms), "-", "INFO",
                  ["%s" % json.dumps(o)[:300] for o in ooms[:5]])
    except Missing as e:
        table.add("torch: failed allocations", "-", "-", "input missing", "MISSING", [str(e)])


# ----------------------------------------------------------------------------------------------------------------
# leaky.cu checks

LEAK_RE = re.compile(r"Leaked\s+([\d,]+)\s+bytes\s+at\s+(0x[0-9a-fA-F]+)(.*)$")
LEAK_SUMMARY_RE = re.compile(r"LEAK SUMMARY:\s*([\d,]+)\s+bytes leaked in\s+([\d,]+)\s+allocations")
PLANTED_RE = re.compile(r"^PLANTED\s+(\w+)\s+(\d+)\s+(0x[0-9a-fA-F]+)\s*$")


def parse_sanitizer(text):
    """Returns ([(bytes, address)], summary (bytes, count) or None) from compute-sanitizer's memcheck output."""
    leaks = []
    summary = None
    for line in text.splitlines():
        m = LEAK_RE.search(line)
        if m and "device heap" not in m.group(3):
            leaks.append((int(m.group(1).replace(",", "")), int(m.group(2), 16)))
        m = LEAK_SUMMARY_RE.search(line)
        if m:
            summary = (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")))
    return leaks, summary


def parse_planted(text):
    planted = []
    for line in text.splitlines():
        m = PLANTED_RE.match(line.strip())
        if m:
            planted.append((m.group(1), int(m.group(2)), int(m.group(3), 16)))
    return planted


def planted_function(stack):
    for f in stack or []:
        for name in PLANTED_FUNCTIONS:
            if name in f.function:
                return name
    return None


def check_leaky(directory, table, trace_name, run_suffix, sanitizer_run, primary):
    label = "(e) leaky%s" % ("" if primary else " --no-reset")
    rcs = load_rcs(directory)
    if primary:
        plain = rcs.get("leaky_plain")
        traced = rcs.get("leaky_preload")
        table.add("(e) leaky: exit status under the preload", "plain run: %s" % plain, traced,
                  "== plain run == 0", verdict(plain == 0 and traced == plain))

    # The sanitizer, checked against what the program printed in the same run.
    san_leaks = None
    try:
        san_text = load_text(directory, sanitizer_run)
        san_leaks, summary = parse_sanitizer(san_text)
        san_planted = parse_planted(san_text)
        if primary:
            expect = sorted((size, addr) for _, size, addr in san_planted)
            table.add("(e) compute-sanitizer vs what leaky planted (oracle check)",
                      "planted %s" % [s for s, _ in expect], "sanitizer %s" % sorted(s for s, _ in san_leaks),
                      "== (size and address)", verdict(expect and sorted(san_leaks) == expect),
                      ["sanitizer leak summary: %s; rc %s" % (summary, rcs.get("leaky_sanitizer"))])
        else:
            table.add("(e) compute-sanitizer without cudaDeviceReset", "-",
                      "lists %d leaks, summary %s" % (len(san_leaks), summary), "-", "INFO")
            san_leaks = None
    except Missing as e:
        if primary:
            table.add("(e) compute-sanitizer output", "-", "-", "input missing", "MISSING", [str(e)])

    trace = load_trace(directory, trace_name)
    leaks_doc = load_json(directory, trace_file(trace_name, "leaks"))
    leaks = leaks_doc.get("leaks", []) if isinstance(leaks_doc, dict) else []

    # Leaks report: entries from the planted functions (names in the stacks) vs the sanitizer.
    per_function = collections.defaultdict(lambda: [0, 0])
    internal = []
    names_seen = set()
    for entry in leaks:
        stack = norm_stack(entry.get("stack"))
        fn = planted_function(stack)
        if fn:
            per_function[fn][0] += to_int(entry.get("bytes"), 0)
            per_function[fn][1] += to_int(entry.get("count"), 0)
            names_seen.update(f.function for f in stack if fn in f.function)
        else:
            internal.append(entry)
    user_bytes = sum(v[0] for v in per_function.values())
    user_count = sum(v[1] for v in per_function.values())
    if san_leaks is not None:
        oracle = (sum(s for s, _ in san_leaks), len(san_leaks))
        oracle_text = "sanitizer: %s in %d" % (fmt_bytes(oracle[0]), oracle[1])
    else:
        oracle = (sum(PLANTED_SIZES), len(PLANTED_SIZES))
        oracle_text = "planted: %s in %d" % (fmt_bytes(oracle[0]), oracle[1])
    table.add("%s: `leaks` report, entries from leak_* functions" % label, oracle_text,
              "%s in %d" % (fmt_bytes(user_bytes), user_count), "== (bytes, count)",
              verdict((user_bytes, user_count) == oracle),
              ["leaks report: %d entries; leak_summary %s" % (len(leaks), json.dumps(leaks_doc.get("leak_summary"))),
               "trace health: %s" % json.dumps(trace.health)] +
              ["  %s x%s %s dev %s: %s" % (fmt_bytes(to_int(e.get("bytes"))), e.get("count"), e.get("kind"),
                                          e.get("device"), stack_summary(norm_stack(e.get("stack")), 8))
               for e in leaks[:20]])
    if primary:
        ok = all(per_function.get(fn, [0, 0]) == list(want) for fn, want in PLANTED_FUNCTIONS.items())
        demangled = [n for n in names_seen if not n.startswith("_Z")]
        table.add("(e) leaky: leaking functions named in the stacks",
                  ", ".join("%s %s x%d" % (fn, fmt_bytes(b), c) for fn, (b, c) in sorted(PLANTED_FUNCTIONS.items())),
                  ", ".join("%s %s x%d" % (fn, fmt_bytes(v[0]), v[1]) for fn, v in sorted(per_function.items()))
                  or "no frame names a leak_* function",
                  "== per function", verdict(ok),
                  ["function names as they appear: %s (%s)" % (
                      sorted(names_seen), "demangled" if demangled and len(demangled) == len(names_seen)
                      else "mangled or mixed")])
        table.add("(e) leaky: other live allocations at the end (runtime internal?)", "-",
                  "%d entries, %s" % (len(internal), fmt_bytes(sum(to_int(e.get("bytes"), 0) for e in internal))),
                  "printed, not compared", "INFO",
                  ["%s x%s %s dev %s: %s" % (fmt_bytes(to_int(e.get("bytes"))), e.get("count"), e.get("kind"),
                                            e.get("device"), stack_summary(norm_stack(e.get("stack")), 8))
                   for e in internal[:20]])

    # Events: live allocations at the end, by address (independent of symbols) and by size against the sanitizer.
    replay = trace.replay(lambda e: e.kind in DEVICE_SIDE_KINDS or e.kind in ("pinned_host", "registered_host"))
    live = replay["live"]
    try:
        planted = parse_planted(load_text(directory, run_suffix))
    except Missing:
        planted = []
    live_by_addr = {(e.addr, e.size) for e in live}
    missing = [(fn, size, addr) for fn, size, addr in planted if (addr, size) not in live_by_addr]
    table.add("%s: planted addresses live at the end of the trace" % label,
              "leaky printed %d (address, size)" % len(planted),
              "%d of them live in the trace" % (len(planted) - len(missing)), "== all, exact address and size",
              verdict(bool(planted) and not missing),
              ["missing: %s" % ["%s %d %#x" % m for m in missing]] if missing else None)
    if primary and san_leaks is not None:
        from_planted = sorted(e.size for e in live if planted_function(e.stack))
        table.add("(e) leaky: sizes of live leak_* allocations vs sanitizer",
                  "sanitizer %s" % sorted(s for s, _ in san_leaks), "trace %s" % from_planted,
                  "== (multiset of sizes)", verdict(from_planted == sorted(s for s, _ in san_leaks)))
        # Everything properly_freed() allocated must have been freed, and all four kinds must have been seen.
        pf_allocs = trace.allocs(lambda e: has_function(e.stack, "properly_freed"))
        pf_live = [e for e in live if has_function(e.stack, "properly_freed")]
        kinds = sorted(set(e.kind for e in pf_allocs))
        want = ["device", "managed", "pinned_host", "pool"]
        table.add("(e) leaky: properly_freed() allocations", "kinds %s, all freed" % want,
                  "kinds %s, %d live" % (kinds, len(pf_live)), "== kinds, 0 live",
                  verdict(kinds == want and not pf_live),
                  ["apis: %s" % sorted(set(e.api for e in pf_allocs))] +
                  ["still live: %s %s" % (fmt_bytes(e.size), e.api) for e in pf_live])

    if primary:
        check_oom(directory, table, trace_name, trace)


def check_oom(directory, table, trace_name, trace):
    ooms = load_json(directory, trace_file(trace_name, "oom")).get("ooms", [])
    hits = [o for o in ooms if to_int(o.get("requested_bytes")) == OOM_REQUEST]
    det = ["ooms: %d" % len(ooms)] + [json.dumps({k: v for k, v in o.items() if k != "stack"})[:400] for o in ooms]
    if hits:
        o = hits[0]
        ok = o.get("error") == "CUDA_ERROR_OUT_OF_MEMORY" and to_int(o.get("error_code")) == 2
        det.append("stack: %s" % stack_summary(norm_stack(o.get("stack")), 8))
        det.append("names planted_oom in the stack: %s" % has_function(norm_stack(o.get("stack")), "planted_oom"))
        ours = "%s error %s (%s), api %s" % (fmt_bytes(to_int(o.get("requested_bytes"))), o.get("error"),
                                             o.get("error_code"), o.get("api"))
    else:
        ok = False
        ours = "no oom with requested_bytes 2^50"
    failed_events = [e for e in trace.events if not e.ok and e.op == "alloc"]
    det.append("failed allocation events: %s" % [(e.api, e.size, e.result) for e in failed_events[:5]])
    table.add("(f) leaky: planted cudaMalloc(2^50) in `oom`",
              "requested 1125899906842624, CUDA_ERROR_OUT_OF_MEMORY (2)", ours, "== request, error, code",
              verdict(ok), det)


# ----------------------------------------------------------------------------------------------------------------


def header_lines(directory):
    lines = ["# cumemtrace GPU validation"]
    try:
        truth = load_json(directory, TORCH_TRUTH)
        lines.append("")
        lines.append("device: %s (%s bytes); torch %s, CUDA %s; Python %s" % (
            truth.get("device_name"), truth.get("device_total_memory"), truth.get("torch_version"),
            truth.get("torch_cuda_version"), str(truth.get("python", "")).split()[0]))
    except Missing:
        pass
    rcs = load_rcs(directory)
    lines.extend(gpu_common.exit_code_lines(rcs))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, help="directory with the outputs of scripts/gpu-check.sh")
    parser.add_argument("--md", help="write the table as markdown here")
    parser.add_argument("--torch-trace", default="torch_train", help="name prefix of the torch trace's JSON files")
    args = parser.parse_args(argv)

    table = Table()
    guarded(table, "torch")(check_torch)(args.dir, table, args.torch_trace)
    guarded(table, "leaky")(check_leaky)(args.dir, table, "leaky", "leaky_preload.out", "leaky_sanitizer.out", True)
    guarded(table, "leaky --no-reset")(check_leaky)(args.dir, table, "leaky_noreset", "leaky_preload_noreset.out",
                                                    "leaky_sanitizer_noreset.out", False)

    text = table.markdown(header_lines(args.dir))
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 1 if table.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
