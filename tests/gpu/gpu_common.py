"""What tests/gpu/compare.py and tests/gpu/coverage/check.py share: reading the analyzer's JSON, resolving stacks,
replaying the events by address space, and the verdict table.

Each script keeps what is its own (how an event's operation and address space are told, which reports resolve
stacks and in what order, the table's first column, how a check that raises is reported) and passes it in.

Only the standard library; Python 3.8+.
"""
import collections
import json
import os

MiB = 1 << 20


# ----------------------------------------------------------------------------------------------------------------
# Reading inputs


class Missing(Exception):
    """An input file is absent, empty or not JSON: the row says MISSING."""


def load_json(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        raise Missing("%s is missing" % name)
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if not text.strip():
        raise Missing("%s is empty" % name)
    try:
        return json.loads(text)
    except ValueError as e:
        raise Missing("%s is not JSON (%s): %r" % (name, e, text[:200]))


def load_pairs(directory, name, convert):
    """`NAME VALUE` lines (rc.txt, times.txt) as a dict; lines that do not parse are left out, a missing file is {}."""
    out = {}
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                try:
                    out[parts[0]] = convert(parts[1])
                except ValueError:
                    pass
    return out


def load_reports(directory, trace_name, whats):
    """[(what, doc)] for the trace's `<trace_name>_<what>.json` reports that load, in the order of whats."""
    out = []
    for what in whats:
        try:
            out.append((what, load_json(directory, "%s_%s.json" % (trace_name, what))))
        except Missing:
            pass
    return out


def to_int(value, default=None):
    if value is None:
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        s = value.strip().replace(",", "")
        try:
            return int(s, 0)
        except ValueError:
            try:
                return int(float(s))
            except ValueError:
                return default
    return default


def result_ok(result):
    if result is None:
        return True
    if isinstance(result, bool):
        return result
    if isinstance(result, (int, float)):
        return result == 0
    s = str(result).strip()
    return s in ("", "0") or s.upper() in ("CUDA_SUCCESS", "CUDASUCCESS", "SUCCESS", "OK")


# ----------------------------------------------------------------------------------------------------------------
# Stacks


class Frame(object):
    __slots__ = ("function", "module", "file", "line")

    def __init__(self, raw):
        if isinstance(raw, dict):
            self.function = str(raw.get("function") or "")
            self.module = str(raw.get("module") or "")
            self.file = raw.get("file")
            self.line = raw.get("line")
        else:
            self.function = str(raw or "")
            self.module = ""
            self.file = None
            self.line = None

    def short(self):
        return "%s [%s]" % (self.function or "?", os.path.basename(self.module) or "?")


def norm_stack(raw, frame_class=Frame):
    """A stack as the analyzer writes it (a list of frames, or {"frames": [...]}) as frame_class objects; else None."""
    if isinstance(raw, dict):
        raw = raw.get("frames", raw.get("stack"))
    if not isinstance(raw, list):
        return None
    return [frame_class(f) for f in raw]


def collect_stacks(doc, table, frame_class=Frame):
    """Adds every {"stack_id": N, "stack": [frames]} found anywhere in a report to table (id -> frames).

    The analyzer's `events --json` gives only stack ids; its other reports (peak groups, leaks, OOMs, pinned spikes)
    give the frames of the stacks they show. Run with a large --top, they cover every allocation that was live at
    some kind's peak or at the end. The first report to show a stack id wins."""
    if isinstance(doc, dict):
        sid = doc.get("stack_id")
        if sid is not None and isinstance(doc.get("stack"), list) and str(sid) not in table:
            st = norm_stack(doc["stack"], frame_class)
            if st:
                table[str(sid)] = st
        for value in doc.values():
            if isinstance(value, (dict, list)):
                collect_stacks(value, table, frame_class)
    elif isinstance(doc, list):
        for value in doc:
            if isinstance(value, (dict, list)):
                collect_stacks(value, table, frame_class)
    return table


def has_module(stack, fragment):
    return bool(stack) and any(fragment in f.module for f in stack)


def owner_module(stack, plumbing, fallback_to_last=False):
    """The innermost frame whose module is not plumbing (the tool, the driver, the runtime, libc): who asked.

    Where every frame is plumbing: the outermost frame's module with fallback_to_last, else "<plumbing only>"."""
    if not stack:
        return "<no stack>"
    for f in stack:
        base = os.path.basename(f.module)
        if base and not any(p in base for p in plumbing):
            return base
    if fallback_to_last:
        return os.path.basename(stack[-1].module) or "<plumbing only>"
    return "<plumbing only>"


def stack_summary(stack, limit=6):
    if not stack:
        return "<no stack>"
    return " <- ".join(f.short() for f in stack[:limit]) + (" <- ..." if len(stack) > limit else "")


# ----------------------------------------------------------------------------------------------------------------
# Events


class BaseEvent(object):
    """The fields every event has, read the same way by both scripts; subclasses add op, time, stack and space."""
    __slots__ = ("seq", "time", "op", "api", "kind", "device", "addr", "size", "ok", "result", "thread",
                 "thread_name", "stack", "space")

    def __init__(self, raw):
        self.seq = to_int(raw.get("seq"), 0)
        self.time = to_int(raw.get("time_ns"), 0)
        self.api = str(raw.get("api") or "")
        self.kind = str(raw.get("kind") or "")
        self.device = to_int(raw.get("device"), 0)
        self.addr = to_int(raw.get("address"), 0)
        self.size = to_int(raw.get("size"), 0) or 0
        self.result = raw.get("result", 0)
        self.ok = result_ok(self.result)
        self.thread = raw.get("thread")
        self.thread_name = str(raw.get("thread_name") or "")


class BaseTrace(object):
    """self.events (sorted by seq, then time) and the replay over them. REPLAY_STOPS_AT_CUT: with until_ns, the
    replay stops at the first later event (True) or only leaves the later events out (False)."""
    REPLAY_STOPS_AT_CUT = False

    def allocs(self, pred=lambda e: True):
        return [e for e in self.events if e.op == "alloc" and e.ok and pred(e)]

    def replay(self, want, until_ns=None):
        """Replays allocations and frees in sequence order; `want` picks the allocations counted.

        Frees pair with the live allocation of the same space and address whatever `want` says; other ops and
        failed calls are ignored. With until_ns, only events at or before that (absolute) time count. Returns the
        peak bytes, the event that made it, the bytes live at the end, those allocations, how many allocations
        replaced a live one at the same key, and the frees that found nothing live (address 0 left out)."""
        live = {}
        current = peak = 0
        peak_event = None
        stale = 0
        unmatched = []
        for e in self.events:
            if until_ns is not None and e.time > until_ns:
                if self.REPLAY_STOPS_AT_CUT:
                    break
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
                    if current > peak:
                        peak = current
                        peak_event = e
            else:
                old = live.pop(key, None)
                if old is None:
                    if e.addr != 0:
                        unmatched.append(e)
                elif old[1]:
                    current -= old[0].size
        return {"peak": peak, "peak_event": peak_event, "current": current,
                "live": [ev for ev, counted in live.values() if counted], "stale": stale, "unmatched": unmatched}


# ----------------------------------------------------------------------------------------------------------------
# The table


class Table(object):
    """Rows `FIRST | oracle | cumemtrace | relation | result` and, per row that has them, detail lines."""
    FIRST_COLUMN = "check"

    def __init__(self):
        self.rows = []
        self.details = []

    def add(self, check, oracle, ours, relation, status, details=None):
        self.rows.append((check, str(oracle), str(ours), relation, status))
        if details:
            self.details.append((check, details))

    def failed(self):
        return [r for r in self.rows if r[4] in ("FAIL", "ERROR", "MISSING")]

    def markdown(self, header_lines=(), with_details=True):
        out = list(header_lines)
        if header_lines:
            out.append("")
        out.append("| %s | oracle | cumemtrace | relation | result |" % self.FIRST_COLUMN)
        out.append("|---|---|---|---|---|")
        for row in self.rows:
            out.append("| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |")
        counts = collections.Counter(r[4] for r in self.rows)
        out.append("")
        out.append("%d PASS, %d FAIL, %d ERROR, %d MISSING, %d INFO, %d SKIP" % (
            counts["PASS"], counts["FAIL"], counts["ERROR"], counts["MISSING"], counts["INFO"], counts["SKIP"]))
        if with_details and self.details:
            out.append("")
            out.append("## Details")
            for check, lines in self.details:
                out.append("")
                out.append("### " + check)
                out.append("```")
                out.extend(str(line) for line in lines)
                out.append("```")
        return "\n".join(out) + "\n"


def fmt_bytes(n):
    if n is None:
        return "n/a"
    return "%d (%.2f MiB)" % (n, n / float(MiB))


def verdict(ok):
    return "PASS" if ok else "FAIL"


def exit_code_lines(rcs):
    """The header's exit-code line (after a blank one) for {step: rc}; nothing without exit codes."""
    if not rcs:
        return []
    return ["", "exit codes: " + ", ".join("%s=%s" % kv for kv in sorted(rcs.items()))]
