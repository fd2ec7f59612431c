"""Reads what `cumem-analyze --json` says about a trace into events with resolved stacks, and replays them.

Why this exists: the GPU suite's relations compare the framework's own counters with what the trace holds, so they
need the trace's events (not only the analyzer's reports) replayed independently: the analyzer's reports are then
checked too. `events --json` carries stack ids only; their frames come from the same trace's other reports (a
`summary --group-by stack --top 100000` lists the stack of everything live at a peak, at the end or at a failure).

Events pair by address within one address space: plain allocations (device, managed, pool, pinned_host,
registered_host), VMM physical handles (cuMemCreate/cuMemRelease; the address is the handle), VMM mappings
(cuMemMap/cuMemUnmap) and address reservations (cuMemAddressReserve/cuMemAddressFree). Event times are made
absolute (process.start_time_ns + time_ns: CLOCK_MONOTONIC, the clock of the workloads' time.monotonic_ns()).

Only the standard library.
"""
import collections
import os
import re

MiB = 1 << 20
C10_CUDA = "libc10_cuda.so"
TORCH_CUDA = "libtorch_cuda.so"
DEVICE_SIDE_KINDS = ("device", "pool", "managed", "vmm_physical")  # memory on the GPU, each byte counted once
MEMORY_KINDS = ("device", "pinned_host", "registered_host", "managed", "pool", "vmm_physical")
# Frames that do not own an allocation: the tool, the driver, the runtime, libc.
PLUMBING_MODULES = ("libcumemtrace", "libcuda.so", "libcudart", "libc.so", "ld-linux", "libpthread")
KIND_SPACE = {"vmm_physical": "handle", "vmm_mapped": "mapping", "address_reserve": "reserve"}
API_SPACE = {"cumemcreate": "handle", "cumemrelease": "handle", "cumemmap": "mapping", "cumemunmap": "mapping",
             "cumemaddressreserve": "reserve", "cumemaddressfree": "reserve"}


def to_int(value, default=None):
    if value is None:
        return default
    if isinstance(value, (bool, int)):
        return int(value)
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip().replace(",", ""), 0)
        except ValueError:
            return default
    return default


def fmt_bytes(n):
    return "n/a" if n is None else "%d (%.2f MiB)" % (n, n / float(MiB))


def norm_api(api):
    return re.sub(r"_v\d+$", "", str(api or "").strip()).lower()


class Frame(object):
    __slots__ = ("function", "module", "file", "line", "kind")

    def __init__(self, raw):
        raw = raw if isinstance(raw, dict) else {"function": raw}
        self.function = str(raw.get("function") or "")
        self.module = str(raw.get("module") or "")
        self.file = raw.get("file")
        self.line = raw.get("line")
        self.kind = str(raw.get("kind") or "")

    def is_python(self):
        return self.kind == "python" or (not self.kind and str(self.file or "").endswith(".py"))

    def short(self):
        if self.is_python():
            return "%s [%s:%s]" % (self.function or "?", os.path.basename(str(self.file or "?")), self.line)
        return "%s [%s]" % (self.function or "?", os.path.basename(self.module) or "?")


def norm_stack(raw):
    if isinstance(raw, dict):
        raw = raw.get("frames", raw.get("stack"))
    return [Frame(f) for f in raw] if isinstance(raw, list) else None


def collect_stacks(doc, table):
    """Adds every {"stack_id": N, "stack": [frames]} anywhere in a report to table (id -> frames)."""
    if isinstance(doc, dict):
        sid = doc.get("stack_id")
        if sid is not None and isinstance(doc.get("stack"), list) and str(sid) not in table:
            table[str(sid)] = norm_stack(doc["stack"])
        values = doc.values()
    elif isinstance(doc, list):
        values = doc
    else:
        return table
    for value in values:
        if isinstance(value, (dict, list)):
            collect_stacks(value, table)
    return table


def has_module(stack, fragment):
    return bool(stack) and any(fragment in f.module for f in stack)


def has_function(stack, fragment):
    return bool(stack) and any(fragment in f.function for f in stack)


def python_frames(stack):
    return [f for f in stack or [] if f.is_python()]


def script_frame(stack, basename):
    """The innermost Python frame of the script named basename."""
    for f in stack or []:
        if f.is_python() and os.path.basename(str(f.file or "")) == basename:
            return f
    return None


def owner_module(stack):
    """The innermost frame outside the tool, the driver, the runtime and libc: who asked."""
    if not stack:
        return "<no stack>"
    for f in stack:
        base = os.path.basename(f.module)
        if base and not any(p in base for p in PLUMBING_MODULES):
            return base
    return "<plumbing only>"


def stack_summary(stack, limit=6):
    if not stack:
        return "<no stack>"
    return " <- ".join(f.short() for f in stack[:limit]) + (" <- ..." if len(stack) > limit else "")


class Event(object):
    __slots__ = ("seq", "time", "op", "api", "kind", "device", "addr", "size", "ok", "result", "thread",
                 "thread_name", "stack", "space", "cupti_only")

    def __init__(self, raw, stacks, time_base):
        self.seq = to_int(raw.get("seq"), 0)
        self.time = to_int(raw.get("time_ns"), 0) + time_base
        self.api = str(raw.get("api") or "")
        self.kind = str(raw.get("kind") or "")
        self.device = to_int(raw.get("device"), 0)
        self.addr = to_int(raw.get("address"), 0)
        self.size = to_int(raw.get("size"), 0) or 0
        self.result = raw.get("result", 0)
        self.ok = self.result in (None, 0, "0", "CUDA_SUCCESS")
        self.thread = raw.get("thread")
        self.thread_name = str(raw.get("thread_name") or "")
        self.op = str(raw.get("op") or "").lower()
        self.stack = stacks.get(str(raw.get("stack_id")))
        # PyTorch's block and segment events (torch.*) describe memory the driver events counted: a space of their
        # own, never paired with a driver allocation at the same address (a segment's first block has its address).
        self.space = ("torch" if str(self.api).startswith("torch.") else
                      KIND_SPACE.get(self.kind) or API_SPACE.get(norm_api(self.api)) or "alloc")
        self.cupti_only = bool(raw.get("cupti_only"))


class Trace(object):
    """The events of one trace (from `events --json`), with stacks from the same trace's other reports."""

    def __init__(self, events_doc, reports=()):
        raw = events_doc.get("events") if isinstance(events_doc, dict) else None
        if not isinstance(raw, list):
            raise ValueError("the events JSON has no list 'events'")
        stacks = {}
        for report in reports:
            collect_stacks(report, stacks)
        self.stacks_known = len(stacks)
        self.process = events_doc.get("process") or {}
        self.health = events_doc.get("health") or {}
        self.pid = self.process.get("pid")
        self.time_base = to_int(self.process.get("start_time_ns"), 0) or 0
        self.events = sorted((Event(e, stacks, self.time_base) for e in raw if isinstance(e, dict)),
                             key=lambda e: (e.seq, e.time))

    def allocs(self, want=lambda e: True):
        return [e for e in self.events if e.op == "alloc" and e.ok and want(e)]

    def replay(self, want, until_ns=None):
        """Replays allocations and frees in sequence order; `want` picks the allocations counted. Frees pair with
        the live allocation of the same space and address whatever `want` says. With until_ns only events at or
        before that time count. Returns peak, current (live at the end), live (those allocations), stale
        (allocations over a live one) and unmatched (frees of a nonzero address that found nothing live)."""
        live = {}
        current = peak = stale = 0
        unmatched = []
        for e in self.events:
            if until_ns is not None and e.time > until_ns:
                continue
            if not e.ok or e.op not in ("alloc", "free"):
                continue
            key = (e.space, e.addr)
            if e.op == "alloc":
                old = live.get(key)
                if old is not None:
                    stale += 1
                    if old[1]:
                        current -= old[0].size
                counted = bool(want(e))
                live[key] = (e, counted)
                if counted:
                    current += e.size
                    peak = max(peak, current)
            else:
                old = live.pop(key, None)
                if old is None:
                    if e.addr != 0:
                        unmatched.append(e)
                elif old[1]:
                    current -= old[0].size
        return {"peak": peak, "current": current, "live": [e for e, counted in live.values() if counted],
                "stale": stale, "unmatched": unmatched}

    def window(self, want, t0, t1):
        """(live at t0, peak over [t0, t1] counting from that level, live at t1) of the allocations `want` picks."""
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

    def times_comparable(self, truth):
        """(True, why) when event times and the workload's time.monotonic_ns() are one clock."""
        t0 = to_int((truth or {}).get("t0_mono_ns"))
        t_end = to_int((truth or {}).get("truth_written_mono_ns"))
        times = [e.time for e in self.events]
        if not self.time_base:
            return False, "the events JSON has no process.start_time_ns"
        if not t0 or not t_end or not times:
            return False, "no workload times or no events"
        if min(times) < t0 - 10 * 10**9 or max(times) > t_end + 300 * 10**9:
            return False, "event times %d..%d are outside the workload's run %d..%d" % (min(times), max(times), t0,
                                                                                        t_end)
        return True, "event times lie within the workload's run"


def api_counts(events):
    return dict(collections.Counter(e.api for e in events))


def is_c10_device(e):
    return e.kind == "device" and has_module(e.stack, C10_CUDA)


def is_torch_pinned(e):
    return e.kind == "pinned_host" and (has_module(e.stack, TORCH_CUDA) or has_module(e.stack, C10_CUDA))


def host_stats_key(hs):
    """Which host_memory_stats key counts the bytes PyTorch's CachingHostAllocator got from CUDA (cached + in use):
    newer layouts (active_* keys) count owned blocks in allocated_bytes; older ones in reserved_bytes."""
    if "active_bytes.peak" in hs or "active_requests.peak" in hs:
        return "allocated_bytes.peak"
    if "reserved_bytes.peak" in hs:
        return "reserved_bytes.peak"
    return "allocated_bytes.peak"


# compute-sanitizer's and leaky.cu's printed lines.
LEAK_RE = re.compile(r"Leaked\s+([\d,]+)\s+bytes\s+at\s+(0x[0-9a-fA-F]+)(.*)$")
LEAK_SUMMARY_RE = re.compile(r"LEAK SUMMARY:\s*([\d,]+)\s+bytes leaked in\s+([\d,]+)\s+allocations")
PLANTED_RE = re.compile(r"^PLANTED\s+(\w+)\s+(\d+)\s+(0x[0-9a-fA-F]+)\s*$")
LEDGER_ALLOC = re.compile(r"^LEDGER alloc (\w+) (\w+) (-?\d+) (\d+) (0x[0-9a-fA-F]+|0)\s*$")
LEDGER_FREE = re.compile(r"^LEDGER free (\w+) (0x[0-9a-fA-F]+|0)\s*$")


def parse_sanitizer(text):
    """([(bytes, address)], (bytes, count) or None) from compute-sanitizer --leak-check full."""
    leaks, summary = [], None
    for line in text.splitlines():
        m = LEAK_RE.search(line)
        if m and "device heap" not in m.group(3):
            leaks.append((int(m.group(1).replace(",", "")), int(m.group(2), 16)))
        m = LEAK_SUMMARY_RE.search(line)
        if m:
            summary = (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")))
    return leaks, summary


def parse_planted(text):
    """[(function, size, address)] of leaky.cu's / driver_api.cu's PLANTED lines."""
    out = []
    for line in text.splitlines():
        m = PLANTED_RE.match(line.strip())
        if m:
            out.append((m.group(1), int(m.group(2)), int(m.group(3), 16)))
    return out


def parse_ledger(text):
    """driver_api.cu's LEDGER lines: ([(api, kind, device, size, address)], [(api, address)])."""
    allocs, frees = [], []
    for line in text.splitlines():
        m = LEDGER_ALLOC.match(line.strip())
        if m:
            allocs.append((m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5), 16)))
            continue
        m = LEDGER_FREE.match(line.strip())
        if m:
            frees.append((m.group(1), int(m.group(2), 16)))
    return allocs, frees


def same_checksum(a, b):
    """The DataLoader workloads' checksum, index sum and batch count agree."""
    x, y = a.get("checksum"), b.get("checksum")
    if not isinstance(x, (int, float)) or not isinstance(y, (int, float)):
        return False
    close = x == y or abs(x - y) <= 1e-12 * max(abs(x), abs(y))
    return close and a.get("index_sum") == b.get("index_sum") and a.get("batches") == b.get("batches")
