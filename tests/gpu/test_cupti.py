"""CUPTI beside the preload: torch.profiler keeps all its CUDA activity under cumemtrace (which never subscribes
unless asked), and with CUMEMTRACE_CUPTI=1 cumemtrace's own CUPTI source subscribes and finds nothing that
interposition missed. Workloads: torch_step.py (--profile), cupy_pool.py. Latest figures: docs/validation.md."""
import pytest

from tracekit import to_int


def _profiler_events(run):
    return to_int(((run.truth or {}).get("profiler") or {}).get("cuda_device_events"))


def test_profiler_records_cuda_events(suite, row):
    """torch.profiler beside the preload: CUDA device events recorded > 0"""
    n = _profiler_events(suite.run("profiler"))
    row("> 0", n, ">")
    assert n is not None and n > 0, "torch.profiler recorded %s CUDA device events under the preload" % n


def test_profiler_events_as_untraced(suite, row):
    """torch.profiler beside the preload: CUDA device events traced == untraced"""
    plain, n = _profiler_events(suite.run("profiler", traced=False)), _profiler_events(suite.run("profiler"))
    row("untraced %s" % plain, n, "==")
    assert n is not None and n == plain, "untraced %s, traced %s" % (plain, n)


@pytest.mark.parametrize("name", ["cupti_torch", "cupti_cupy"])
def test_cupti_enabled(suite, row, name):
    """CUMEMTRACE_CUPTI=1: the header says cupti_enabled"""
    enabled = (suite.run(name).summary.get("process") or {}).get("cupti_enabled")
    row("true", enabled, "==")
    assert enabled is True, "cupti_enabled %s" % enabled


@pytest.mark.parametrize("name", ["cupti_torch", "cupti_cupy"])
def test_cupti_found_nothing_missed(suite, row, name):
    """CUMEMTRACE_CUPTI=1: the trailer's cupti_only_events == 0 (interposition saw every call CUPTI saw)"""
    run = suite.run(name)
    n = to_int(run.health.get("cupti_only_events"))
    only = [(e.api, e.size) for e in run.trace.events if e.cupti_only]
    row("0", n, "== 0")
    assert n == 0, "CUPTI-only events: %s" % only[:10]
