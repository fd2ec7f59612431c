"""`cumem-analyze torch-snapshot` opened by PyTorch's own reader: the snapshot written from a traced GPT-2 run
(blocks_train.py, default allocator and expandable segments) is loaded by `python -m torch.cuda._memory_viz` (its
`stats`, `trace_plot` and `segment_plot` commands, which unpickle it and walk every segment, block and trace entry),
and `stats` reports the reserved total PyTorch's memory_stats() gave at the run's last checkpoint and the allocated
total of the blocks the trace leaves live. The pickle's structure is checked on the CPU (tests/pictures/
torch_snapshot_test.py, on examples/gpt2_blocks_h100.pb); this module is the proof that PyTorch opens it."""
import os
import re
import subprocess
import sys

import pytest


def memory_viz(suite, args):
    """python -m torch.cuda._memory_viz ARGS: (exit status, output)."""
    p = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz"] + args, capture_output=True, text=True,
                       timeout=300, cwd=suite.work)
    return p.returncode, p.stdout + p.stderr


def pytorch_bytes(n):
    """n as _memory_viz prints it (its own Bytes class)."""
    out = subprocess.run([sys.executable, "-c", "import sys; from torch.cuda._memory_viz import Bytes; "
                          "print(Bytes(int(sys.argv[1])))", str(n)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def export(suite, run, name):
    out = os.path.join(suite.work, name + ".pickle")
    p = subprocess.run([suite.analyzer, "torch-snapshot", run.trace_path, "-o", out], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, "torch-snapshot exited %d: %s" % (p.returncode, p.stderr[-2000:])
    return out


def end_state(run):
    """Reserved bytes, and the requested bytes of the blocks allocated at the end (freed by no tensor: what stats
    counts as allocated), replayed from the trace's events."""
    reserved, live = 0, {}
    for e in sorted(run.analyze("events")["events"], key=lambda e: e["seq"]):
        addr = int(e["address"], 16)
        if e["api"] == "torch.alloc":
            live[addr] = e["size"]
        elif e["api"] in ("torch.free_requested", "torch.free"):
            live.pop(addr, None)
        elif e["api"] in ("torch.segment_alloc", "torch.segment_map"):
            reserved += e["size"]
        elif e["api"] in ("torch.segment_free", "torch.segment_unmap"):
            reserved -= e["size"]
    return reserved, sum(live.values())


@pytest.mark.parametrize("workload", ["blocks_default", "blocks_expandable"])
def test_memory_viz_opens_the_snapshot(suite, row, workload):
    """PyTorch's _memory_viz stats, trace_plot and segment_plot open the exported snapshot (exit 0); stats' reserved
    total == memory_stats() reserved_bytes at the last checkpoint, its allocated total == the blocks live at the end"""
    run = suite.run(workload)
    assert run.rc == 0, run.output[-2000:]
    pickle_path = export(suite, run, workload + "_snapshot")
    rc, stats = memory_viz(suite, ["stats", pickle_path])
    assert rc == 0, "_memory_viz stats exited %d:\n%s" % (rc, stats[-3000:])
    plots = {}
    for plot in ("trace_plot", "segment_plot"):
        html = os.path.join(suite.work, "%s_%s.html" % (workload, plot))
        rc, out = memory_viz(suite, [plot, pickle_path, "-o", html])
        assert rc == 0 and os.path.getsize(html) > 0, "_memory_viz %s exited %d:\n%s" % (plot, rc, out[-3000:])
        plots[plot] = os.path.getsize(html)
    reported = dict(re.findall(r"^(total_reserved|total_allocated): (.*)$", stats, re.M))
    reserved, requested = end_state(run)
    truth_reserved = run.truth["checkpoints"][-1]["stats"]["reserved_bytes.all.current"]
    oracle = [pytorch_bytes(truth_reserved), pytorch_bytes(reserved), pytorch_bytes(requested)]
    measured = [reported.get("total_reserved"), reported.get("total_reserved"), reported.get("total_allocated")]
    row("reserved_bytes %s (last checkpoint), trace end %s, live blocks %s" % tuple(oracle),
        "stats: total_reserved %s, total_allocated %s; trace_plot %d B, segment_plot %d B" % (
            measured[0], measured[2], plots["trace_plot"], plots["segment_plot"]), "==")
    assert measured == oracle, "PyTorch's stats %s, expected %s:\n%s" % (measured, oracle, stats[-2000:])
