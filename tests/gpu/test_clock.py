"""The preload's clock on the GPU machine: every PyTorch block allocation's time in the trace lies between the
workload's own time.monotonic_ns() reads around it (CLOCK_MONOTONIC, the trace's clock). Where the kernel's
clocksource is tsc, the trace's times come from the CPU's counter, scaled (preload/clock.h): the trailer must count
its calibrations, and the tolerance is the largest difference those calibrations found (clock_max_error_ns) plus
1 us; with CUMEMTRACE_TSC=0 the times are clock_gettime's and the tolerance is 0."""
import pytest


def kernel_clocksource():
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


@pytest.mark.parametrize("name", ["clock", "clock_tsc_off"])
def test_times_lie_between_the_workloads_reads(suite, row, name):
    """each torch.alloc's time within [before, after] of the workload's monotonic_ns() reads"""
    run = suite.run(name)
    assert run.rc == 0 and run.truth, "%s: rc %s, output tail:\n%s" % (name, run.rc, run.output[-2000:])
    health = run.health
    ticks = name == "clock" and kernel_clocksource() == "tsc"
    calibrations = health.get("clock_calibrations")
    if ticks:
        assert calibrations >= 5 and health.get("clock_steps") == 0, health
        tolerance = health.get("clock_max_error_ns") + 1000
    else:
        assert calibrations == 0 and health.get("clock_max_error_ns") == 0, health
        tolerance = 0
    by_size = {}
    for e in run.trace.events:
        if e.api == "torch.alloc":
            by_size.setdefault(e.size, []).append(e.time)
    brackets = run.truth["brackets"]
    outside, missing, early, late = 0, 0, 0, 0
    for before, after, size in brackets:
        times = by_size.get(size, [])
        if len(times) != 1:
            missing += 1
            continue
        early = max(early, before - times[0])
        late = max(late, times[0] - after)
        if times[0] < before - tolerance or times[0] > after + tolerance:
            outside += 1
    row("%d allocations within their brackets (clocksource %s)" % (len(brackets), kernel_clocksource()),
        "%d outside, %d unmatched; worst %d ns early, %d ns late; calibrations %s, max error %s ns; tolerance %d ns"
        % (outside, missing, early, late, calibrations, health.get("clock_max_error_ns"), tolerance), "== 0 outside")
    assert len(brackets) > 1000 and missing == 0 and outside == 0
