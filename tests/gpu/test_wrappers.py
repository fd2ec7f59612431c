"""Which processes trace: a program started by a wrapper that loads the preload but never allocates traces
(`LD_PRELOAD=... timeout 300 python wrapped.py`; it wrote no trace at all before the preload decided this at the
first event), and the programs a traced program starts stay passive, through a shell and with a copy of the
environment; and a program that moves to another folder before its first CUDA call is told where its trace went.
Workload: wrapped.py."""
import json
import os

from tracekit import fmt_bytes, is_c10_device, to_int


def test_program_under_a_wrapper_traces(suite, row):
    """under `timeout`: the program's own trace, its segments' peak == reserved_bytes.all.peak"""
    run = suite.run("wrapped_timeout")
    assert run.rc == 0 and run.truth, "rc %s:\n%s" % (run.rc, run.output[-3000:])
    own = os.path.join(run.trace_dir, "trace.%d.pb" % run.truth["pid"])
    files = sorted(os.listdir(run.trace_dir))
    assert os.path.exists(own), "no trace of the program (pid %d): %s" % (run.truth["pid"], files)
    oracle = to_int(run.truth["memory_stats"].get("reserved_bytes.all.peak"))
    peak = run.trace.replay(is_c10_device)["peak"]
    row("a trace of the program; reserved_bytes.all.peak = %s" % fmt_bytes(oracle),
        "%s; %s" % (", ".join(files), fmt_bytes(peak)), "==")
    assert files == ["trace.%d.pb" % run.truth["pid"]], files
    assert oracle and peak == oracle, "reserved_bytes.all.peak %s, trace %s" % (oracle, peak)


def test_programs_a_traced_program_starts_stay_passive(suite, row):
    """started by a traced program (through bash, and with a copied environment): no trace of their own"""
    run = suite.run("wrapped_spawn")
    assert run.rc == 0 and run.truth, "rc %s:\n%s" % (run.rc, run.output[-3000:])
    children = run.truth.get("children") or []
    files = sorted(os.listdir(run.trace_dir))
    row("only trace.%d.pb; 2 children exit 0" % run.truth["pid"],
        "%s; children rc %s" % (", ".join(files), [c["rc"] for c in children]), "==")
    assert len(children) == 2 and all(c["rc"] == 0 for c in children), children
    assert files == ["trace.%d.pb" % run.truth["pid"]], files


def test_a_program_that_moved_is_told_the_absolute_path(suite, row):
    """relative CUMEMTRACE_OUTPUT, program moves first (as Hydra does): the exit line names the absolute path"""
    folder = os.path.join(suite.work, "wrapped_chdir_folder")
    truth = os.path.join(suite.work, "wrapped_chdir_truth.json")
    env = suite.env({"LD_PRELOAD": suite.preload, "CUMEMTRACE_OUTPUT": "moved.%p.pb", "CUMEMTRACE_QUIET": "0"})
    rc, out, _ = suite.execute(suite.command("wrapped.py", ["--chdir", folder], truth), env, suite.limit(120))
    assert rc == 0 and os.path.exists(truth), "rc %s:\n%s" % (rc, out[-3000:])
    with open(truth) as f:
        path = os.path.join(folder, "moved.%d.pb" % json.load(f)["pid"])
    lines = [ln for ln in out.splitlines() if ln.startswith("cumemtrace: wrote ")]
    row("cumemtrace: wrote %s (...)" % path, lines[0] if lines else "no such line", "starts with")
    assert os.path.exists(path), "no trace at %s" % path
    assert len(lines) == 1 and lines[0].startswith("cumemtrace: wrote %s (" % path), lines
