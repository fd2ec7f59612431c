"""A multi-GPU job (story 6): torchrun with 2 ranks of DDP over NCCL under `cumemtrace --follow-exec -o run.%r.pb`:
one trace per rank, each rank's caching-allocator peak equal to its reserved_bytes.all.peak, NCCL named as an
owner, and `cumem-analyze ranks` listing both. Workload: ddp_train.py. Needs two GPUs."""
import pytest

from tracekit import fmt_bytes, is_c10_device, to_int

pytestmark = pytest.mark.two_gpus


def test_ddp_exit_status(suite, row):
    """DDP: torchrun under the launcher exits 0"""
    job = suite.ddp()
    row("rc 0", "rc %s" % job["rc"], "==")
    assert job["rc"] == 0, job["output"][-3000:]


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_peak_equals_reserved_peak(suite, row, rank):
    """DDP: each rank's caching-allocator peak on its device == its reserved_bytes.all.peak"""
    run = suite.ddp()["ranks"][rank]
    assert run.truth and run.trace_path, "rank %d wrote no truth or no trace:\n%s" % (rank, run.output[-2000:])
    device = to_int(run.truth.get("device"), rank)
    oracle = to_int((run.truth.get("memory_stats") or {}).get("reserved_bytes.all.peak"))
    peak = run.trace.replay(lambda e: is_c10_device(e) and e.device == device)["peak"]
    row("reserved_bytes.all.peak = %s" % fmt_bytes(oracle), fmt_bytes(peak), "==")
    assert oracle and peak == oracle, "rank %d: reserved peak %s, trace %s" % (rank, oracle, peak)


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_trace_health(suite, row, rank):
    """DDP: each rank's trace is whole (trailer, 0 dropped, 0 wrapper slots exhausted)"""
    h = suite.ddp()["ranks"][rank].health
    row("trailer, 0 each", "trailer %s, dropped %s, wrapper slots exhausted %s" % (
        h.get("has_trailer"), h.get("dropped_events"), h.get("wrapper_slots_exhausted")), "== 0 each")
    assert h.get("has_trailer") is True and h.get("dropped_events") == 0 and \
        h.get("wrapper_slots_exhausted") == 0 and not h.get("truncated"), h


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_owner_nccl(suite, row, rank):
    """DDP: NCCL is an owner of each rank's memory"""
    owners = suite.ddp()["ranks"][rank].summary.get("owners") or []
    row("NCCL allocates its buffers", "; ".join("dev %s %s %s" % (o.get("device"), o.get("owner"),
                                                                 fmt_bytes(to_int(o.get("bytes_allocated"))))
                                                for o in owners[:6]), "nccl present")
    assert any(o.get("owner") == "nccl" for o in owners), owners


def test_ranks_report_lists_both(suite, row):
    """DDP: `cumem-analyze ranks` lists ranks 0 and 1"""
    job = suite.ddp()
    assert job["traces"], "no trace written:\n%s" % job["output"][-2000:]
    doc = suite.analyze(["ranks"] + job["traces"])
    got = sorted(to_int(r.get("rank"), -1) for r in doc.get("ranks") or [])
    row("ranks 0 and 1", got, "both listed")
    assert 0 in got and 1 in got, doc.get("ranks")
