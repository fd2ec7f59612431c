#!/usr/bin/env python3
"""Checks the PyTorch block layer of a trace against PyTorch's own figures (tolerance zero).

Inputs: the workload's truth JSON (allocator_common checkpoints) and `cumem-analyze events TRACE --json` of the
traced run. For each checkpoint, the TORCH_* events before its marker (a driver allocation of marker_size bytes)
are replayed with PyTorch's own accounting:
  allocation.all.current       = blocks allocated and not yet FREE_REQUESTED (the count drops at the request)
  requested_bytes.all.current  = requested bytes of blocks not yet FREE_COMPLETED (they drop at completion)
  requested_bytes.all.peak     = the largest value of the line above so far
  reserved_bytes.all.current   = segment bytes (SEGMENT_ALLOC/MAP minus SEGMENT_FREE/UNMAP); .peak its maximum
  active blocks of _snapshot() = the set of (address, requested size) allocated and not FREE_REQUESTED
For frag_oom: reserved - requested at the TORCH_OOM event = PyTorch's reserved - allocated after the failure (every
block of that workload is a multiple of 512 B and split, so allocated = requested there).

Usage: check_blocks.py TRUTH_JSON EVENTS_JSON LABEL. Prints one PASS/FAIL line per relation; exit 1 on a FAIL.
"""
import json
import sys


def replay(events, upto_seq):
    live = {}            # address -> requested size (allocated, not FREE_REQUESTED)
    pending = {}         # address -> requested size (not FREE_COMPLETED)
    segments = {}        # address -> size
    requested = requested_peak = reserved = reserved_peak = 0
    oom = None
    for e in events:
        if e["seq"] >= upto_seq:
            break
        api = e["api"]
        if not api.startswith("torch."):
            continue
        addr = int(e["address"], 16)
        if api == "torch.alloc":
            live[addr] = e["size"]
            pending[addr] = e["size"]
            requested += e["size"]
            requested_peak = max(requested_peak, requested)
        elif api == "torch.free_requested":
            live.pop(addr, None)
        elif api == "torch.free_completed":
            requested -= pending.pop(addr, 0)
        elif api == "torch.free":  # requested and completed at once
            live.pop(addr, None)
            requested -= pending.pop(addr, 0)
        elif api in ("torch.segment_alloc", "torch.segment_map"):
            segments[addr] = segments.get(addr, 0) + e["size"]
            reserved += e["size"]
            reserved_peak = max(reserved_peak, reserved)
        elif api in ("torch.segment_free", "torch.segment_unmap"):
            reserved -= e["size"]
            segments.pop(addr, None)
        elif api == "torch.oom" and oom is None:
            oom = {"request": e["size"], "reserved": reserved, "requested": requested}
    return {"live": live, "requested": requested, "requested_peak": requested_peak, "reserved": reserved,
            "reserved_peak": reserved_peak, "oom": oom}


def main():
    truth = json.load(open(sys.argv[1]))
    events = sorted(json.load(open(sys.argv[2]))["events"], key=lambda e: e["seq"])
    label = sys.argv[3]
    failures = 0

    def row(name, oracle, measured):
        nonlocal failures
        ok = oracle == measured
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'} {label} {name}: PyTorch {oracle} / trace {measured}")

    torch_events = sum(1 for e in events if e["api"].startswith("torch."))
    row("block events present", True, torch_events > 0)
    for cp in truth["checkpoints"]:
        marks = [e["seq"] for e in events if e["api"] in ("cuMemAlloc", "cudaMalloc") and e["size"] == cp["marker_size"]]
        if len(marks) != 1:
            row(f"{cp['name']} marker found once", 1, len(marks))
            continue
        r = replay(events, marks[0])
        s = cp["stats"]
        n = cp["name"]
        row(f"{n} allocation.all.current", s["allocation.all.current"], len(r["live"]))
        row(f"{n} requested_bytes.all.current", s["requested_bytes.all.current"], r["requested"])
        row(f"{n} requested_bytes.all.peak", s["requested_bytes.all.peak"], r["requested_peak"])
        row(f"{n} reserved_bytes.all.current", s["reserved_bytes.all.current"], r["reserved"])
        row(f"{n} reserved_bytes.all.peak", s["reserved_bytes.all.peak"], r["reserved_peak"])
        snapshot = sorted([a, size] for a, size in cp["active_blocks"])
        trace = sorted([a, size] for a, size in r["live"].items())
        row(f"{n} live blocks == _snapshot() active blocks ({len(snapshot)})", True, snapshot == trace)
    if truth.get("workload") == "frag_oom":
        r = replay(events, float("inf"))
        if r["oom"] is None:
            row("torch.oom event", True, False)
        else:
            row("OOM request", truth["request"], r["oom"]["request"])
            row("OOM reserved - allocated", truth["reserved_minus_allocated_at_oom"],
                r["oom"]["reserved"] - r["oom"]["requested"])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
