"""Phases without NVTX ranges: training and validation found by the analyzer from backward passes
(model/torch/step_phases.h). Oracle: PyTorch's own peaks of each stretch, reset at its start
(reset_peak_memory_stats()) and read at its end; a phase's truth is the larger of its stretches. Workload:
train_validate.py (two cycles of 20 training steps and 4 validation batches under no_grad, no NVTX)."""
import pytest

from tracekit import to_int

PHASES = ("train", "validate")


def _run(suite):
    run = suite.run("train_validate")
    assert run.rc == 0 and run.truth, "train_validate failed (rc %s):\n%s" % (run.rc, run.output[-3000:])
    return run


def test_phases_are_found_in_order(suite, row):
    """detected phases: train, validate, train, validate, found by the analyzer (no NVTX ranges in the trace)"""
    run = _run(suite)
    doc = run.analyze("peak")
    got = [r.get("name") for r in doc.get("phase_ranges") or []]
    want = ["train", "validate", "train", "validate"]
    row(want, got, "==")
    assert got == want and doc.get("phases_detected") is True, doc.get("phase_ranges")


@pytest.mark.parametrize("name", PHASES)
def test_tensor_peaks_per_phase_are_pytorchs(suite, row, name):
    """detected phases: `peak --phase NAME` allocated, requested and reserved peaks = PyTorch's own for the phase"""
    run = _run(suite)
    want = run.truth["phase_peaks"][name]
    d = run.analyze("peak", "--phase", name)["allocator"]["devices"][0]
    got = {"allocated": to_int(d.get("allocated_peak_bytes")), "requested": to_int(d.get("requested_peak_bytes")),
           "reserved": to_int(d.get("reserved_peak_bytes"))}
    row(want, got, "==")
    assert got == {k: to_int(v) for k, v in want.items()}, (got, want)
