"""Failed allocations: the validation-OOM story (story 1: training fits, validation keeps its outputs until
cudaMalloc fails; the report names the validation line) and leaky's planted cudaMalloc(2^50). Workloads:
story_oom.py, leaky.cu (static and shared cudart). Latest figures: docs/validation.md."""
import os

import pytest

from tracekit import fmt_bytes, norm_stack, script_frame, to_int

OOM_REQUEST = 1 << 50


def _first_oom(suite):
    run = suite.run("story_oom")
    ooms = run.report("oom").get("ooms") or []
    assert ooms, "the oom report lists no failure; the script said %s" % (run.truth or {}).get("oom")
    return run, ooms[0]


def _user_frame(entry, basename):
    uf = entry.get("user_frame")
    if isinstance(uf, dict):
        return uf
    f = script_frame(norm_stack(entry.get("stack")), basename)
    return {"function": f.function, "file": f.file, "line": f.line} if f else None


def test_first_failure_user_frame_is_validation_line(suite, row):
    """validation OOM: the first failure's user frame is the validation line (file, line)"""
    run, first = _first_oom(suite)
    base = (run.truth.get("script") or {}).get("basename") or "story_oom.py"
    line = to_int(run.truth.get("validation_line"))
    uf = _user_frame(first, base) or {}
    row("%s:%s" % (base, line), "%s:%s %s" % (uf.get("file"), uf.get("line"), uf.get("function")), "== file, line")
    assert os.path.basename(str(uf.get("file"))) == base and to_int(uf.get("line")) == line, uf


def test_failed_request_is_one_output(suite, row):
    """validation OOM: the failed request == one validation output's bytes"""
    run, first = _first_oom(suite)
    want, got = to_int(run.truth.get("output_bytes")), to_int(first.get("requested_bytes"))
    row("one output = %s" % fmt_bytes(want), fmt_bytes(got), "==")
    assert want is not None and got == want, "output %s, requested %s" % (want, got)


def test_live_at_failure_covers_reserved(suite, row):
    """validation OOM: live at the failure that raised (the last) >= memory_reserved() at the raise
    (PyTorch retries a failed cudaMalloc after releasing cached segments: an earlier failure can be one it recovered
    from, as seen on an H100; and the segments it released are gone at the last failure, as seen on an H200, so the
    reserved figure is the one read in the except block, not the one after the last kept output)"""
    run, _ = _first_oom(suite)
    last = (run.report("oom").get("ooms") or [])[-1]
    reserved = to_int((run.truth.get("oom") or {}).get("memory_reserved"))
    live = to_int(last.get("live_bytes"))
    row("memory_reserved() at the raise = %s" % fmt_bytes(reserved), fmt_bytes(live), ">=")
    assert reserved is not None and live is not None and live >= reserved, "reserved %s, live %s" % (reserved, live)


@pytest.mark.parametrize("name", ["leaky", "leaky_shared"])
def test_planted_huge_cudamalloc(suite, row, name):
    """leaky: the planted cudaMalloc(2^50) is in `oom` with CUDA_ERROR_OUT_OF_MEMORY (2)"""
    ooms = suite.run(name).analyze("oom", "--group-by", "stack", "--top", "100000").get("ooms") or []
    hits = [o for o in ooms if to_int(o.get("requested_bytes")) == OOM_REQUEST]
    o = hits[0] if hits else {}
    row("1125899906842624 B, CUDA_ERROR_OUT_OF_MEMORY (2)",
        "%s, %s (%s), api %s" % (o.get("requested_bytes"), o.get("error"), o.get("error_code"), o.get("api"))
        if o else "no such failure", "==")
    assert o.get("error") == "CUDA_ERROR_OUT_OF_MEMORY" and to_int(o.get("error_code")) == 2, ooms[:3]
