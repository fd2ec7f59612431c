"""What the story workloads share: the coverage workloads' truth helpers, plus marker lines.

The GPU suite (tests/gpu/test_*.py) runs these workloads and compares their traces with the ground truth they
write. The truth-writing helpers (base_truth, checkpoint, safe, write_truth, out_path) are coverage_common.py's
(beside this file), imported from there so that there is one way to write a truth; this
module adds what the Python-stack stories need: the line numbers of the script's own marked lines, found by
reading its source (never from the interpreter's frames, which is what cumemtrace reads: the oracle must not share
the mechanism under test).

Standard library only; never touches CUDA (workloads import it before their framework, so their start time is
taken first).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coverage_common  # noqa: E402

MiB = coverage_common.MiB
checkpoint = coverage_common.checkpoint
safe = coverage_common.safe
write_truth = coverage_common.write_truth
out_path = coverage_common.out_path

# Variables beyond the coverage workloads' that change what these rows measure.
ROW_ENV_KEYS = ("CUMEMTRACE_PYTHON", "CUMEMTRACE_FOLLOW_FORK", "CUMEMTRACE_FOLLOW_EXEC", "CUMEMTRACE_CUPTI",
                "CUMEMTRACE_ROOT_PID", "RANK", "LOCAL_RANK", "WORLD_SIZE", "NCCL_NVLS_ENABLE",
                "TORCHINDUCTOR_COMPILE_THREADS", "TORCHINDUCTOR_CACHE_DIR")

MARK = "ROW-MARK:"


def base_truth(workload, t0_mono_ns, t0_unix_ns):
    truth = coverage_common.base_truth(workload, t0_mono_ns, t0_unix_ns)
    truth["env"].update({k: os.environ.get(k) for k in ROW_ENV_KEYS})
    return truth


def marker_lines(path):
    """{tag: line number} for every `ROW-MARK: tag` comment in the file at path (1-based, as tracebacks count)."""
    lines = {}
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, start=1):
            at = text.find(MARK)
            if at >= 0 and "#" in text[:at]:
                tag = text[at + len(MARK):].split()[0] if text[at + len(MARK):].split() else ""
                if tag:
                    lines[tag] = number
    return lines


def script_identity(path):
    """How the script names itself: the path as given and made absolute, its basename, and its marked lines."""
    return {"file": path, "abs_file": os.path.abspath(path), "basename": os.path.basename(path),
            "marks": marker_lines(path)}


def torch_facts(torch, device):
    """The PyTorch and device facts every row's truth carries (names as torch_train_pinned.py writes them)."""
    return {
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(device),
        "device_total_memory": torch.cuda.get_device_properties(device).total_memory,
        "device_count": torch.cuda.device_count(),
        "allocator_backend": safe(torch.cuda.get_allocator_backend),
    }
