#!/usr/bin/env python3
"""Checks the remaining coverage rows and the Python-stack stories against oracles cumemtrace did not compute.

scripts/gpu-rows.sh runs the workloads of this folder (and tests/gpu/driver_api.cu, tests/gpu/leaky.cu built with
`-cudart shared`), runs the analyzer on every trace, puts every output in one directory, and then runs

    check.py --dir WORKDIR [--md rows.md] [--only ROW ...] [--print table|all]

Inputs, per trace NAME (the runner's names): NAME_summary.json (`summary --json --group-by stack --top 100000`:
health, owners, driver_memory, and the stacks of everything live at a peak, at the end or at a failure),
NAME_events.json (`events --json`), and per story the report in the analyzer's default grouping (NAME_oom_user.json,
NAME_leaks_user.json, NAME_pinned_user.json); the runs' outputs NAME_plain.out / NAME_traced.out; the workloads'
truths NAME_truth.json (traced run) and NAME_plain_truth.json (untraced run); rc.txt ("STEP RC") and times.txt
("STEP SECONDS"); gpus.txt (the number of GPUs nvidia-smi lists). Rows (see ROWS):

  1  pinned_register  PyTorch pinned memory in cudaHostRegister mode: registered_host peak vs host_memory_stats
  2  graphs_compile   CUDA graphs (private pool) and torch.compile: caching-allocator peak per phase
  3a driver_api       a plain driver-API program: its printed ledger vs the trace, event by event
  3b leaky_shared     leaky.cu with a shared cudart: leaks vs compute-sanitizer
  4  ddp              torchrun, 2 ranks, DDP over NCCL: one trace per rank, per-rank peak, owner nccl, `ranks`
  5a profiler         torch.profiler beside the preload: CUDA kernel events, traced vs untraced
  5b cupti            CUMEMTRACE_CUPTI=1 on PyTorch and CuPy: cupti_enabled, cupti_only_events
  6  dataloader_fork  CUMEMTRACE_FOLLOW_FORK=1 with a DataLoader: same checksum and exit status, clean trace
  7a story_oom        validation OOM: the first failure's user frame is the validation line
  7b dataloader       pinned spikes: Python frames of torch/utils/data/ with pin_memory functions
  7c story_leak       slow leak: the top leak group's user frame and its growth
  7d cost             µs per event untraced, traced without and with Python frames (INFO)

Every traced run also gets its health (trailer, 0 dropped events; unwind failures reported), the trailer's
python_stacks / python_failures (INFO) and the summary's driver_memory for device 0 (INFO).

The table: `row | oracle | cumemtrace | relation | result`: PASS / FAIL for checked relations, INFO for numbers
without an oracle, MISSING where an input is absent or not JSON (a step failed or was skipped), ERROR where this
script raised, SKIP where a relation cannot be evaluated here (one GPU for row 4). Exit status: 0 when no row is
FAIL, ERROR or MISSING, else 1.

Stacks: `events --json` carries stack ids; their frames come from every other report of the same trace (a stack
group's stack_id/stack pair is a real stack whatever the grouping). The workloads never empty PyTorch's cache, so
every caching-allocator segment is live at the end and in the summary's leak list. Only the standard library.
"""
import argparse
import collections
import glob
import importlib.util
import json
import os
import re
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
GPU_DIR = os.path.dirname(HERE)
sys.path.insert(0, GPU_DIR)
import gpu_common  # noqa: E402
from gpu_common import Missing, fmt_bytes, has_module, load_json, load_pairs, stack_summary, to_int, verdict  # noqa: E402,E501
import compare  # noqa: E402  tests/gpu/compare.py: the sanitizer parser, leaky's plan, host_stats_key


def _load_coverage_check():
    """tests/gpu/coverage/check.py under another module name (this file is check.py too)."""
    spec = importlib.util.spec_from_file_location("coverage_check", os.path.join(GPU_DIR, "coverage", "check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


coverage_check = _load_coverage_check()
norm_api = coverage_check.norm_api

ROWS = ("driver_api", "leaky_shared", "pinned_register", "story_oom", "story_leak", "dataloader", "ddp",
        "profiler", "cupti", "graphs_compile", "cost")
C10_CUDA = "libc10_cuda.so"
MEMORY_KINDS = ("device", "pinned_host", "registered_host", "managed", "pool", "vmm_physical")
OOM_REQUEST = 1 << 50
RC_FILE = "rc.txt"
TIMES_FILE = "times.txt"


# ----------------------------------------------------------------------------------------------------------------
# Frames, events, traces


class Frame(gpu_common.Frame):
    """A frame of schema 2: kind "native", "python" or "no_python" ("" when the analyzer does not say)."""
    __slots__ = ("kind",)

    def __init__(self, raw):
        gpu_common.Frame.__init__(self, raw)
        self.kind = str(raw.get("kind") or "") if isinstance(raw, dict) else ""

    def is_python(self):
        return self.kind == "python" or (not self.kind and str(self.file or "").endswith(".py"))

    def short(self):
        if self.is_python():
            return "%s [%s:%s]" % (self.function or "?", os.path.basename(str(self.file or "?")), self.line)
        return gpu_common.Frame.short(self)


def norm_stack(raw):
    return gpu_common.norm_stack(raw, Frame)


def python_frames(stack):
    return [f for f in stack or [] if f.is_python()]


def script_frame(stack, basename):
    """The innermost Python frame of the script named basename: the line the script was on."""
    for f in stack or []:
        if f.is_python() and os.path.basename(str(f.file or "")) == basename:
            return f
    return None


def frame_text(raw):
    if not isinstance(raw, dict):
        return str(raw)
    return "%s %s:%s (%s)" % (raw.get("function"), raw.get("file"), raw.get("line"), raw.get("kind"))


class Trace(gpu_common.BaseTrace):
    REPLAY_STOPS_AT_CUT = False

    def __init__(self, events_doc, reports):
        raw = events_doc.get("events") if isinstance(events_doc, dict) else None
        if not isinstance(raw, list):
            raise Missing("events JSON has no list 'events'")
        stacks = {}
        for report in reports:
            gpu_common.collect_stacks(report, stacks, Frame)
        self.stacks_known = len(stacks)
        self.process = events_doc.get("process") or {}
        self.time_base = to_int(self.process.get("start_time_ns"), 0) or 0
        self.pid = self.process.get("pid")
        self.raw_events = raw
        self.events = [coverage_check.Event(e, stacks, self.time_base) for e in raw if isinstance(e, dict)]
        self.events.sort(key=lambda e: (e.seq, e.time))
        self.health = events_doc.get("health") or {}
        self.summary = {}

    def window(self, want, t0, t1):
        """(live at t0, peak over [t0, t1] counting from that level, live at t1) of the allocations `want` picks,
        replayed in sequence order like BaseTrace.replay (absolute CLOCK_MONOTONIC times)."""
        live = {}
        current = at_t0 = peak = 0
        for e in self.events:
            if e.time > t1 or not e.ok or e.op not in ("alloc", "free"):
                continue
            key = (e.space, e.addr)
            if e.op == "alloc":
                old = live.get(key)
                if old is not None and old[1]:
                    current -= old[0].size
                counted = bool(want(e))
                live[key] = (e, counted)
                if counted:
                    current += e.size
            else:
                old = live.pop(key, None)
                if old is not None and old[1]:
                    current -= old[0].size
            if e.time <= t0:
                at_t0 = current
            else:
                peak = max(peak, current)
        return at_t0, max(at_t0, peak), current


# The reports of a trace NAME that can name stacks: NAME_<suffix>.json. A fixed list, never a pattern: one trace's
# name may be the start of another's (dataloader, dataloader_fork), and stack ids of another trace mean other stacks.
REPORT_SUFFIXES = ("summary", "oom_user", "leaks_user", "pinned_user")


def load_trace(directory, name):
    """The trace NAME: its events, with stacks from its reports (REPORT_SUFFIXES), and its summary."""
    events = load_json(directory, "%s_events.json" % name)
    reports = []
    summary = {}
    for suffix in REPORT_SUFFIXES:
        try:
            doc = load_json(directory, "%s_%s.json" % (name, suffix))
        except Missing:
            continue
        reports.append(doc)
        if suffix == "summary":
            summary = doc
    trace = Trace(events, reports)
    trace.summary = summary
    if summary.get("health"):
        trace.health = summary["health"]
    return trace


def field(doc, key, places=("health", "process", "header", "trailer")):
    """A header or trailer field wherever the analyzer puts it: in one of `places`, else at the top level."""
    if not isinstance(doc, dict):
        return None
    for place in places:
        sub = doc.get(place)
        if isinstance(sub, dict) and key in sub:
            return sub[key]
    return doc.get(key)


def is_c10_device(e):
    return e.kind == "device" and has_module(e.stack, C10_CUDA)


def unresolved(events):
    missing = [e for e in events if not e.stack]
    return "allocations without a resolved stack: %d of %d (%s)" % (len(missing), len(events),
                                                                    fmt_bytes(sum(e.size for e in missing)))


def times_ok(trace, truth):
    ok, why = coverage_check.times_comparable(trace, truth)
    return ok, why


def stats(truth, key="memory_stats"):
    value = truth.get(key) if isinstance(truth, dict) else None
    return value if isinstance(value, dict) and "error" not in value else {}


# ----------------------------------------------------------------------------------------------------------------
# The table


class Table(gpu_common.Table):
    FIRST_COLUMN = "row"

    def add(self, check, oracle, ours, relation, status, details=None):
        details = [str(d) for d in details] if details else None
        gpu_common.Table.add(self, check, oracle, ours, relation, status, details)


def guarded(table, label, fn, *args):
    """Runs one group of checks; a missing input or a bug becomes a row instead of ending the comparison."""
    try:
        return fn(*args)
    except Missing as e:
        table.add(label, "-", "-", "input missing", "MISSING", [str(e)])
    except Exception:  # noqa: BLE001  a bug here must not hide the other rows
        table.add(label, "-", "-", "check.py raised", "ERROR", traceback.format_exc().rstrip().splitlines())
    return None


class Inputs(object):
    """The work directory: JSON, text outputs, exit codes, times."""

    def __init__(self, directory):
        self.dir = directory
        self.rcs = load_pairs(directory, RC_FILE, int)
        self.times = load_pairs(directory, TIMES_FILE, float)

    def json(self, name):
        return load_json(self.dir, name)

    def json_or_none(self, name):
        try:
            return load_json(self.dir, name)
        except Missing:
            return None

    def text(self, name):
        path = os.path.join(self.dir, name)
        if not os.path.exists(path):
            raise Missing("%s is missing" % name)
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def rc(self, step):
        return self.rcs.get(step)

    def gpus(self):
        try:
            return int(self.text("gpus.txt").split()[0])
        except (Missing, ValueError, IndexError):
            return None


def exit_row(table, label, inp, plain_step, traced_step, want=0):
    """traced rc == untraced rc == want (without an untraced step: traced rc == want)."""
    t = inp.rc(traced_step)
    det = ["%s: rc %s in %s s" % (traced_step, t, inp.times.get(traced_step))]
    if plain_step:
        p = inp.rc(plain_step)
        det.insert(0, "%s: rc %s in %s s" % (plain_step, p, inp.times.get(plain_step)))
        if p is not None and p != want:
            det.append("the untraced run failed too: an environment problem, not the tool's (see the log)")
        ok = p == want and t == p
        oracle = "untraced rc %s" % p
        relation = "== (and %d)" % want
    else:
        ok = t == want
        oracle = "rc %d" % want
        relation = "=="
    if 125 in (t, inp.rc(plain_step) if plain_step else None):
        det.append("rc 125: the step was skipped, the budget was spent")
    table.add("%s: exit status" % label, oracle, "traced rc %s" % t, relation, verdict(ok), det)
    return ok


# ----------------------------------------------------------------------------------------------------------------
# Rows every traced run gets


def health_rows(table, label, trace, device=0):
    h = trace.health
    dropped = to_int(h.get("dropped_events"))
    slots = to_int(h.get("wrapper_slots_exhausted"))
    ok = bool(h.get("has_trailer")) and dropped == 0 and slots == 0 and not h.get("truncated")
    cell = "trailer %s; dropped %s, wrapper slots exhausted %s; unwind failures %s, truncated stacks %s" % (
        h.get("has_trailer"), dropped, slots, h.get("unwind_failures"), h.get("truncated_stacks"))
    table.add("%s: tool health" % label, "trailer, 0 dropped, 0 wrapper slots exhausted", cell,
              "== 0 each (unwind failures reported)", verdict(ok),
              ["health: %s" % json.dumps(h, sort_keys=True),
               "stacks known from the reports: %d; events: %d" % (trace.stacks_known, len(trace.events))])
    pys, pyf = field(trace.summary or {"health": h}, "python_stacks"), field(trace.summary or {"health": h},
                                                                             "python_failures")
    enabled = field(trace.summary or {}, "python_frames_enabled")
    with_py = sum(1 for e in trace.events if python_frames(e.stack))
    table.add("%s: Python stacks (trailer)" % label, "-",
              "python_stacks %s, python_failures %s" % (pys, pyf), "reported", "INFO",
              ["header python_frames_enabled: %s" % enabled,
               "events whose resolved stack has Python frames: %d of %d" % (with_py, len(trace.events))])
    dm = trace.summary.get("driver_memory") if isinstance(trace.summary, dict) else None
    mine = [d for d in dm or [] if isinstance(d, dict) and to_int(d.get("device")) == device]
    if mine:
        d = mine[0]
        cell = ("samples %s, used %s..%s, traced at max %s, unexplained at max %s (min %s, max %s, last %s)" % (
            d.get("samples"), d.get("used_min"), d.get("used_max"), d.get("traced_at_max"),
            d.get("unexplained_at_max"), d.get("unexplained_min"), d.get("unexplained_max"),
            d.get("unexplained_last")))
    else:
        cell = ("no driver_memory entry for device %d" % device) if dm is not None else "summary has no driver_memory"
    table.add("%s: driver memory, device %d" % (label, device), "-", cell, "reported", "INFO",
              ["driver_memory: %s" % json.dumps(dm)] if dm else None)


def traced(table, label, inp, name, device=0):
    """Loads trace NAME and adds its health rows; None (and a MISSING row) when it cannot be read."""
    trace = guarded(table, "%s: trace and reports" % label, load_trace, inp.dir, name)
    if trace is not None:
        guarded(table, "%s: tool health" % label, health_rows, table, label, trace, device)
    return trace


# ----------------------------------------------------------------------------------------------------------------
# 3a: the driver-API program

LEDGER_ALLOC = re.compile(r"^LEDGER alloc (\w+) (\w+) (-?\d+) (\d+) (0x[0-9a-fA-F]+|0)\s*$")
LEDGER_FREE = re.compile(r"^LEDGER free (\w+) (0x[0-9a-fA-F]+|0)\s*$")
PLANTED = re.compile(r"^PLANTED (\w+) (\d+) (0x[0-9a-fA-F]+)\s*$")


def parse_ledger(text):
    allocs, frees, planted = [], [], []
    for line in text.splitlines():
        line = line.strip()
        m = LEDGER_ALLOC.match(line)
        if m:
            allocs.append((m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5), 16)))
            continue
        m = LEDGER_FREE.match(line)
        if m:
            frees.append((m.group(1), int(m.group(2), 16)))
            continue
        m = PLANTED.match(line)
        if m:
            planted.append((m.group(1), int(m.group(2)), int(m.group(3), 16)))
    return allocs, frees, planted


def check_driver_api(table, inp):
    label = "3a driver API"
    exit_row(table, label, inp, "driver_api_plain", "driver_api_traced")
    allocs, frees, planted = parse_ledger(inp.text("driver_api_traced.out"))
    if not allocs:
        raise Missing("driver_api_traced.out has no LEDGER lines (the traced run failed?)")
    trace = traced(table, label, inp, "driver_api")
    if trace is None:
        return
    events = [e for e in trace.events if e.ok]
    unmatched, used = [], set()
    for api, kind, device, size, addr in allocs:
        hit = [i for i, e in enumerate(events) if i not in used and e.op == "alloc" and norm_api(e.api) == api.lower()
               and e.addr == addr and e.size == size and e.kind == kind]
        if hit:
            used.add(hit[0])
        else:
            unmatched.append("%s %s %d B at %#x (device %d)" % (api, kind, size, addr, device))
    table.add("%s: every ledger allocation is an event (api, kind, size, address)" % label,
              "%d allocations printed" % len(allocs), "%d matched" % (len(allocs) - len(unmatched)), "== all",
              verdict(not unmatched), ["not in the trace: %s" % u for u in unmatched] +
              ["trace allocations: %s" % ["%s %s %d %#x" % (e.api, e.kind, e.size, e.addr) for e in events
                                          if e.op == "alloc"]])
    free_missing = []
    for api, addr in frees:
        hit = [i for i, e in enumerate(events) if i not in used and e.op == "free" and norm_api(e.api) == api.lower()
               and e.addr == addr]
        if hit:
            used.add(hit[0])
        else:
            free_missing.append("%s %#x" % (api, addr))
    table.add("%s: every ledger free is an event (api, address)" % label, "%d frees printed" % len(frees),
              "%d matched" % (len(frees) - len(free_missing)), "== all", verdict(not free_missing),
              ["not in the trace: %s" % u for u in free_missing])
    extra = [e for i, e in enumerate(events) if i not in used and e.op in ("alloc", "free")]
    table.add("%s: events the program did not make" % label, "0 (the ledger is every call)", len(extra), "== 0",
              verdict(not extra), ["%s %s %s %d %#x: %s" % (e.op, e.api, e.kind, e.size, e.addr,
                                                             stack_summary(e.stack)) for e in extra[:20]])
    end = trace.replay(lambda e: True)
    live = sorted((e.addr, e.size) for e in end["live"])
    want = sorted((addr, size) for _, size, addr in planted)
    table.add("%s: live at the end of the trace" % label, "planted %s" % ["%#x %d" % w for w in want],
              ["%#x %d" % lv for lv in live], "== (address, size)", verdict(bool(want) and live == want),
              ["%s %s %d at %#x" % (e.api, e.kind, e.size, e.addr) for e in end["live"]])
    ls = trace.summary.get("leak_summary") or {}
    want_b = sum(size for _, size, _ in planted)
    table.add("%s: leak summary" % label, "%s in %d" % (fmt_bytes(want_b), len(planted)),
              "%s in %s" % (fmt_bytes(to_int(ls.get("memory_bytes"))), ls.get("memory_count")), "== (bytes, count)",
              verdict(to_int(ls.get("memory_bytes")) == want_b and to_int(ls.get("memory_count")) == len(planted)),
              ["leak_summary: %s" % json.dumps(ls)])
    names = []
    for entry in trace.summary.get("leaks") or []:
        stack = norm_stack(entry.get("stack")) or []
        names.extend(f.function for f in stack if "leak_driver_buffer" in f.function)
    table.add("%s: the leak's stack names its function" % label, "leak_driver_buffer", sorted(set(names)) or "-",
              "named", verdict(bool(names)))


# ----------------------------------------------------------------------------------------------------------------
# 3b: leaky.cu with a shared CUDA runtime


def check_leaky_shared(table, inp):
    label = "3b leaky (cudart shared)"
    exit_row(table, label, inp, "leaky_shared_plain", "leaky_shared_traced")
    san_text = inp.text("leaky_shared_sanitizer.out")
    san_leaks, summary = compare.parse_sanitizer(san_text)
    san_planted = compare.parse_planted(san_text)
    expect = sorted((size, addr) for _, size, addr in san_planted)
    table.add("%s: compute-sanitizer vs what leaky planted (oracle check)" % label,
              "planted %s" % [s for s, _ in expect], "sanitizer %s" % sorted(s for s, _ in san_leaks),
              "== (size and address)", verdict(bool(expect) and sorted(san_leaks) == expect),
              ["sanitizer leak summary: %s; rc %s" % (summary, inp.rc("leaky_shared_sanitizer"))])
    trace = traced(table, label, inp, "leaky_shared")
    if trace is None:
        return
    per_function = collections.defaultdict(lambda: [0, 0])
    others = []
    for entry in trace.summary.get("leaks") or []:
        stack = norm_stack(entry.get("stack"))
        fn = compare.planted_function(stack)
        if fn:
            per_function[fn][0] += to_int(entry.get("bytes"), 0)
            per_function[fn][1] += to_int(entry.get("count"), 0)
        else:
            others.append(entry)
    got = (sum(v[0] for v in per_function.values()), sum(v[1] for v in per_function.values()))
    oracle = (sum(s for s, _ in san_leaks), len(san_leaks))
    table.add("%s: leaks from leak_* functions vs compute-sanitizer" % label,
              "sanitizer: %s in %d" % (fmt_bytes(oracle[0]), oracle[1]), "%s in %d" % (fmt_bytes(got[0]), got[1]),
              "== (bytes, count)", verdict(oracle[1] > 0 and got == oracle),
              ["per function: %s" % dict(per_function)] +
              ["other live at the end: %s x%s %s: %s" % (fmt_bytes(to_int(e.get("bytes"))), e.get("count"),
                                                        e.get("kind"), stack_summary(norm_stack(e.get("stack")), 8))
               for e in others[:10]])
    planted = compare.parse_planted(inp.text("leaky_shared_traced.out"))
    live = trace.replay(lambda e: e.kind in MEMORY_KINDS)["live"]
    live_set = {(e.addr, e.size) for e in live}
    missing = [(fn, size, addr) for fn, size, addr in planted if (addr, size) not in live_set]
    table.add("%s: planted addresses live at the end of the trace" % label, "leaky printed %d" % len(planted),
              "%d live" % (len(planted) - len(missing)), "== all, exact address and size",
              verdict(bool(planted) and not missing), ["missing: %s" % ["%s %d %#x" % m for m in missing]])
    leak_events = [e for e in live if compare.planted_function(e.stack)]
    table.add("%s: api labels of the planted leaks" % label, "exported cudaMalloc of libcudart.so",
              sorted(set(e.api for e in leak_events)) or "-", "printed, not compared", "INFO",
              ["all allocations by api: %s" % coverage_check.api_counts(trace.allocs())])
    pf_allocs = trace.allocs(lambda e: compare.has_function(e.stack, "properly_freed"))
    pf_live = [e for e in live if compare.has_function(e.stack, "properly_freed")]
    kinds = sorted(set(e.kind for e in pf_allocs))
    table.add("%s: properly_freed() allocations" % label, "kinds device, managed, pinned_host, pool; all freed",
              "kinds %s, %d live" % (kinds, len(pf_live)), "== kinds, 0 live",
              verdict(kinds == ["device", "managed", "pinned_host", "pool"] and not pf_live))
    ooms = [o for o in trace.summary.get("ooms") or [] if to_int(o.get("requested_bytes")) == OOM_REQUEST]
    o = ooms[0] if ooms else {}
    table.add("%s: planted cudaMalloc(2^50) in `oom`" % label, "2^50 B, CUDA_ERROR_OUT_OF_MEMORY",
              "%s, %s" % (o.get("requested_bytes"), o.get("error")) if o else "no such failure", "==",
              verdict(o.get("error") == "CUDA_ERROR_OUT_OF_MEMORY"),
              [json.dumps({k: v for k, v in o.items() if k not in ("stack", "live_by_stack")})[:400]] if o else None)


# ----------------------------------------------------------------------------------------------------------------
# 1: pinned memory in cudaHostRegister mode


def check_pinned_register(table, inp):
    label = "1 pinned cudaHostRegister"
    exit_row(table, label, inp, "pinned_register_plain", "pinned_register_traced")
    truth = inp.json("pinned_register_truth.json")
    trace = traced(table, label, inp, "pinned_register")
    if trace is None:
        return
    hs = stats(truth, "host_memory_stats")
    key, why = compare.host_stats_key(hs)
    oracle = to_int(hs.get(key))
    registered = trace.allocs(lambda e: e.kind == "registered_host")
    pinned = trace.allocs(lambda e: e.kind == "pinned_host")
    peak = trace.replay(lambda e: e.kind == "registered_host")
    det = ["oracle key %r: %s" % (key, why),
           "host_memory_stats: %s" % ", ".join("%s=%s" % (k, hs[k]) for k in sorted(hs)
                                               if k.endswith(".peak") or k.startswith("num_host")),
           "registered_host: %d cudaHostRegister, sizes %s; live at the end %s" % (
               len(registered), sorted(e.size for e in registered), fmt_bytes(peak["current"])),
           "pinned_host (cudaHostAlloc) allocations: %d %s" % (len(pinned), coverage_check.api_counts(pinned)),
           "owners: %s" % dict(collections.Counter(coverage_check.owner_module(e.stack) for e in registered)),
           "threads: %s" % dict(collections.Counter(e.thread_name for e in registered)),
           unresolved(registered),
           "PYTORCH_CUDA_ALLOC_CONF=%s" % (truth.get("env") or {}).get("PYTORCH_CUDA_ALLOC_CONF"),
           "untraced run's %s: %s" % (key, stats(inp.json_or_none("pinned_register_plain_truth.json") or {},
                                                 "host_memory_stats").get(key))]
    if not registered and pinned:
        det.insert(0, "NO cudaHostRegister, but cudaHostAlloc: the register mode did not take (environment?)")
    table.add("%s: registered_host peak" % label, "host_memory_stats %s = %s" % (key, fmt_bytes(oracle)),
              fmt_bytes(peak["peak"]), "==", verdict(oracle is not None and oracle > 0 and peak["peak"] == oracle),
              det)
    active = to_int(hs.get("active_bytes.peak"))
    table.add("%s: in-use peak (the other counter)" % label, "host_memory_stats active_bytes.peak = %s" %
              fmt_bytes(active), "registered peak %s" % fmt_bytes(peak["peak"]), "reported", "INFO",
              ["run 4 (2026-11-22) found PyTorch's own active_bytes.peak above its allocated_bytes.peak in this "
               "mode, so active <= registered is no relation to test; allocated_bytes.peak is the oracle above"])
    n = to_int(hs.get("num_host_alloc"))
    if n is not None:
        table.add("%s: number of cudaHostRegister" % label, "num_host_alloc = %d" % n, len(registered), "==",
                  verdict(len(registered) == n))
    with_py = [e for e in registered if script_frame(e.stack, "pinned_register.py")]
    table.add("%s: Python line of the registrations" % label, "-",
              "%d of %d stacks reach pinned_register.py" % (len(with_py), len(registered)), "reported", "INFO",
              ["e.g. %s" % stack_summary(e.stack, 12) for e in registered[:2]])


# ----------------------------------------------------------------------------------------------------------------
# 7a: validation OOM


def user_frame_of(entry, basename):
    """(frame dict, where it came from): the analyzer's user_frame, else computed from the entry's stack."""
    uf = entry.get("user_frame")
    if isinstance(uf, dict):
        return uf, "the analyzer's user_frame"
    f = script_frame(norm_stack(entry.get("stack")), basename)
    if f is not None:
        return {"function": f.function, "file": f.file, "line": f.line, "kind": f.kind}, (
            "computed here from the stack (the entry has no user_frame)")
    return None, "no user_frame and no frame of %s in the stack" % basename


def frame_is(frame, basename, lines):
    return (isinstance(frame, dict) and os.path.basename(str(frame.get("file") or "")) == basename and
            to_int(frame.get("line")) in lines)


def check_story_oom(table, inp):
    label = "7a validation OOM"
    exit_row(table, label, inp, None, "story_oom_traced")
    truth = inp.json("story_oom_truth.json")
    trace = traced(table, label, inp, "story_oom")
    doc = inp.json("story_oom_oom_user.json")
    ooms = doc.get("ooms") or []
    base = (truth.get("script") or {}).get("basename") or "story_oom.py"
    line = to_int(truth.get("validation_line"))
    if not ooms:
        table.add("%s: first failure's user frame" % label, "%s:%s" % (base, line), "no failed allocation",
                  "==", "FAIL", ["oom_count %s; the script said: %s" % (doc.get("oom_count"), truth.get("oom"))])
        return
    first = ooms[0]
    uf, source = user_frame_of(first, base)
    table.add("%s: first failure's user frame" % label, "%s:%s (validation line, from the source)" % (base, line),
              frame_text(uf), "== file, line", verdict(line is not None and frame_is(uf, base, (line,))),
              ["user frame: %s" % source,
               "stack: %s" % stack_summary(norm_stack(first.get("stack")), 14),
               "oom_count %s; the script: %s" % (doc.get("oom_count"), json.dumps(truth.get("oom")))])
    want = to_int(truth.get("output_bytes"))
    got = to_int(first.get("requested_bytes"))
    table.add("%s: failed request" % label, "one output = %s" % fmt_bytes(want), fmt_bytes(got), "==",
              verdict(want is not None and got == want),
              ["api %s, error %s (%s), device %s, thread %r" % (first.get("api"), first.get("error"),
                                                                 first.get("error_code"), first.get("device"),
                                                                 first.get("thread")),
               "driver free/total after the failure: %s / %s" % (first.get("free_bytes"), first.get("total_bytes"))])
    reserved = to_int(truth.get("last_reserved_before_oom"))
    live = to_int(first.get("live_bytes"))
    groups = first.get("live_by_stack") or []
    table.add("%s: live at the failure" % label, "memory_reserved() after the last kept output = %s" %
              fmt_bytes(reserved), fmt_bytes(live), ">= (the caching allocator's segments and others')",
              verdict(reserved is not None and live is not None and live >= reserved),
              ["%d outputs kept; live_by_stack groups: %d" % (to_int(truth.get("outputs_kept"), 0), len(groups))] +
              ["  %s x%s: user frame %s" % (fmt_bytes(to_int(g.get("bytes"))), g.get("count"),
                                            frame_text(g.get("user_frame"))) for g in groups[:6]])
    if trace is not None:
        table.add("%s: failed allocations in the trace" % label, "-", trace.health.get("failed_allocations"),
                  "reported", "INFO", ["%s %d B result %s" % (e.api, e.size, e.result) for e in trace.events
                                       if not e.ok][:10])


# ----------------------------------------------------------------------------------------------------------------
# 7c: slow leak


def rising(values):
    return len(values) >= 2 and all(b >= a for a, b in zip(values, values[1:])) and values[-1] > values[0]


def growth_values(growth):
    """A list of byte counts from whatever shape `growth` has (numbers, {bytes}, {points: [...]}), else None."""
    if isinstance(growth, dict):
        for key in ("points", "timeline", "samples", "values"):
            if isinstance(growth.get(key), list):
                return growth_values(growth[key])
        first = to_int(growth.get("first_bytes", growth.get("start_bytes")))
        last = to_int(growth.get("last_bytes", growth.get("end_bytes")))
        return [first, last] if first is not None and last is not None else None
    if isinstance(growth, list):
        out = []
        for item in growth:
            value = to_int(item.get("bytes")) if isinstance(item, dict) else to_int(item)
            if value is None:
                return None
            out.append(value)
        return out
    return None


def check_story_leak(table, inp):
    label = "7c slow leak"
    exit_row(table, label, inp, None, "story_leak_traced")
    truth = inp.json("story_leak_truth.json")
    doc = inp.json("story_leak_leaks_user.json")
    base = (truth.get("script") or {}).get("basename") or "story_leak.py"
    lines = tuple(x for x in (to_int(truth.get("forward_line")), to_int(truth.get("append_line"))) if x)
    groups = [g for g in doc.get("leaks") or [] if g.get("kind") in MEMORY_KINDS]
    if not groups:
        table.add("%s: top leak group's user frame" % label, "%s:%s" % (base, lines), "no leak groups", "==",
                  "FAIL")
        return
    top = max(groups, key=lambda g: to_int(g.get("bytes"), 0))
    uf, source = user_frame_of(top, base)
    table.add("%s: top leak group's user frame" % label, "%s:%s (forward or append line)" % (base, list(lines)),
              frame_text(uf), "== file, one of the lines", verdict(bool(lines) and frame_is(uf, base, lines)),
              ["user frame: %s; group: %s x%s on device %s, %s stacks merged" % (
                  source, fmt_bytes(to_int(top.get("bytes"))), top.get("count"), top.get("device"),
                  top.get("stacks"))] +
              ["  group %s x%s: %s" % (fmt_bytes(to_int(g.get("bytes"))), g.get("count"),
                                       frame_text(g.get("user_frame"))) for g in groups[:8]])
    steps = [s for s in truth.get("steps") or [] if to_int(s.get("step"), -1) >= 0]
    oracle = [to_int(s.get("memory_allocated")) for s in steps]
    if "growth" in top:
        values = growth_values(top.get("growth"))
        table.add("%s: the group's `growth`" % label, "memory_allocated() rises: %s -> %s" % (
            oracle[0] if oracle else None, oracle[-1] if oracle else None), json.dumps(top.get("growth"))[:200],
            "rises", verdict(values is not None and rising(values) and rising(oracle)))
    else:
        table.add("%s: the group's `growth`" % label, "-", "no `growth` key in the group", "-", "SKIP",
                  ["contracts.md does not list `growth`; the replay row below measures the growth instead"])
    trace = traced(table, label, inp, "story_leak")
    if trace is None:
        return
    ok_time, why = times_ok(trace, truth)
    if not ok_time or not steps:
        table.add("%s: growth of the group's stacks over the steps" % label, "memory_allocated() per step", "-",
                  "needs event times on the workload's clock", "SKIP", [why])
        return
    line = to_int(uf.get("line")) if isinstance(uf, dict) else None

    def in_group(e):
        f = script_frame(e.stack, base)
        return e.kind in MEMORY_KINDS and f is not None and to_int(f.line) == line

    series = [trace.replay(in_group, until_ns=to_int(s.get("mono_ns")))["current"] for s in steps]
    table.add("%s: growth of the group's stacks over the steps (replay)" % label,
              "memory_allocated() %s -> %s over %d steps" % (oracle[0], oracle[-1], len(steps)),
              "%s -> %s" % (series[0], series[-1]), "both rise (never fall, end above start)",
              verdict(rising(series) and rising(oracle)),
              ["step %s: memory_allocated %s, memory_reserved %s, group live %s" % (
                  s.get("step"), s.get("memory_allocated"), s.get("memory_reserved"), v)
               for s, v in zip(steps, series)] + [unresolved(trace.allocs(lambda e: e.kind == "device"))])
    points = [s for s in truth.get("steps") or [] if "memory_reserved" in s]
    bad = []
    for s in points:
        live = trace.replay(is_c10_device, until_ns=to_int(s.get("mono_ns")))["current"]
        if live != to_int(s.get("memory_reserved")):
            bad.append("%s: memory_reserved %s, c10 live %s" % (s.get("label"), s.get("memory_reserved"), live))
    table.add("%s: caching-allocator live bytes at each step" % label, "memory_reserved() at %d points" % len(points),
              "%d of %d equal" % (len(points) - len(bad), len(points)), "== at every point",
              verdict(bool(points) and not bad), bad[:20])


# ----------------------------------------------------------------------------------------------------------------
# 7b and 6: DataLoader with pinned memory; follow-fork


def has_pin_frames(stack):
    py = python_frames(stack)
    in_data = [f for f in py if "torch/utils/data/" in str(f.file or "").replace("\\", "/")]
    pin = [f for f in py if "pin_memory" in f.function]
    return bool(in_data) and bool(pin), in_data, pin


def check_dataloader(table, inp):
    label = "7b pinned spike"
    plain = inp.json_or_none("dataloader_plain_truth.json")
    exit_row(table, label, inp, "dataloader_plain", "dataloader_traced")
    truth = inp.json("dataloader_truth.json")
    if plain is not None:
        table.add("%s: checksum" % label, plain.get("checksum_repr"), truth.get("checksum_repr"), "==",
                  verdict(same_checksum(plain, truth)))
    doc = inp.json("dataloader_pinned_user.json")
    spikes = sorted(doc.get("pinned_spikes") or [], key=lambda s: -to_int(s.get("rise_bytes"), 0))
    if not spikes:
        table.add("%s: spike stacks have DataLoader pin_memory frames" % label, "-", "no spikes", "-", "FAIL")
    else:
        top = spikes[0]
        ok, in_data, pin = has_pin_frames(norm_stack(top.get("stack")))
        det = ["largest spike: +%s on %r; Python frames: %s" % (
            fmt_bytes(to_int(top.get("rise_bytes"))), top.get("thread"),
            [f.short() for f in python_frames(norm_stack(top.get("stack")))])]
        for s in spikes[1:6]:
            det.append("spike +%s on %r: pin frames %s" % (fmt_bytes(to_int(s.get("rise_bytes"))), s.get("thread"),
                                                            has_pin_frames(norm_stack(s.get("stack")))[0]))
        table.add("%s: largest spike's stack has DataLoader pin_memory frames" % label,
                  "files under torch/utils/data/, functions with pin_memory",
                  "%d frames under torch/utils/data/, %d pin_memory functions (%s)" % (
                      len(in_data), len(pin), ", ".join(sorted(set(f.function for f in pin)))),
                  "both present", verdict(ok), det)
    trace = traced(table, label, inp, "dataloader")
    if trace is not None:
        hs = stats(truth, "host_memory_stats")
        key, _ = compare.host_stats_key(hs)
        pinned = trace.replay(lambda e: e.kind == "pinned_host" and (
            has_module(e.stack, compare.TORCH_CUDA) or has_module(e.stack, C10_CUDA)))
        table.add("%s: CachingHostAllocator pinned peak" % label, "host_memory_stats %s = %s" % (
            key, fmt_bytes(to_int(hs.get(key)))), fmt_bytes(pinned["peak"]), "==",
            verdict(to_int(hs.get(key)) is not None and pinned["peak"] == to_int(hs.get(key))),
            [unresolved(trace.allocs(lambda e: e.kind == "pinned_host"))])


def check_dataloader_rows(table, inp):
    guarded(table, "7b pinned spike", check_dataloader, table, inp)
    guarded(table, "6 follow-fork", check_dataloader_fork, table, inp)


def same_checksum(a, b):
    x, y = a.get("checksum"), b.get("checksum")
    if not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
        return False
    close = x == y or abs(x - y) <= 1e-12 * max(abs(x), abs(y))
    return close and a.get("index_sum") == b.get("index_sum") and a.get("batches") == b.get("batches")


def check_dataloader_fork(table, inp):
    label = "6 follow-fork"
    plain = inp.json("dataloader_plain_truth.json")
    exit_row(table, label, inp, "dataloader_plain", "dataloader_fork_traced")
    truth = inp.json("dataloader_fork_truth.json")
    table.add("%s: checksum" % label, "untraced %s (%s batches)" % (plain.get("checksum_repr"), plain.get("batches")),
              "%s (%s batches)" % (truth.get("checksum_repr"), truth.get("batches")), "== (and index sum)",
              verdict(same_checksum(plain, truth)),
              ["env: %s" % {k: v for k, v in (truth.get("env") or {}).items() if v and "CUMEMTRACE" in k}])
    out = inp.text("dataloader_fork_traced.out")
    crash = [ln for ln in out.splitlines() if re.search(r"Segmentation fault|core dumped|Traceback|Fatal|"
                                                       r"DataLoader worker .* exited unexpectedly", ln)]
    table.add("%s: no crash" % label, "no traceback, no worker death", "%d such lines" % len(crash), "== 0",
              verdict(not crash), crash[:10])
    h = {}
    summary = inp.json_or_none("dataloader_fork_summary.json")
    if summary:
        h = summary.get("health") or {}
    arc = inp.rc("analyze_dataloader_fork_summary")
    table.add("%s: the parent's trace reads cleanly" % label, "analyzer rc 0, trailer, not truncated",
              "rc %s, trailer %s, truncated %s" % (arc, h.get("has_trailer"), h.get("truncated")), "==",
              verdict(arc == 0 and h.get("has_trailer") is True and not h.get("truncated")))
    trace = traced(table, label, inp, "dataloader_fork")
    children = []
    for path in sorted(glob.glob(os.path.join(inp.dir, "dataloader_fork_child*_summary.json"))):
        name = os.path.basename(path)
        try:
            doc = load_json(inp.dir, name)
        except Missing as e:
            children.append("%s: %s" % (name, e))
            continue
        p = doc.get("process") or {}
        children.append("%s: pid %s ppid %s forked_child %s trailer %s events %s" % (
            name, p.get("pid"), p.get("ppid"), field(doc, "forked_child"), (doc.get("health") or {}).get(
                "has_trailer"), (doc.get("health") or {}).get("events_read")))
    parent_pid = trace.pid if trace is not None else truth.get("pid")
    listing = inp.json_or_none("dataloader_fork_traces.json") or {}
    table.add("%s: child traces" % label, "-", "%d child traces (parent pid %s)" % (len(children), parent_pid),
              "reported (workers that make no CUDA memory call may write none)", "INFO",
              children + ["trace files: %s" % listing.get("files")])


# ----------------------------------------------------------------------------------------------------------------
# 4: two ranks


def check_ddp(table, inp):
    label = "4 DDP 2 ranks"
    gpus = inp.gpus()
    if gpus is not None and gpus < 2:
        table.add("%s" % label, "-", "%d GPU(s)" % gpus, "needs 2 GPUs", "SKIP")
        return
    exit_row(table, label, inp, None, "ddp_traced")
    for rank in (0, 1):
        guarded(table, "%s: rank %d" % (label, rank), check_rank, table, inp, label, rank)
    doc = inp.json("ddp_ranks.json")
    ranks = doc.get("ranks") or []
    got = sorted(to_int(r.get("rank"), -1) for r in ranks)
    table.add("%s: `cumem-analyze ranks`" % label, "ranks 0 and 1", got, "both listed (traces of processes "
              "without a rank, such as torchrun's agent, may come last)", verdict(0 in got and 1 in got),
              ["%s: rank %s local_rank %s world %s pid %s devices %s" % (
                  os.path.basename(str(r.get("path"))), r.get("rank"), r.get("local_rank"), r.get("world_size"),
                  r.get("pid"), [(d.get("device"), d.get("peak_bytes"), d.get("owners_at_peak"))
                                 for d in r.get("devices") or []]) for r in ranks] +
              ["spread: %s" % json.dumps(doc.get("spread"))])


def check_rank(table, inp, label, rank):
    truth = inp.json("ddp_truth.%d.json" % rank)
    name = "ddp_r%d" % rank
    device = to_int(truth.get("device"), rank)
    trace = traced(table, "%s: rank %d" % (label, rank), inp, name, device)
    if trace is None:
        return
    oracle = to_int(stats(truth).get("reserved_bytes.all.peak"))
    c10 = trace.replay(lambda e: is_c10_device(e) and e.device == device)
    table.add("%s: rank %d caching-allocator peak (device %d)" % (label, rank, device),
              "reserved_bytes.all.peak = %s" % fmt_bytes(oracle), fmt_bytes(c10["peak"]), "==",
              verdict(oracle is not None and oracle > 0 and c10["peak"] == oracle),
              [unresolved(trace.allocs(lambda e: e.kind == "device")),
               "header rank %s local_rank %s world_size %s; truth pid %s, trace pid %s" % (
                   field(trace.summary, "rank"), field(trace.summary, "local_rank"),
                   field(trace.summary, "world_size"), truth.get("pid"), trace.pid),
               "all_reduce: %s; nccl %s" % (truth.get("all_reduce"), truth.get("nccl_version")),
               "devices with events: %s" % sorted(set(e.device for e in trace.allocs()))])
    owners = trace.summary.get("owners") or []
    nccl = [o for o in owners if o.get("owner") == "nccl"]
    table.add("%s: rank %d owner nccl" % (label, rank), "NCCL allocates its buffers", 
              "; ".join("dev %s %s %s" % (o.get("device"), o.get("owner"), fmt_bytes(to_int(o.get("bytes_allocated"))))
                        for o in owners[:8]) or "no owners", "nccl present", verdict(bool(nccl)),
              ["owners: %s" % json.dumps(owners)[:1500]])


# ----------------------------------------------------------------------------------------------------------------
# 5: CUPTI


def check_profiler(table, inp):
    label = "5a torch.profiler beside the preload"
    exit_row(table, label, inp, "profiler_plain", "profiler_traced")
    plain = inp.json("profiler_plain_truth.json").get("profiler") or {}
    truth = inp.json("profiler_truth.json").get("profiler") or {}
    n_plain, n = to_int(plain.get("cuda_device_events")), to_int(truth.get("cuda_device_events"))
    det = ["untraced by name: %s" % plain.get("by_name"), "traced by name: %s" % truth.get("by_name"),
           "warnings traced: %s" % truth.get("warnings")]
    table.add("%s: CUDA device events recorded" % label, "> 0", n, ">", verdict(n is not None and n > 0), det)
    table.add("%s: CUDA device events, traced vs untraced" % label, "untraced %s" % n_plain, n, "==",
              verdict(n is not None and n == n_plain))
    traced(table, label, inp, "profiler")


def check_cupti(table, inp):
    for name, what in (("cupti_torch", "PyTorch training step"), ("cupti_cupy", "CuPy")):
        guarded(table, "5b CUPTI, %s" % what, check_cupti_one, table, inp, name, "5b CUPTI, %s" % what)


def check_cupti_one(table, inp, name, label):
    exit_row(table, label, inp, None, "%s_traced" % name)
    trace = traced(table, label, inp, name)
    if trace is None:
        return
    out = inp.text("%s_traced.out" % name)
    lines = [ln for ln in out.splitlines() if "cumemtrace: CUPTI" in ln or "CUPTI" in ln][:10]
    enabled = field(trace.summary, "cupti_enabled")
    table.add("%s: header cupti_enabled" % label, "true (CUMEMTRACE_CUPTI=1)", enabled, "==",
              verdict(enabled is True), ["CUPTI lines in the output: %s" % lines] + (
                  ["the summary JSON has no cupti_enabled (looked in health, process, header, trailer, top level)"]
                  if enabled is None else []))
    n = to_int(field(trace.summary, "cupti_only_events"))
    only = [e for e in trace.raw_events if isinstance(e, dict) and e.get("cupti_only")]
    apis = collections.Counter(str(e.get("api")) for e in only)
    table.add("%s: trailer cupti_only_events" % label, "0 (interposition saw every call CUPTI saw)", n,
              "== 0", verdict(n == 0), ["CUPTI-only events by api: %s" % dict(apis)] +
              ["  seq %s %s %s %s B on %r" % (e.get("seq"), e.get("api"), e.get("kind"), e.get("size"),
                                             e.get("thread_name")) for e in only[:10]])


# ----------------------------------------------------------------------------------------------------------------
# 2: CUDA graphs and torch.compile


def check_graphs_compile(table, inp):
    label = "2 CUDA graphs + torch.compile"
    exit_row(table, label, inp, "graphs_compile_plain", "graphs_compile_traced")
    truth = inp.json("graphs_compile_truth.json")
    trace = traced(table, label, inp, "graphs_compile")
    if trace is None:
        return
    ok_time, why = times_ok(trace, truth)
    phases = truth.get("phases") or {}
    devs = trace.allocs(lambda e: e.kind == "device")
    c10 = trace.allocs(is_c10_device)
    common = [unresolved(devs), "c10 allocations %d, %s; sizes %s" % (
        len(c10), fmt_bytes(sum(e.size for e in c10)), sorted(collections.Counter(e.size for e in c10).items())),
        "memory_stats at the end: reserved peak %s, segments %s" % (
            stats(truth).get("reserved_bytes.all.peak"), stats(truth).get("segment.all.allocated"))]
    if not ok_time:
        whole = trace.replay(is_c10_device)
        oracle = to_int(stats(truth).get("reserved_bytes.all.peak"))
        table.add("%s: caching-allocator peak" % label, "reserved_bytes.all.peak (compile phase) = %s" %
                  fmt_bytes(oracle), fmt_bytes(whole["peak"]), "per-phase windows need event times on the "
                  "workload's clock", "SKIP", [why] + common)
        return
    g = phases.get("graphs") or {}
    g_end = g.get("end") or {}
    at_end = trace.replay(is_c10_device, until_ns=to_int(g_end.get("mono_ns")))
    oracle = to_int((g_end.get("stats") or {}).get("reserved_bytes.all.peak"))
    table.add("%s: graphs phase, caching-allocator peak" % label, "reserved_bytes.all.peak = %s" % fmt_bytes(oracle),
              fmt_bytes(at_end["peak"]), "==", verdict(oracle is not None and oracle > 0 and at_end["peak"] == oracle),
              ["replay vs eager max |diff| %s" % g.get("graph_vs_eager_max_abs_diff")] + common)
    c = phases.get("compile") or {}
    t0, t1 = to_int((c.get("start") or {}).get("mono_ns")), to_int((c.get("end") or {}).get("mono_ns"))
    oracle = to_int(((c.get("end") or {}).get("stats") or {}).get("reserved_bytes.all.peak"))
    if t0 is None or t1 is None:
        raise Missing("graphs_compile_truth.json has no compile phase times")
    level, peak, _ = trace.window(is_c10_device, t0, t1)
    table.add("%s: compile phase, caching-allocator peak" % label,
              "reserved_bytes.all.peak since reset = %s" % fmt_bytes(oracle), fmt_bytes(peak), "==",
              verdict(oracle is not None and oracle > 0 and peak == oracle),
              ["live at the phase start %s; compile %.1f s; losses %s" % (fmt_bytes(level), c.get("seconds") or 0,
                                                                           c.get("losses"))])
    bad, lines = [], []
    for point in (g.get("start"), g_end, c.get("start"), c.get("end")):
        if not isinstance(point, dict) or "memory_reserved" not in point:
            continue
        live = trace.replay(is_c10_device, until_ns=to_int(point.get("mono_ns")))["current"]
        lines.append("%-14s memory_reserved %s, c10 live %s" % (point.get("label"), point.get("memory_reserved"), live))
        if live != to_int(point.get("memory_reserved")):
            bad.append(point.get("label"))
    table.add("%s: caching-allocator live bytes at the phase boundaries" % label,
              "memory_reserved() at %d points" % len(lines), "%d of %d equal" % (len(lines) - len(bad), len(lines)),
              "== at every point", verdict(bool(lines) and not bad), lines)


# ----------------------------------------------------------------------------------------------------------------
# 7d: cost per event


def check_cost(table, inp):
    label = "7d cost per event"
    runs = (("cost_plain", "untraced"), ("cost_nopy", "traced, CUMEMTRACE_PYTHON=0"),
            ("cost_py", "traced, Python frames on"))
    truths = {}
    for name, what in runs:
        t = inp.json_or_none("%s_truth.json" % name)
        if t is None:
            table.add("%s: %s" % (label, what), "-", "-", "input missing", "MISSING", ["%s_truth.json" % name])
            continue
        truths[name] = t
    base = truths.get("cost_plain")
    for name, what in runs:
        t = truths.get(name)
        if t is None:
            continue
        us = (t.get("ns_per_event") or 0) / 1000.0
        cell = "%.2f µs/event (%s iterations, %.3f s)" % (us, t.get("n"), (t.get("elapsed_ns") or 0) / 1e9)
        det = []
        if base is not None and name != "cost_plain":
            extra = us - (base.get("ns_per_event") or 0) / 1000.0
            cell += "; +%.2f µs/event over untraced" % extra
            det.append("untraced %.2f µs/event" % ((base.get("ns_per_event") or 0) / 1000.0))
        table.add("%s: %s" % (label, what), "-", cell, "measured", "INFO", det)
        if name != "cost_plain":
            trace = traced(table, "%s: %s" % (label, what), inp, name)
            if trace is not None:
                want = 2 * (to_int(t.get("n"), 0) + to_int(t.get("warmup"), 0))
                got = sum(1 for e in trace.events if e.kind in ("device", ""))
                table.add("%s: %s, events recorded" % (label, what), ">= %d (2 per iteration)" % want, got, ">=",
                          verdict(got >= want), ["header python_frames_enabled: %s" % field(
                              trace.summary, "python_frames_enabled")])


# ----------------------------------------------------------------------------------------------------------------


CHECKS = {
    "driver_api": (check_driver_api, "3a driver API"),
    "leaky_shared": (check_leaky_shared, "3b leaky (cudart shared)"),
    "pinned_register": (check_pinned_register, "1 pinned cudaHostRegister"),
    "story_oom": (check_story_oom, "7a validation OOM"),
    "story_leak": (check_story_leak, "7c slow leak"),
    "dataloader": (check_dataloader_rows, "7b pinned spike, 6 follow-fork"),
    "ddp": (check_ddp, "4 DDP 2 ranks"),
    "profiler": (check_profiler, "5a torch.profiler beside the preload"),
    "cupti": (check_cupti, "5b CUPTI"),
    "graphs_compile": (check_graphs_compile, "2 CUDA graphs + torch.compile"),
    "cost": (check_cost, "7d cost per event"),
}


def header_lines(inp):
    lines = ["# cumemtrace GPU rows (coverage and Python-stack stories)"]
    facts = []
    for name in sorted(glob.glob(os.path.join(inp.dir, "*truth*.json"))):
        t = inp.json_or_none(os.path.basename(name)) or {}
        for key in ("torch_version", "torch_cuda_version", "device_name", "device_count", "triton_version",
                    "nccl_version"):
            value = t.get(key)
            if value not in (None, "") and not isinstance(value, dict) and (key, value) not in facts:
                facts.append((key, value))
    facts.append(("GPUs listed by nvidia-smi", inp.gpus()))
    lines.append("")
    lines.append(", ".join("%s %s" % kv for kv in facts))
    lines.extend(gpu_common.exit_code_lines(inp.rcs))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, help="directory with the outputs of scripts/gpu-rows.sh")
    parser.add_argument("--md", help="write the table and its details as markdown here")
    parser.add_argument("--only", nargs="*", choices=ROWS, help="check only these rows")
    parser.add_argument("--print", dest="print_what", choices=("table", "all"), default="all",
                        help="what to print on stdout (the --md file always has everything)")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.dir):
        print("check.py: %s is not a directory" % args.dir, file=sys.stderr)
        return 2
    inp = Inputs(args.dir)
    table = Table()
    for row in args.only or ROWS:
        fn, label = CHECKS[row]
        guarded(table, label, fn, table, inp)
    header = header_lines(inp)
    if args.md:
        with open(args.md, "w") as f:
            f.write(table.markdown(header))
    sys.stdout.write(table.markdown(header, with_details=args.print_what == "all"))
    return 1 if table.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
