"""Python frames on the GPU machine's own Python (3.12; the CPU tests prove 3.11): the e2e ctypes script against the
fake driver (its `# LINE:` markers are the oracle), and real PyTorch, whose training stacks must reach the script's
own lines. Read with trace_python_frames.py, which decodes the trace itself (no analyzer involved)."""
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CTYPES = os.path.join(os.path.dirname(HERE), "e2e", "python", "ctypes_alloc.py")


def markers(path):
    with open(path) as f:
        return {m.group(1): i + 1 for i, line in enumerate(f) for m in [re.search(r"# LINE:(\w+)", line)] if m}


def chains_of(trace):
    out = subprocess.run([sys.executable, os.path.join(HERE, "trace_python_frames.py"), trace, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [[(f.get("function"), f.get("line")) if "marker" not in f else ("<marker>", f["marker"])
             for f in c["frames"]] for c in json.loads(out.stdout)]


@pytest.fixture(scope="module")
def ctypes_chains(suite):
    if not os.path.exists(os.path.join(suite.fakes, "libcuda.so.1")):
        pytest.fail("%s/libcuda.so.1 (the fake driver) is missing: scripts/gpu-bundle.sh puts it there" % suite.fakes)
    trace = os.path.join(suite.work, "python_ctypes.pb")
    env = suite.env({"LD_LIBRARY_PATH": suite.fakes, "FAKE_CUDA_TOTAL_BYTES": str(16 << 30),
                     "LD_PRELOAD": suite.preload, "CUMEMTRACE_OUTPUT": trace, "CUMEMTRACE_OVERWRITE": "1"})
    rc, output, _ = suite.execute([sys.executable, CTYPES, suite.fakes], env, 60)
    assert rc == 0 and "ok" in output, "ctypes_alloc.py rc %s:\n%s" % (rc, output[-2000:])
    return chains_of(trace)


def _has_chain(chains, want):
    return any(c[:len(want)] == want for c in chains)


def test_main_thread_chain(suite, row, ctypes_chains):
    """ctypes, main thread: inner <- outer <- main <- <module> at the marked lines"""
    m = markers(CTYPES)
    want = [("inner", m["inner"]), ("outer", m["outer"]), ("main", m["main_outer"]), ("<module>", m["module"])]
    row(want, [c for c in ctypes_chains if c and c[0][0] == "inner"][:2], "== (function, line)")
    assert _has_chain(ctypes_chains, want), ctypes_chains


def test_method_chain(suite, row, ctypes_chains):
    """ctypes, a method: Model.allocate <- main <- <module> (qualified name)"""
    m = markers(CTYPES)
    want = [("Model.allocate", m["method"]), ("main", m["main_method"]), ("<module>", m["module"])]
    row(want, [c for c in ctypes_chains if c and "allocate" in str(c[0][0])][:1], "== (function, line)")
    assert _has_chain(ctypes_chains, want), ctypes_chains


def test_thread_chain(suite, row, ctypes_chains):
    """ctypes, a threading.Thread: inner <- outer <- worker, then threading.py's frames"""
    m = markers(CTYPES)
    want = [("inner", m["inner"]), ("outer", m["outer"]), ("worker", m["worker"])]
    hits = [c for c in ctypes_chains if c[:3] == want]
    row(want + ["Thread.run ..."], hits[:1], "== (function, line), then Thread.run")
    assert hits and any(f[0] == "Thread.run" for f in hits[0][3:]), ctypes_chains


def test_native_thread_marker(suite, row, ctypes_chains):
    """ctypes, a thread created in C: the marker "no Python frames on this thread" """
    hits = [c for c in ctypes_chains if c and c[0][0] == "<marker>"]
    row("no Python frames on this thread", hits[:1], "marker")
    assert hits and "no Python frames" in hits[0][0][1], ctypes_chains


def test_torch_training_reaches_the_script(suite, row):
    """PyTorch training: Python chains reach torch_train_pinned.py's main"""
    run = suite.run("torch_train")
    chains = chains_of(run.trace_path)
    mains = sorted(set(f[1] for c in chains for f in c if f[0] == "main"))
    row("frames of main() in torch_train_pinned.py", "main at lines %s" % mains, "present")
    assert mains, "no Python chain reaches main(): %d chains" % len(chains)
