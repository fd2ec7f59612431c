"""Fork (CUMEMTRACE_FOLLOW_FORK=1) with a DataLoader whose workers fork: the program computes what it computes
untraced, nothing crashes, and the parent's trace reads cleanly. Workload: dataloader_pin.py."""
import re

from tracekit import same_checksum


def test_follow_fork_checksum(suite, row):
    """follow-fork: the checksum (and index sum, batches) == the untraced run's"""
    plain, traced = suite.run("dataloader", traced=False).truth, suite.run("dataloader_fork").truth
    assert plain and traced, "a run wrote no truth"
    row("untraced %s (%s batches)" % (plain.get("checksum_repr"), plain.get("batches")),
        "%s (%s batches)" % (traced.get("checksum_repr"), traced.get("batches")), "==")
    assert same_checksum(plain, traced), "untraced %s, traced %s" % (plain, traced)


def test_follow_fork_no_crash(suite, row):
    """follow-fork: no traceback, no worker death"""
    out = suite.run("dataloader_fork").output
    crash = [ln for ln in out.splitlines() if re.search(
        r"Segmentation fault|core dumped|Traceback|Fatal|DataLoader worker .* exited unexpectedly", ln)]
    row("no such line", "%d such lines" % len(crash), "== 0")
    assert not crash, crash[:10]


def test_follow_fork_parent_trace_reads_cleanly(suite, row):
    """follow-fork: the parent's trace reads cleanly (trailer, not truncated)"""
    h = suite.run("dataloader_fork").health
    row("trailer, not truncated", "trailer %s, truncated %s" % (h.get("has_trailer"), h.get("truncated")), "==")
    assert h.get("has_trailer") is True and not h.get("truncated"), h
