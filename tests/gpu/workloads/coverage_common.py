"""What every coverage workload writes beside its framework's own numbers, and how it writes it.

The workloads in this folder (torch_expandable.py, torch_async.py, torch_nocache.py, cupy_pool.py, jax_prealloc.py,
jax_noprealloc.py) are run by the GPU suite (tests/gpu/conftest.py) twice each, without and with the preload; the suite compares
the traced run's trace with the ground truth the workload wrote. This module must stay standard-library only and
must never touch CUDA: workloads import it before their framework so that their start time is taken first.

Times are time.monotonic_ns(), which is CLOCK_MONOTONIC: the clock of the trace (header clock_id 1), so the suite can
cut the trace's events at a checkpoint.
"""
import json
import os
import sys
import time

# Variables that select an allocator or the tracing; recorded so that the suite can tell a run that did not get the
# environment it needed (the runner sets them, never the workload).
ENV_KEYS = (
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR",
    "JAX_PLATFORMS", "CUPY_GPU_MEMORY_LIMIT", "CUDA_VISIBLE_DEVICES", "LD_PRELOAD", "CUMEMTRACE_OUTPUT",
)

MiB = 1 << 20


def out_path(default):
    """The truth JSON's path: argv[1], else `default` in the current directory."""
    return sys.argv[1] if len(sys.argv) > 1 else default


def base_truth(workload, t0_mono_ns, t0_unix_ns):
    return {
        "workload": workload,
        "pid": os.getpid(),
        "argv": sys.argv,
        "python": sys.version,
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "traced": bool(os.environ.get("LD_PRELOAD")),
        "t0_mono_ns": t0_mono_ns,
        "t0_unix_ns": t0_unix_ns,
    }


def checkpoint(label, **fields):
    """A named moment on the trace's clock, with whatever the framework said at that moment."""
    point = {"label": label, "mono_ns": time.monotonic_ns()}
    point.update(fields)
    return point


def safe(fn):
    """fn(), or a record of why it failed: a missing statistic must not fail the run."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return {"error": "%s: %s" % (type(e).__name__, e)}


def write_truth(path, truth):
    """Writes the truth atomically, last: nothing the workload does after this allocates CUDA memory."""
    truth["truth_written_mono_ns"] = time.monotonic_ns()
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True, default=str)
    os.replace(tmp, path)
    print("%s: ground truth written to %s" % (truth.get("workload"), path))
    sys.stdout.flush()
