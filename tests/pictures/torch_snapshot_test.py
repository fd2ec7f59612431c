"""`cumem-analyze torch-snapshot` on the real GPU traces in examples/ (PyTorch's caching-allocator layer captured),
read back with Python's pickle module (no torch needed) and checked three ways:

1. the shape PyTorch's readers rely on: the documented keys; blocks that tile each segment exactly (the invariant
   `python -m torch.cuda._memory_viz stats` asserts); the JSON holding the same dictionary; memory_viz's "Allocator
   State History" replay (backwards from the segments over device_traces) never missing a block or a segment;
2. against the trace's own torch.* events (`cumem-analyze events --json`, not this exporter's code): one entry per
   event in order (a torch.free row gives two), the blocks live at the end equal the active blocks, the segments'
   total equals the reserved bytes replayed;
3. against PyTorch's own figures (gpt2_blocks_h100_truth.json): at each checkpoint (the torch.* events before its
   marker allocation, as tests/gpu/test_torch_blocks.py finds it), device_traces replayed give
   requested_bytes.all.current and reserved_bytes.all.current, and the live blocks equal _snapshot()'s active blocks.

A trace without torch.* events is refused with one line and exit 2.
Usage: torch_snapshot_test.py CUMEM_ANALYZE EXAMPLES_DIR WORKDIR"""
import json
import os
import pickle
import subprocess
import sys

TRACES = ("gpt2_blocks_h100", "frag_oom_h100", "story_oom_blocks_h100", "story_leak_blocks_h100")
SEGMENT_KEYS = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
                "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
ENTRY_KEYS = {"action", "size", "stream", "time_us", "frames"}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def tuples_to_lists(v):
    if isinstance(v, (list, tuple)):
        return [tuples_to_lists(x) for x in v]
    if isinstance(v, dict):
        return {k: tuples_to_lists(x) for k, x in v.items()}
    return v


def check_shape(name, s):
    check(set(s) == {"segments", "device_traces"}, "%s: top-level keys %s" % (name, sorted(s)))
    check(isinstance(s["device_traces"], list) and all(isinstance(t, list) for t in s["device_traces"]),
          "%s: device_traces is not a list of lists" % name)
    reserved = allocated = free_internal = free_external = 0
    for seg in s["segments"]:
        check(set(seg) == SEGMENT_KEYS, "%s: segment keys %s" % (name, sorted(seg)))
        check(seg["segment_type"] in ("large", "small"), "%s: segment_type %r" % (name, seg["segment_type"]))
        addr = seg["address"]
        for b in seg["blocks"]:
            check(set(b) == BLOCK_KEYS, "%s: block keys %s" % (name, sorted(b)))
            check(b["address"] == addr and b["size"] > 0, "%s: blocks do not tile segment %#x" % (name, seg["address"]))
            check(b["state"] in ("active_allocated", "active_pending_free", "inactive"), b["state"])
            if b["state"] == "active_allocated":
                check(b["requested_size"] <= b["size"], "%s: block %#x smaller than requested" % (name, addr))
                allocated += b["requested_size"]
                free_internal += b["size"] - b["requested_size"]
            else:
                free_external += b["size"]
            addr += b["size"]
        check(addr == seg["address"] + seg["total_size"], "%s: blocks of %#x do not end at its end" % (
            name, seg["address"]))
        check(seg["allocated_size"] == sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated"),
              "%s: allocated_size" % name)
        reserved += seg["total_size"]
        for f in seg["frames"]:
            check(set(f) == {"filename", "line", "name"}, "%s: frame keys %s" % (name, sorted(f)))
    # _memory_viz.segsum's closing assertion.
    check(free_internal + free_external + allocated == reserved, "%s: segsum's totals do not add up" % name)
    for trace in s["device_traces"]:
        for e in trace:
            check(e["action"] in ACTIONS, "%s: action %r" % (name, e["action"]))
            want = ENTRY_KEYS | ({"device_free"} if e["action"] == "oom" else {"addr"})
            check(set(e) == want, "%s: entry keys %s" % (name, sorted(e)))
            for f in e["frames"]:
                check(set(f) == {"filename", "line", "name"} and isinstance(f["line"], int), "%s: frame %r" % (name, f))
    return reserved


def check_viewer_replay(name, s):
    """memory_viz's segment view walks device_traces backwards from the segments: every block it puts back must lie
    in a segment, every free_requested must find its block, every segment_alloc its segment."""
    for device, trace in enumerate(s["device_traces"]):
        segs = {seg["address"]: seg["total_size"] for seg in s["segments"] if seg["device"] == device and
                not seg["is_expandable"]}
        blocks = {b["address"] for seg in s["segments"] if seg["device"] == device for b in seg["blocks"]
                  if b["state"] != "inactive"}

        def inside(addr):
            return any(a <= addr < a + n for a, n in segs.items())
        for e in reversed(trace):
            act = e["action"]
            if act == "free_completed":
                check(inside(e["addr"]), "%s: freed block %#x outside every segment" % (name, e["addr"]))
                blocks.add(e["addr"])
            elif act == "free_requested":
                check(e["addr"] in blocks, "%s: free_requested of %#x with no block" % (name, e["addr"]))
            elif act == "alloc":
                check(e["addr"] in blocks, "%s: alloc of %#x with no block" % (name, e["addr"]))
                blocks.discard(e["addr"])
            elif act == "segment_free":
                segs[e["addr"]] = e["size"]
            elif act == "segment_alloc":
                check(e["addr"] in segs, "%s: segment_alloc of %#x with no segment" % (name, e["addr"]))
                del segs[e["addr"]]
        check(not blocks, "%s: blocks before the first event: %s" % (name, sorted(blocks)[:3]))


def torch_events(analyze, trace):
    out = subprocess.run([analyze, "events", trace, "--json"], check=True, capture_output=True).stdout
    return sorted(json.loads(out)["events"], key=lambda e: e["seq"])


def check_against_events(name, s, events):
    torch = [e for e in events if e["api"].startswith("torch.")]
    n = sum(2 if e["api"] == "torch.free" else 1 for e in torch)
    check(n == sum(len(t) for t in s["device_traces"]), "%s: %d torch.* entries expected, %d written" % (
        name, n, sum(len(t) for t in s["device_traces"])))
    live, pending, reserved = {}, set(), 0
    for e in torch:
        addr = int(e["address"], 16)
        if e["api"] == "torch.alloc":
            live[addr] = e["size"]
        elif e["api"] == "torch.free_requested":
            pending.add(addr)
        elif e["api"] in ("torch.free_completed", "torch.free"):
            live.pop(addr, None)
            pending.discard(addr)
        elif e["api"] in ("torch.segment_alloc", "torch.segment_map"):
            reserved += e["size"]
        elif e["api"] in ("torch.segment_free", "torch.segment_unmap"):
            reserved -= e["size"]
    active = {b["address"]: (b["requested_size"], b["state"]) for seg in s["segments"] for b in seg["blocks"]
              if b["state"] != "inactive"}
    expected = {a: (n, "active_pending_free" if a in pending else "active_allocated") for a, n in live.items()}
    check(active == expected, "%s: active blocks differ from the trace's live blocks" % name)
    check(reserved == sum(seg["total_size"] for seg in s["segments"]), "%s: reserved" % name)
    return len(live)


def check_checkpoints(s, events, truth):
    trace = s["device_traces"][0]
    for cp in truth["checkpoints"]:
        marks = [i for i, e in enumerate(events)
                 if e["api"] in ("cuMemAlloc", "cudaMalloc") and e["size"] == cp["marker_size"]]
        check(len(marks) == 1, "marker of %s found %d times" % (cp["name"], len(marks)))
        before = sum(2 if e["api"] == "torch.free" else 1 for e in events[:marks[0]] if e["api"].startswith("torch."))
        requested = reserved = 0
        live = {}
        for e in trace[:before]:
            act = e["action"]
            if act == "alloc":
                requested += e["size"]
                live[e["addr"]] = e["size"]
            elif act == "free_requested":
                live.pop(e["addr"], None)
            elif act == "free_completed":
                requested -= e["size"]
            elif act in ("segment_alloc", "segment_map"):
                reserved += e["size"]
            elif act in ("segment_free", "segment_unmap"):
                reserved -= e["size"]
        stats = cp["stats"]
        got = [requested, reserved, sorted(live.items())]
        want = [stats["requested_bytes.all.current"], stats["reserved_bytes.all.current"],
                sorted((a, n) for a, n in cp["active_blocks"])]
        check(got == want, "%s: requested, reserved %s from device_traces, PyTorch %s" % (cp["name"], got[:2],
                                                                                        want[:2]))
        print("ok: %s: device_traces replayed = PyTorch's requested %d, reserved %d, %d active blocks" % (
            cp["name"], requested, reserved, len(live)))


def main():
    analyze, examples, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    for name in TRACES:
        trace = os.path.join(examples, name + ".pb")
        pkl, js = os.path.join(work, name + ".pickle"), os.path.join(work, name + ".json")
        for extra, path in (([], pkl), (["--json"], js)):
            r = subprocess.run([analyze, "torch-snapshot", trace, "-o", path] + extra, capture_output=True, text=True)
            check(r.returncode == 0, "%s: exit %d: %s" % (name, r.returncode, r.stderr))
            check(r.stderr == "", "%s: stderr: %s" % (name, r.stderr))
        with open(pkl, "rb") as f:
            s = pickle.load(f)
        with open(js) as f:
            check(json.load(f) == tuples_to_lists(s), "%s: the JSON and the pickle differ" % name)
        reserved = check_shape(name, s)
        check_viewer_replay(name, s)
        events = torch_events(analyze, trace)
        live = check_against_events(name, s, events)
        print("ok: %s: %d segments (%d B), %d entries, %d live blocks at the end, pickle %d B" % (
            name, len(s["segments"]), reserved, sum(len(t) for t in s["device_traces"]), live, os.path.getsize(pkl)))
        if name == "gpt2_blocks_h100":
            with open(os.path.join(examples, name + "_truth.json")) as f:
                check_checkpoints(s, events, json.load(f))
            first = s["device_traces"][0][1]
            check(first["action"] == "alloc" and any(f["filename"].endswith(".py") for f in first["frames"]),
                  "the first alloc has no Python frame")
        if name == "frag_oom_h100":
            with open(os.path.join(examples, name + "_truth.json")) as f:
                truth = json.load(f)
            ooms = [e for e in s["device_traces"][0] if e["action"] == "oom"]
            check(len(ooms) == 1 and ooms[0]["size"] == truth["request"] and ooms[0]["device_free"] > 0 and
                  ooms[0]["frames"], "frag_oom: the oom entry %s" % ooms[:1])
            print("ok: frag_oom: oom entry of %d B with device_free and frames" % ooms[0]["size"])

    r = subprocess.run([analyze, "torch-snapshot", os.path.join(examples, "story_oom_h200.pb"), "-o",
                        os.path.join(work, "none.pickle")], capture_output=True, text=True)
    check(r.returncode == 2 and r.stderr.count("\n") == 1 and "torch.*" in r.stderr and
          not os.path.exists(os.path.join(work, "none.pickle")), "no torch events: exit %d, %r" % (
              r.returncode, r.stderr))
    print("ok: a trace without torch.* events: exit 2, " + r.stderr.strip()[:100])
    print("PASS")


if __name__ == "__main__":
    main()
