"""Phases (issue 9 item 3): NVTX ranges from a real PyTorch run (torch.cuda.nvtx.range_push/pop), received through
NVTX's injection interface, and the peak per phase. Oracle: PyTorch's max_memory_reserved() of each phase, reset at
its start (reset_peak_memory_stats()) and read at its end. Workload: nvtx_phases.py (the traced run has
NVTX_INJECTION64_PATH naming the preload, as the launcher sets it)."""
import pytest

from tracekit import to_int

PHASES = ("train", "validate")


def _run(suite):
    run = suite.run("nvtx_phases")
    assert run.rc == 0 and run.truth, "nvtx_phases failed (rc %s):\n%s" % (run.rc, run.output[-3000:])
    return run


def _phase_peaks(doc, kind):
    """{phase name: peak_bytes of `kind` on device 0} from a peak report's `phases`."""
    out = {}
    for p in doc.get("phases") or []:
        for peak in p.get("peaks") or []:
            if peak.get("device") == 0 and peak.get("kind") == kind:
                out[p.get("name")] = to_int(peak.get("peak_bytes"))
    return out


def test_ranges_are_the_programs(suite, row):
    """phases: the trace holds one closed range per phase, train before validate"""
    run = _run(suite)
    ranges = [r for r in run.analyze("peak").get("phase_ranges") or [] if r.get("name") in PHASES]
    got = [(r.get("name"), r.get("closed")) for r in ranges]
    row([(n, True) for n in PHASES], got, "==")
    assert got == [(n, True) for n in PHASES], run.analyze("peak").get("phase_ranges")


@pytest.mark.parametrize("name", PHASES)
def test_peak_per_phase_is_max_memory_reserved(suite, row, name):
    """phases: the peak of PyTorch's reserved bytes (torch.* segment events) in the phase = its max_memory_reserved()"""
    run = _run(suite)
    want = to_int(run.truth["phases"][name]["max_memory_reserved"])
    peaks = _phase_peaks(run.analyze("peak"), "torch_reserved")
    if not peaks:
        pytest.fail("no torch_reserved peaks: the allocator tracker did not attach? notices: %s" %
                    run.summary.get("notices"))
    row("max_memory_reserved() %d" % want, peaks.get(name), "==")
    assert peaks.get(name) == want, peaks


@pytest.mark.parametrize("name", PHASES)
def test_phase_filter_peak_covers_the_allocator(suite, row, name):
    """phases: `peak --phase NAME` sees the phase's events, and its device total is at least max_memory_reserved()"""
    run = _run(suite)
    want = to_int(run.truth["phases"][name]["max_memory_reserved"])
    doc = run.analyze("peak", "--phase", name)
    flt = doc.get("phase_filter") or {}
    totals = [to_int(s.get("peak_bytes")) for s in doc.get("device_totals") or [] if s.get("device") == 0]
    row(">= %d" % want, totals, "device total inside the phase >= reserved")
    assert flt.get("label") == name and to_int(flt.get("events"), 0) > 0, flt
    assert totals and totals[0] >= want, (totals, want)
