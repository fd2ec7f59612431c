"""The GPU suite's fixtures: run a workload under the preload (and untraced where a relation needs it), hand back the
workload's own figures (its truth JSON, printed lines, exit status) and what `cumem-analyze --json` says about the
trace; and write the results table from which docs/validation.md takes its latest figures.

Why one runner: every module asks for workloads by name (WORKLOADS below); a workload runs once per session however
many relations read it, under a per-run timeout and a session budget (--budget: a run that would start later is
skipped, so the table is always written within one device call).

Options: --build DIR (the bundle of scripts/gpu-bundle.sh: DIR/preload/libcumemtrace.so, DIR/analyzer/cumem-analyze,
DIR/fakes/; default gpu-build), --md FILE (the results table), --work DIR (keep traces and outputs there),
--budget SECONDS (default 460). Without a GPU every test skips.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

import tracekit

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKLOAD_DIR = os.path.join(HERE, "workloads")
TOP = "100000"  # stack groups per report: every one, so that every stack id an event carries resolves

PINNED_CONF = "pinned_use_cuda_host_register:True,pinned_num_register_threads:8"


def _alloc_conf(value):
    # Newer PyTorch reads PYTORCH_ALLOC_CONF first and keeps PYTORCH_CUDA_ALLOC_CONF as the fallback: set both.
    return {"PYTORCH_CUDA_ALLOC_CONF": value, "PYTORCH_ALLOC_CONF": value}


# name: (what runs, environment of both runs, extra arguments, timeout in s[, the command that runs it]). What runs
# is a Python script of workloads/ or "native:<program>" (built with nvcc on first use, see NATIVE).
WORKLOADS = {
    "torch_train": ("torch_train_pinned.py", {}, [], 240),
    # Which processes trace (test_wrappers.py): under a wrapper that loads the preload, and a program that starts
    # others.
    "wrapped_timeout": ("wrapped.py", {}, [], 120, ["timeout", "300"]),
    "wrapped_spawn": ("wrapped.py", {}, ["--spawn"], 180),
    "clock": ("clock_brackets.py", {}, [], 60),
    "clock_tsc_off": ("clock_brackets.py", {"CUMEMTRACE_TSC": "0"}, [], 60),
    "leaky": ("native:leaky", {}, [], 120),
    "leaky_noreset": ("native:leaky", {}, ["--no-reset"], 120),
    "leaky_shared": ("native:leaky_shared", {}, [], 60),
    "driver_api": ("native:driver_api", {}, [], 60),
    "torch_nocache": ("torch_nocache.py", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, [], 90),
    "torch_expandable": ("torch_expandable.py", _alloc_conf("expandable_segments:True"), [], 90),
    "torch_async": ("torch_async.py", _alloc_conf("backend:cudaMallocAsync"), [], 90),
    "cupy_pool": ("cupy_pool.py", {}, [], 60),
    "jax_noprealloc": ("jax_noprealloc.py", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, [], 120),
    "jax_prealloc": ("jax_prealloc.py", {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.2"}, [], 120),
    "pinned_register": ("pinned_register.py", _alloc_conf(PINNED_CONF), [], 90),
    "story_oom": ("story_oom.py", {}, [], 120),
    "story_leak": ("story_leak.py", {}, [], 90),
    "story_noleak": ("story_leak.py", {}, ["--no-leak"], 90),
    "dataloader": ("dataloader_pin.py", {}, [], 90),
    "dataloader_fork": ("dataloader_pin.py", {"CUMEMTRACE_FOLLOW_FORK": "1"}, [], 90),
    "profiler": ("torch_step.py", {}, ["--profile"], 90),
    "cupti_torch": ("torch_step.py", {"CUMEMTRACE_CUPTI": "1"}, [], 90),
    "cupti_cupy": ("cupy_pool.py", {"CUMEMTRACE_CUPTI": "1"}, [], 60),
    "cost": ("cost_loop.py", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, [], 60),
    "cost_nopy": ("cost_loop.py", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUMEMTRACE_PYTHON": "0"}, [], 60),
    # PyTorch's caching-allocator layer (test_torch_blocks.py): checkpoints, a fragmentation OOM, the step cost.
    "blocks_default": ("blocks_train.py", {}, [], 240),
    "blocks_expandable": ("blocks_train.py", _alloc_conf("expandable_segments:True"), [], 240),
    # Stacks off: the tracker must still attach (the recorder takes a short stack once libc10_cuda.so is loaded).
    "blocks_nostacks": ("blocks_train.py", {"CUMEMTRACE_STACK_DEPTH": "0"}, [], 240),
    "frag_oom": ("frag_oom.py", {}, [], 90),
    "gpt2_overhead": ("gpt2_overhead.py", {}, [], 240),
    "gpt2_history": ("gpt2_overhead.py", {}, ["--history"], 240),
    # NVTX phases (test_nvtx_phases.py): the traced run names the preload to NVTX, as the launcher does.
    "nvtx_phases": ("nvtx_phases.py", {"NVTX_INJECTION64_PATH": "{preload}"}, [], 120),
    # Training and validation without NVTX ranges (test_detected_phases.py): the analyzer finds them.
    "train_validate": ("train_validate.py", {}, [], 120),
    # The unwind memo checked against libunwind on every stack it gives (test_unwind_memo.py).
    "unwind_memo_check": ("blocks_train.py", {"CUMEMTRACE_UNWIND_MEMO": "check"}, [], 240),
    # Cold TorchInductor and Triton caches for each run ({work} and {tag} are filled in per run).
    "graphs_compile": ("graphs_compile.py", {"TORCHINDUCTOR_COMPILE_THREADS": "1",
                                             "TORCHINDUCTOR_CACHE_DIR": "{work}/cache_inductor_{tag}",
                                             "TRITON_CACHE_DIR": "{work}/cache_triton_{tag}"}, [], 180),
}

# nvcc command lines (after nvcc, before -o): leaky with nvcc's default static cudart and with a shared one; the
# driver-API program with no runtime at all.
NATIVE = {
    "leaky": (["leaky.cu"], []),
    "leaky_shared": (["leaky.cu"], ["-cudart", "shared"]),
    "driver_api": (["-x", "c++", "driver_api.cu"], ["-cudart", "none", "-lcuda"]),
}

# Settings inherited from the caller would change what a workload measures: every run starts without them.
UNSET = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING",
         "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR",
         "CUPY_GPU_MEMORY_LIMIT", "LD_PRELOAD", "CUMEMTRACE_OUTPUT", "CUMEMTRACE_PYTHON", "CUMEMTRACE_FOLLOW_FORK",
         "CUMEMTRACE_FOLLOW_EXEC", "CUMEMTRACE_CUPTI", "CUMEMTRACE_ROOT_PID", "CUMEMTRACE_LIB", "RANK",
         "LOCAL_RANK", "WORLD_SIZE", "NVTX_INJECTION64_PATH", "CUMEMTRACE_NVTX", "CUMEMTRACE_STACK_DEPTH")


def pytest_addoption(parser):
    group = parser.getgroup("cumemtrace GPU suite")
    group.addoption("--build", default=os.environ.get("CUMEMTRACE_BUILD", "gpu-build"),
                    help="bundle from scripts/gpu-bundle.sh (relative to the repository root)")
    group.addoption("--md", default=None, help="write the results table (markdown) here")
    group.addoption("--work", default=None, help="keep traces and outputs here (default: a temporary folder)")
    group.addoption("--budget", type=float, default=460.0, help="seconds after which no new workload starts")


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class Run(object):
    """One run of a workload: exit status, output, truth, and (traced) the trace and the analyzer's view of it."""

    def __init__(self, suite, name, traced, rc, output, truth, trace_path, seconds, trace_dir):
        self.suite, self.name, self.traced = suite, name, traced
        self.rc, self.output, self.truth, self.trace_path = rc, output, truth, trace_path
        self.seconds, self.trace_dir = seconds, trace_dir
        self._reports = {}
        self._trace = None

    def analyze(self, *args):
        """`cumem-analyze ARGS --json` as a dict; the assertion message carries the analyzer's stderr."""
        key = tuple(args)
        if key not in self._reports:
            assert self.trace_path, "%s wrote no trace (rc %s); output tail:\n%s" % (
                self.name, self.rc, self.output[-3000:])
            self._reports[key] = self.suite.analyze(list(args[:1]) + [self.trace_path] + list(args[1:]))
        return self._reports[key]

    @property
    def summary(self):
        return self.analyze("summary", "--group-by", "stack", "--top", TOP)

    def report(self, sub):
        """A report in the analyzer's default grouping (by the user's own line), as the stories read it."""
        return self.analyze(sub, "--top", "50")

    @property
    def trace(self):
        if self._trace is None:
            reports = [self.summary] + [doc for key, doc in self._reports.items() if key[0] != "events"]
            self._trace = tracekit.Trace(self.analyze("events"), reports)
        return self._trace

    @property
    def health(self):
        return self.summary.get("health") or {}


class Suite(object):
    def __init__(self, config):
        build = config.getoption("--build")
        self.build = build if os.path.isabs(build) else os.path.join(REPO, build)
        self.preload = os.path.join(self.build, "preload", "libcumemtrace.so")
        self.analyzer = os.path.join(self.build, "analyzer", "cumem-analyze")
        self.fakes = os.path.join(self.build, "fakes")
        self._work = config.getoption("--work")
        self.budget = config.getoption("--budget")
        self.start = time.monotonic()
        self.gpus = gpu_count()
        self.runs = {}
        self.natives = {}

    @property
    def work(self):
        """Where traces and outputs go; made on first use (never while only collecting)."""
        if self._work is None:
            self._work = tempfile.mkdtemp(prefix="cumem-gpu-suite.")
        os.makedirs(self._work, exist_ok=True)
        return self._work

    def left(self):
        return self.budget - (time.monotonic() - self.start)

    def env(self, extra):
        env = {k: v for k, v in os.environ.items() if k not in UNSET}
        env.update({"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
                    # NVLink multicast stays off (the GPU machine's rule).
                    "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", "0"),
                    "TORCH_SYMM_MEM_DISABLE_MULTICAST": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                    "NVSHMEM_DISABLE_NVLS": os.environ.get("NVSHMEM_DISABLE_NVLS", "1")})
        env.update(extra)
        return env

    def execute(self, cmd, env, timeout):
        """(rc, stdout + stderr, seconds); rc 124 when the run outlived its timeout."""
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", timeout=timeout, cwd=self.work)
            return p.returncode, p.stdout, time.monotonic() - t0
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            return 124, out + "\n[timed out after %ss]" % timeout, time.monotonic() - t0

    def limit(self, want):
        left = self.left()
        if left < 5:
            pytest.skip("the suite's budget of %.0f s is spent" % self.budget)
        return min(want, left + 60)

    def native(self, program):
        if program not in self.natives:
            sources, flags = NATIVE[program]
            nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
            out = os.path.join(self.work, program)
            cmd = [nvcc] + [os.path.join(WORKLOAD_DIR, s) if s.endswith(".cu") else s for s in sources]
            cmd += ["-o", out] + flags
            rc, text, _ = self.execute(cmd, self.env({}), self.limit(180))
            self.natives[program] = (out if rc == 0 else None, text)
        path, text = self.natives[program]
        assert path, "nvcc failed for %s:\n%s" % (program, text[-3000:])
        return path

    def command(self, what, args, truth):
        if what.startswith("native:"):
            return [self.native(what.split(":", 1)[1])] + args
        return [sys.executable, os.path.join(WORKLOAD_DIR, what), truth] + args

    def run(self, name, traced=True):
        key = (name, traced)
        if key not in self.runs:
            what, extra, args, timeout, *wrapper = WORKLOADS[name]
            tag = name if traced else name + "_plain"
            truth_path = os.path.join(self.work, tag + "_truth.json")
            trace_dir = os.path.join(self.work, "tr_" + tag)
            # "{preload}" values (NVTX_INJECTION64_PATH) belong to the traced run only.
            env = {k: v.format(work=self.work, tag=tag, preload=self.preload) for k, v in extra.items()
                   if traced or "{preload}" not in v}
            if traced:
                os.makedirs(trace_dir, exist_ok=True)
                env.update({"LD_PRELOAD": self.preload,
                            "CUMEMTRACE_OUTPUT": os.path.join(trace_dir, "trace.%p.pb")})
            cmd = (wrapper[0] if wrapper else []) + self.command(what, args, truth_path)
            rc, output, seconds = self.execute(cmd, self.env(env), self.limit(timeout))
            with open(os.path.join(self.work, tag + ".out"), "w") as f:
                f.write(output)
            truth = None
            if os.path.exists(truth_path):
                with open(truth_path) as f:
                    truth = json.load(f)
            trace = self.pick_trace(trace_dir, (truth or {}).get("pid")) if traced else None
            self.runs[key] = Run(self, name, traced, rc, output, truth, trace, seconds, trace_dir)
        return self.runs[key]

    def sanitizer(self, program, args=()):
        """compute-sanitizer --leak-check full on a native workload: its output (the leak oracle)."""
        key = ("sanitizer", program, tuple(args))
        if key not in self.runs:
            tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
            rc, text, _ = self.execute([tool, "--leak-check", "full", self.native(program)] + list(args),
                                       self.env({}), self.limit(180))
            self.runs[key] = text
        return self.runs[key]

    def ddp(self):
        """torchrun with 2 ranks under the launcher (--follow-exec): {"rc", "output", "ranks": {r: Run}}."""
        if "ddp" not in self.runs:
            trace_dir = os.path.join(self.work, "tr_ddp")
            os.makedirs(trace_dir, exist_ok=True)
            cmd = ["bash", os.path.join(REPO, "scripts", "cumemtrace"), "--follow-exec", "-o",
                   os.path.join(trace_dir, "run.%r.pb"), "--", sys.executable, "-m", "torch.distributed.run",
                   "--standalone", "--nproc-per-node", "2", os.path.join(WORKLOAD_DIR, "ddp_train.py"), trace_dir]
            rc, output, seconds = self.execute(cmd, self.env({"CUMEMTRACE_LIB": self.preload}), self.limit(180))
            ranks = {}
            for r in (0, 1):
                truth_path = os.path.join(trace_dir, "truth.%d.json" % r)
                truth = json.load(open(truth_path)) if os.path.exists(truth_path) else None
                trace = os.path.join(trace_dir, "run.%d.pb" % r)
                ranks[r] = Run(self, "ddp_r%d" % r, True, rc, output, truth,
                               trace if os.path.exists(trace) else None, seconds, trace_dir)
            self.runs["ddp"] = {"rc": rc, "output": output, "ranks": ranks,
                                "traces": sorted(glob.glob(os.path.join(trace_dir, "run.*.pb")))}
        return self.runs["ddp"]

    def pick_trace(self, trace_dir, pid):
        """The workload's own trace: trace.<pid>.pb when its truth names the pid, else the largest."""
        if pid is not None and os.path.exists(os.path.join(trace_dir, "trace.%s.pb" % pid)):
            return os.path.join(trace_dir, "trace.%s.pb" % pid)
        files = [f for f in glob.glob(os.path.join(trace_dir, "*.pb")) if os.path.getsize(f) > 0]
        return max(files, key=os.path.getsize) if files else None

    def analyze(self, args):
        p = subprocess.run([self.analyzer] + args + ["--json"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, "cumem-analyze %s exited %d:\n%s" % (" ".join(args), p.returncode, p.stderr[-2000:])
        return json.loads(p.stdout)


@pytest.fixture(scope="session")
def suite(request):
    s = request.config._cumem_suite
    if s.gpus == 0:
        pytest.skip("no GPU (nvidia-smi -L lists none)")
    for path in (s.preload, s.analyzer):
        assert os.path.exists(path), "%s is missing: build the bundle with scripts/gpu-bundle.sh" % path
    return s


@pytest.fixture
def row(request):
    """row(oracle, cumemtrace, relation): the test's line in the results table (its outcome is the verdict)."""
    def add(oracle, measured, relation):
        request.node.user_properties.append(("row", (str(oracle), str(measured), relation)))
    return add


# ---- The results table ----------------------------------------------------------------------------------------

def pytest_configure(config):
    config.addinivalue_line("markers", "two_gpus: needs two GPUs of one host (skipped with fewer)")
    config._cumem_suite = Suite(config)
    config._cumem_results = []


def pytest_collection_modifyitems(config, items):
    suite = config._cumem_suite
    for item in items:
        if "two_gpus" in item.keywords and 0 < suite.gpus < 2:
            item.add_marker(pytest.mark.skip(reason="needs 2 GPUs, this machine has %d" % suite.gpus))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        verdict = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}[report.outcome]
        rows = [value for key, value in item.user_properties if key == "row"]
        why = ""
        if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
            why = report.longrepr[2]
        elif report.outcome == "failed":
            why = str(report.longrepr.reprcrash.message if hasattr(report.longrepr, "reprcrash") else
                      report.longrepr).splitlines()[0][:300]
        item.config._cumem_results.append((item.module.__name__, item.name, rows, verdict, why,
                                           item.function.__doc__ or ""))


def pytest_sessionfinish(session):
    path = session.config.getoption("--md", None)
    results = session.config._cumem_results
    if not path or not results:
        return
    suite = session.config._cumem_suite
    lines = ["# cumemtrace GPU suite", "",
             "%d GPU(s); %.0f s; build %s; work %s" % (suite.gpus, time.monotonic() - suite.start, suite.build,
                                                      suite._work or "(none)"), "",
             "| module | check | oracle | cumemtrace | relation | result |", "|---|---|---|---|---|---|"]
    counts = {}
    for module, name, rows, verdict, why, doc in results:
        counts[verdict] = counts.get(verdict, 0) + 1
        title = (doc.strip().splitlines() or [name])[0]
        if "[" in name:
            title += " [%s]" % name.split("[", 1)[1].rstrip("]")
        cells = rows or [("-", "-", "-")]
        for oracle, measured, relation in cells:
            cell = [module.replace("test_", ""), title, oracle, measured, relation,
                    verdict if verdict == "PASS" or not why else "%s: %s" % (verdict, why)]
            lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cell) + " |")
    lines += ["", ", ".join("%d %s" % (n, v) for v, n in sorted(counts.items()))]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
