#!/usr/bin/env python3
"""CPU-only test of tests/gpu/rows/check.py: hand-written inputs in the shapes scripts/gpu-rows.sh and the analyzer
(JSON schema 2, contracts.md) produce, for a run where every relation holds, and then one mutation per relation
that must turn its row to FAIL, SKIP or MISSING. No GPU, no analyzer, no PyTorch: this tests the check logic only
(that it reads the right keys, resolves stacks, replays the events and compares with the right oracle), so that
a FAIL on the GPU machine means the tool and not the checker.

Run: python3 tests/gpu/rows/test_check.py (CTest: gpu_rows_check_logic). Only the standard library.
"""
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402

MiB = 1 << 20
T0 = 5000 * 10**9          # process.start_time_ns of every fixture trace (CLOCK_MONOTONIC, absolute)
SCRIPTS = "/repo/tests/gpu/rows/"
SITE = "/venv/lib/python3.12/site-packages/"


def sec(s):
    """Absolute CLOCK_MONOTONIC time s seconds after the trace's start."""
    return T0 + int(s * 10**9)


# ----------------------------------------------------------------------------------------------------------------
# Frames and stacks (innermost first), as the analyzer prints them


def nat(function, module):
    return {"kind": "native", "function": function, "module": module, "file": None, "line": None, "pc": "0x1000",
            "offset": "0x10"}


def py(function, path, line):
    return {"kind": "python", "function": function, "module": None, "file": path, "line": line, "pc": "0x800"
            "0000000000001", "offset": None}


CUDA = nat("cuMemAlloc_v2", "/usr/lib/libcuda.so.1")
CUDART = nat("cudaMalloc", "/venv/nvidia/cuda_runtime/lib/libcudart.so.13")
C10 = nat("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
          SITE + "torch/lib/libc10_cuda.so")
TORCH_PIN = nat("at::cuda::CachingHostAllocator::allocate", SITE + "torch/lib/libtorch_cuda.so")
LINEAR = py("Linear.forward", SITE + "torch/nn/modules/linear.py", 125)


def c10_stack(*python):
    return [CUDART, CUDA, C10] + list(python)


# ----------------------------------------------------------------------------------------------------------------
# Documents


def process(pid, **extra):
    p = {"pid": pid, "ppid": 1, "argv": ["python3"], "start_time_ns": T0, "hostname": "gpu"}
    p.update(extra)
    return p


HEALTH = {"has_trailer": True, "truncated": False, "dropped_events": 0, "wrapper_slots_exhausted": 0,
          "unwind_failures": 0, "truncated_stacks": 0, "failed_allocations": 0, "python_stacks": 5,
          "python_failures": 0, "cupti_only_events": 0, "memory_samples": 3}


class Events(object):
    """Builds an events list: alloc/free with consecutive seq numbers; times in seconds after the start."""

    def __init__(self):
        self.rows = []

    def alloc(self, t, api, kind, size, addr, stack_id=0, device=0, thread="python3", result=0):
        self.rows.append({"seq": len(self.rows) + 1, "time_ns": int(t * 10**9), "op": "alloc", "api": api,
                          "kind": kind, "device": device, "address": hex(addr), "size": size, "stream": None,
                          "aux": None, "thread": 0, "thread_name": thread, "result": result, "stack_id": stack_id})
        return self

    def free(self, t, api, kind, addr, size=None, stack_id=0, thread="python3"):
        self.rows.append({"seq": len(self.rows) + 1, "time_ns": int(t * 10**9), "op": "free", "api": api,
                          "kind": kind, "device": 0, "address": hex(addr), "size": size, "stream": None,
                          "aux": None, "thread": 0, "thread_name": thread, "result": 0, "stack_id": stack_id})
        return self


def summary(pid, stacks, health=None, leaks=None, ooms=None, **extra):
    """A `summary --json --group-by stack` document; `stacks` {id: frames} appear as leak groups (every one is
    live at the end in these fixtures unless `leaks` is given)."""
    if leaks is None:
        leaks = [{"device": 0, "kind": "device", "bytes": 1, "count": 1, "stack_id": sid, "stack": frames,
                  "stacks": 1, "user_frame": None} for sid, frames in sorted(stacks.items())]
    doc = {"schema_version": 2, "command": "summary", "trace": "x.pb", "process": process(pid),
           "health": dict(HEALTH, **(health or {})), "leaks": leaks, "ooms": ooms or [], "peaks": [],
           "owners": [{"device": 0, "owner": "pytorch", "bytes_allocated": 10}],
           "driver_memory": [{"device": 0, "samples": 3, "total_bytes": 100, "used_min": 10, "used_max": 50,
                              "traced_at_max": 40, "unexplained_at_max": 10, "unexplained_min": 5,
                              "unexplained_max": 10, "unexplained_last": 7}]}
    for key, value in extra.items():
        if key in ("cupti_enabled", "python_frames_enabled", "rank", "local_rank", "world_size", "forked_child"):
            doc["process"][key] = value
        else:
            doc[key] = value
    return doc


def truth(pid, **fields):
    t = {"pid": pid, "t0_mono_ns": T0 - 10**9, "truth_written_mono_ns": T0 + 60 * 10**9, "env": {},
         "torch_version": "2.11.0+cu130", "device_name": "NVIDIA H200"}
    t.update(fields)
    return t


class Fixture(object):
    """A work directory as scripts/gpu-rows.sh leaves it, for a run where every relation holds."""

    def __init__(self, directory):
        self.dir = directory
        self.rcs = {}

    def write(self, name, doc):
        with open(os.path.join(self.dir, name), "w") as f:
            if isinstance(doc, str):
                f.write(doc)
            else:
                json.dump(doc, f)

    def load(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return json.load(f)

    def edit(self, name, fn):
        doc = self.load(name)
        fn(doc)
        self.write(name, doc)

    def trace(self, name, pid, events, stacks, **summary_extra):
        self.write("%s_events.json" % name, {"events": events.rows, "process": process(pid), "health": HEALTH})
        self.write("%s_summary.json" % name, summary(pid, stacks, **summary_extra))
        self.rcs["analyze_%s_summary" % name] = 0

    def finish(self):
        self.write("rc.txt", "".join("%s %d\n" % kv for kv in sorted(self.rcs.items())))
        self.write("times.txt", "".join("%s 1.5\n" % k for k in sorted(self.rcs)))

    def build(self):
        self.write("gpus.txt", "2\n")
        self.driver_api()
        self.leaky_shared()
        self.pinned_register()
        self.story_oom()
        self.story_leak()
        self.dataloader()
        self.ddp()
        self.profiler()
        self.cupti()
        self.graphs_compile()
        self.cost()
        self.finish()

    # 3a ------------------------------------------------------------------------------------------------------
    def driver_api(self):
        self.rcs.update(driver_api_plain=0, driver_api_traced=0)
        self.write("driver_api_traced.out", "\n".join([
            "LEDGER alloc cuMemAlloc device 0 9437184 0x7f0000000000",
            "PLANTED leak_driver_buffer 9437184 0x7f0000000000",
            "LEDGER alloc cuMemAlloc device 0 4194304 0x7f0000a00000",
            "LEDGER free cuMemFree 0x7f0000a00000",
            "LEDGER alloc cuMemAllocPitch device 0 102400 0x7f0000e00000",
            "LEDGER free cuMemFree 0x7f0000e00000",
            "LEDGER alloc cuMemAllocHost pinned_host -1 2097152 0x200000000",
            "LEDGER free cuMemFreeHost 0x200000000",
            "LEDGER alloc cuMemHostRegister registered_host -1 1048576 0x55550000",
            "LEDGER free cuMemHostUnregister 0x55550000",
            "LEDGER alloc cuMemAllocManaged managed 0 65536 0x7f1000000000",
            "LEDGER free cuMemFree 0x7f1000000000",
            "LEDGER alloc cuMemAddressReserve address_reserve 0 8388608 0x7f2000000000",
            "LEDGER alloc cuMemCreate vmm_physical 0 4194304 0x1",
            "LEDGER alloc cuMemMap vmm_mapped 0 4194304 0x7f2000000000",
            "LEDGER free cuMemUnmap 0x7f2000000000",
            "LEDGER free cuMemRelease 0x1",
            "LEDGER free cuMemAddressFree 0x7f2000000000",
            "LEDGER alloc cuMemAllocFromPoolAsync pool 0 6291456 0x7f3000000000",
            "LEDGER free cuMemFreeAsync 0x7f3000000000",
            "LEAKED_TOTAL 9437184 1", ""]))
        ev = (Events()
              .alloc(0.1, "cuMemAlloc", "device", 9437184, 0x7f0000000000, stack_id=1)
              .alloc(0.2, "cuMemAlloc", "device", 4194304, 0x7f0000a00000, stack_id=2)
              .free(0.3, "cuMemFree", "device", 0x7f0000a00000, 4194304)
              .alloc(0.4, "cuMemAllocPitch", "device", 102400, 0x7f0000e00000)
              .free(0.5, "cuMemFree", "device", 0x7f0000e00000, 102400)
              .alloc(0.6, "cuMemAllocHost", "pinned_host", 2097152, 0x200000000, device=-1)
              .free(0.7, "cuMemFreeHost", "pinned_host", 0x200000000, 2097152)
              .alloc(0.8, "cuMemHostRegister", "registered_host", 1048576, 0x55550000, device=-1)
              .free(0.9, "cuMemHostUnregister", "registered_host", 0x55550000, 1048576)
              .alloc(1.0, "cuMemAllocManaged", "managed", 65536, 0x7f1000000000)
              .free(1.1, "cuMemFree", "managed", 0x7f1000000000, 65536)
              .alloc(1.2, "cuMemAddressReserve", "address_reserve", 8388608, 0x7f2000000000)
              .alloc(1.3, "cuMemCreate", "vmm_physical", 4194304, 0x1)
              .alloc(1.4, "cuMemMap", "vmm_mapped", 4194304, 0x7f2000000000)
              .free(1.5, "cuMemUnmap", "vmm_mapped", 0x7f2000000000, 4194304)
              .free(1.6, "cuMemRelease", "vmm_physical", 0x1, 4194304)
              .free(1.7, "cuMemAddressFree", "address_reserve", 0x7f2000000000, 8388608)
              .alloc(1.8, "cuMemAllocFromPoolAsync", "pool", 6291456, 0x7f3000000000)
              .free(1.9, "cuMemFreeAsync", "pool", 0x7f3000000000, 6291456))
        leak_stack = [CUDA, nat("leak_driver_buffer()", "/tmp/w/driver_api"), nat("main", "/tmp/w/driver_api")]
        self.trace("driver_api", 10, ev, {1: leak_stack},
                   leak_summary={"memory_bytes": 9437184, "memory_count": 1, "stack_groups": 1, "clean_end": True},
                   leaks=[{"device": 0, "kind": "device", "bytes": 9437184, "count": 1, "stack_id": 1,
                           "stack": leak_stack, "stacks": 1, "user_frame": leak_stack[1]}])

    # 3b ------------------------------------------------------------------------------------------------------
    def leaky_shared(self):
        self.rcs.update(leaky_shared_plain=0, leaky_shared_traced=0, leaky_shared_sanitizer=0)
        planted = ("PLANTED leak_model_weights 3145728 0x7f5000000000\n"
                   "PLANTED leak_model_weights 5242880 0x7f5000400000\n"
                   "PLANTED leak_scratch 7340032 0x7f5000a00000\n")
        self.write("leaky_shared_traced.out", planted + "LEAKED_TOTAL 15728640 3\n")
        self.write("leaky_shared_sanitizer.out", planted + (
            "========= Leaked 3145728 bytes at 0x7f5000000000\n"
            "========= Leaked 5242880 bytes at 0x7f5000400000\n"
            "========= Leaked 7340032 bytes at 0x7f5000a00000\n"
            "========= LEAK SUMMARY: 15728640 bytes leaked in 3 allocations\n"))
        exe = "/tmp/w/leaky_shared"
        s_w = [CUDART, CUDA, nat("leak_model_weights(void**)", exe), nat("main", exe)]
        s_s = [CUDART, CUDA, nat("leak_scratch(void**)", exe), nat("main", exe)]
        s_pf = [CUDART, CUDA, nat("properly_freed()", exe), nat("main", exe)]
        ev = (Events()
              .alloc(0.1, "cudaMalloc", "device", 3145728, 0x7f5000000000, stack_id=1)
              .alloc(0.2, "cudaMalloc", "device", 5242880, 0x7f5000400000, stack_id=1)
              .alloc(0.3, "cudaMalloc", "device", 7340032, 0x7f5000a00000, stack_id=2))
        for i, (api, kind, free_api) in enumerate((("cudaMalloc", "device", "cudaFree"),
                                                   ("cudaMallocHost", "pinned_host", "cudaFreeHost"),
                                                   ("cudaMallocManaged", "managed", "cudaFree"),
                                                   ("cudaMallocAsync", "pool", "cudaFreeAsync"))):
            ev.alloc(0.4 + i / 10.0, api, kind, MiB, 0x7f6000000000 + i * 0x1000000, stack_id=3)
            ev.free(0.45 + i / 10.0, free_api, kind, 0x7f6000000000 + i * 0x1000000, MiB, stack_id=3)
        ev.alloc(0.9, "cudaMalloc", "device", 1 << 50, 0, stack_id=3, result=2)
        leaks = [{"device": 0, "kind": "device", "bytes": 8 * MiB, "count": 2, "stack_id": 1, "stack": s_w},
                 {"device": 0, "kind": "device", "bytes": 7 * MiB, "count": 1, "stack_id": 2, "stack": s_s}]
        ooms = [{"seq": 12, "requested_bytes": 1 << 50, "error": "CUDA_ERROR_OUT_OF_MEMORY", "error_code": 2,
                 "api": "cudaMalloc", "stack_id": 3, "stack": s_pf, "live_by_stack": []}]
        self.trace("leaky_shared", 11, ev, {}, leaks=leaks, ooms=ooms,
                   peaks=[{"device": 0, "kind": "pool", "top": [{"stack_id": 3, "stack": s_pf}]}])

    # 1 -------------------------------------------------------------------------------------------------------
    def pinned_register(self):
        self.rcs.update(pinned_register_plain=0, pinned_register_traced=0)
        hs = {"allocations.peak": 5, "allocated_bytes.peak": 34603008, "active_requests.peak": 4,
              "active_bytes.peak": 30408704, "num_host_alloc": 5, "num_host_free": 0}
        self.write("pinned_register_truth.json", truth(20, host_memory_stats=hs))
        self.write("pinned_register_plain_truth.json", truth(21, host_memory_stats=hs))
        stack = [nat("cudaHostRegister", "/venv/libcudart.so.13"), TORCH_PIN,
                 py("main", SCRIPTS + "pinned_register.py", 50)]
        ev = Events()
        for i, size in enumerate((MiB, 4 * MiB, 8 * MiB, 16 * MiB, 4 * MiB)):
            ev.alloc(0.1 * (i + 1), "cudaHostRegister", "registered_host", size, 0x10000000 * (i + 1), stack_id=1,
                     device=-1)
        self.trace("pinned_register", 20, ev, {1: stack})

    # 7a ------------------------------------------------------------------------------------------------------
    def story_oom(self):
        self.rcs.update(story_oom_traced=0)
        self.write("story_oom_truth.json", truth(
            30, script={"basename": "story_oom.py", "file": SCRIPTS + "story_oom.py"}, validation_line=62,
            train_line=50, output_bytes=2 * 1024 * MiB, outputs_kept=69, last_reserved_before_oom=148 * 1024 * MiB,
            oom={"step": 69, "message": "CUDA out of memory."}))
        stack = c10_stack(LINEAR, py("main", SCRIPTS + "story_oom.py", 62))
        uf = {"kind": "python", "function": "main", "file": SCRIPTS + "story_oom.py", "line": 62}
        self.write("story_oom_oom_user.json", {"oom_count": 2, "ooms": [
            {"seq": 80, "requested_bytes": 2 * 1024 * MiB, "api": "cudaMalloc", "error": "CUDA_ERROR_OUT_OF_MEMORY",
             "error_code": 2, "device": 0, "free_bytes": MiB, "total_bytes": 150 * 1024 * MiB,
             "live_bytes": 149 * 1024 * MiB, "thread": "python3", "stack_id": 2, "stack": stack, "user_frame": uf,
             "live_by_stack": [{"bytes": 138 * 1024 * MiB, "count": 69, "user_frame": uf, "stacks": 1}]}]})
        ev = Events().alloc(1, "cudaMalloc", "device", 2 * 1024 * MiB, 0x7f7000000000, stack_id=2)
        ev.alloc(2, "cudaMalloc", "device", 2 * 1024 * MiB, 0, stack_id=2, result=2)
        self.trace("story_oom", 30, ev, {2: stack})

    # 7c ------------------------------------------------------------------------------------------------------
    def story_leak(self):
        self.rcs.update(story_leak_traced=0)
        steps = [{"label": "before_loop", "step": -1, "mono_ns": sec(1.5), "memory_allocated": 8 * MiB,
                  "memory_reserved": 20 * MiB}]
        for k in range(3):
            steps.append({"label": "step_%d" % k, "step": k, "mono_ns": sec(2.5 + k),
                          "memory_allocated": (8 + 17 * (k + 1)) * MiB, "memory_reserved": (20 + 20 * (k + 1)) * MiB})
        self.write("story_leak_truth.json", truth(40, script={"basename": "story_leak.py"}, forward_line=47,
                                                  append_line=48, steps=steps))
        model_stack = c10_stack(py("main", SCRIPTS + "story_leak.py", 39))
        fwd_stack = c10_stack(LINEAR, py("main", SCRIPTS + "story_leak.py", 47))
        ev = Events().alloc(1, "cudaMalloc", "device", 20 * MiB, 0x7f8000000000, stack_id=10)
        for k in range(3):
            ev.alloc(2 + k, "cudaMalloc", "device", 20 * MiB, 0x7f8100000000 + k * 0x10000000, stack_id=11)
        self.trace("story_leak", 40, ev, {10: model_stack, 11: fwd_stack})
        self.write("story_leak_leaks_user.json", {"leaks": [
            {"device": 0, "kind": "device", "bytes": 60 * MiB, "count": 3, "stack_id": 11, "stack": fwd_stack,
             "stacks": 1, "user_frame": {"kind": "python", "function": "main", "file": SCRIPTS + "story_leak.py",
                                         "line": 47}},
            {"device": 0, "kind": "device", "bytes": 20 * MiB, "count": 1, "stack_id": 10, "stack": model_stack,
             "stacks": 1, "user_frame": {"kind": "python", "function": "main", "file": SCRIPTS + "story_leak.py",
                                         "line": 39}}]})

    # 7b and 6 ------------------------------------------------------------------------------------------------
    def dataloader(self):
        self.rcs.update(dataloader_plain=0, dataloader_traced=0, dataloader_fork_traced=0)
        common = {"checksum": 123456.789, "checksum_repr": "123456.789", "index_sum": 8128, "batches": 16}
        hs = {"allocated_bytes.peak": 32 * MiB, "active_bytes.peak": 32 * MiB, "num_host_alloc": 2}
        self.write("dataloader_plain_truth.json", truth(50, host_memory_stats=hs, **common))
        self.write("dataloader_truth.json", truth(51, host_memory_stats=hs, **common))
        self.write("dataloader_fork_truth.json", truth(52, host_memory_stats=hs, **common))
        pin_file = SITE + "torch/utils/data/_utils/pin_memory.py"
        stack = [nat("cudaHostAlloc", "/venv/libcudart.so.13"), TORCH_PIN, py("pin_memory", pin_file, 70),
                 py("_pin_memory_loop", pin_file, 50), py("Thread.run", "/usr/lib/python3.12/threading.py", 1010)]
        ev = (Events().alloc(1, "cudaHostAlloc", "pinned_host", 16 * MiB, 0x300000000, stack_id=5, device=-1,
                             thread="pt_data_pin")
              .alloc(1.1, "cudaHostAlloc", "pinned_host", 16 * MiB, 0x310000000, stack_id=5, device=-1,
                     thread="pt_data_pin"))
        self.trace("dataloader", 51, ev, {5: stack})
        self.write("dataloader_pinned_user.json", {"pinned_spikes": [
            {"rise_bytes": 32 * MiB, "thread": "pt_data_pin", "stack_id": 5, "stack": stack}]})
        self.trace("dataloader_fork", 52, Events(), {})
        self.write("dataloader_fork_traced.out", "dataloader_pin: 16 batches (16 pinned), checksum 123456.789\n")
        self.write("dataloader_fork_child0_summary.json", summary(60, {}, forked_child=True))

    # 4 -------------------------------------------------------------------------------------------------------
    def ddp(self):
        self.rcs.update(ddp_traced=0)
        nccl = nat("ncclCommInitRank", SITE + "nvidia/nccl/lib/libnccl.so.2")
        for rank in (0, 1):
            self.write("ddp_truth.%d.json" % rank, truth(70 + rank, rank=rank, local_rank=rank, device=rank,
                                                         memory_stats={"reserved_bytes.all.peak": 44 * MiB}))
            ev = (Events().alloc(1, "cudaMalloc", "device", 20 * MiB, 0x7f9000000000, stack_id=1, device=rank)
                  .alloc(2, "cudaMalloc", "device", 4 * MiB, 0x7f9100000000, stack_id=1, device=rank)
                  .alloc(3, "cudaMalloc", "device", 20 * MiB, 0x7f9200000000, stack_id=1, device=rank)
                  .alloc(4, "cuMemCreate", "vmm_physical", 32 * MiB, 0x5, stack_id=2, device=rank))
            self.trace("ddp_r%d" % rank, 70 + rank, ev, {1: c10_stack(), 2: [CUDA, nccl]}, rank=rank,
                       owners=[{"device": rank, "owner": "pytorch", "bytes_allocated": 44 * MiB},
                               {"device": rank, "owner": "nccl", "bytes_allocated": 32 * MiB}])
        self.write("ddp_ranks.json", {"schema_version": 2, "ranks": [
            {"path": "run.0.pb", "rank": 0, "local_rank": 0, "world_size": 2, "pid": 70, "devices": []},
            {"path": "run.1.pb", "rank": 1, "local_rank": 1, "world_size": 2, "pid": 71, "devices": []}],
            "spread": {"device_peak_max": 1, "device_peak_min": 1, "max_over_min": 1.0}})

    # 5 -------------------------------------------------------------------------------------------------------
    def profiler(self):
        self.rcs.update(profiler_plain=0, profiler_traced=0)
        self.write("profiler_plain_truth.json", truth(80, profiler={"cuda_device_events": 42}))
        self.write("profiler_truth.json", truth(81, profiler={"cuda_device_events": 42}))
        self.trace("profiler", 81, Events(), {})

    def cupti(self):
        for name, pid in (("cupti_torch", 90), ("cupti_cupy", 91)):
            self.rcs["%s_traced" % name] = 0
            self.write("%s_traced.out" % name, "ok\n")
            self.trace(name, pid, Events().alloc(1, "cudaMalloc", "device", MiB, 0x7fa000000000), {},
                       cupti_enabled=True)

    # 2 -------------------------------------------------------------------------------------------------------
    def graphs_compile(self):
        self.rcs.update(graphs_compile_plain=0, graphs_compile_traced=0)
        phases = {
            "graphs": {"start": {"label": "graphs_start", "mono_ns": sec(0.5), "memory_reserved": 0},
                       "end": {"label": "graphs_end", "mono_ns": sec(3.5), "memory_reserved": 60 * MiB,
                               "stats": {"reserved_bytes.all.peak": 60 * MiB}},
                       "graph_vs_eager_max_abs_diff": 0.0},
            "compile": {"start": {"label": "compile_start", "mono_ns": sec(4.5), "memory_reserved": 60 * MiB},
                        "end": {"label": "compile_end", "mono_ns": sec(8.5), "memory_reserved": 100 * MiB,
                                "stats": {"reserved_bytes.all.peak": 100 * MiB}},
                        "losses": [1.0], "seconds": 3.0}}
        self.write("graphs_compile_truth.json", truth(100, phases=phases))
        ev = (Events().alloc(1, "cudaMalloc", "device", 20 * MiB, 0x7fb000000000, stack_id=1)
              .alloc(2, "cudaMalloc", "device", 20 * MiB, 0x7fb100000000, stack_id=1)
              .alloc(3, "cudaMalloc", "device", 20 * MiB, 0x7fb200000000, stack_id=1)
              .alloc(3.2, "cuMemAlloc", "device", 64 * MiB, 0x7fbf00000000, stack_id=2)  # cuBLAS: not c10
              .alloc(5, "cudaMalloc", "device", 40 * MiB, 0x7fb300000000, stack_id=1))
        self.trace("graphs_compile", 100, ev, {1: c10_stack(), 2: [CUDA, nat("cublasCreate_v2", "libcublas.so.13")]})

    # 7d ------------------------------------------------------------------------------------------------------
    def cost(self):
        self.rcs.update(cost_plain=0, cost_nopy_traced=0, cost_py_traced=0)
        for name, ns in (("cost_plain", 5000.0), ("cost_nopy", 6000.0), ("cost_py", 9000.0)):
            self.write("%s_truth.json" % name, truth(110, n=4, warmup=1, elapsed_ns=int(ns * 8),
                                                      ns_per_event=ns))
            if name != "cost_plain":
                ev = Events()
                for i in range(5):
                    ev.alloc(1 + i / 10.0, "cudaMalloc", "device", 256 * 1024, 0x7fc000000000, stack_id=1)
                    ev.free(1.05 + i / 10.0, "cudaFree", "device", 0x7fc000000000, 256 * 1024, stack_id=1)
                self.trace(name, 110, ev, {1: c10_stack()})


# ----------------------------------------------------------------------------------------------------------------


def rows(directory, only=None):
    """{row name: (status, cumemtrace cell)} and the exit status of check.py on the directory."""
    md = os.path.join(directory, "rows.md")
    argv = ["--dir", directory, "--md", md, "--print", "table"]
    if only:
        argv += ["--only"] + list(only)
    with contextlib.redirect_stdout(io.StringIO()):
        status = check.main(argv)
    out = {}
    with open(md) as f:
        for line in f:
            if line.startswith("| ") and not line.startswith("| row ") and not line.startswith("|---"):
                cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
                out[cells[0]] = (cells[-1], cells[2])
    return out, status


class CheckTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rows-check-")
        self.fx = Fixture(self.dir)
        self.fx.build()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def status(self, table, prefix):
        hits = [v[0] for k, v in table.items() if k.startswith(prefix)]
        self.assertEqual(len(hits), 1, "rows starting with %r: %s" % (prefix, sorted(table)))
        return hits[0]

    def test_everything_holds(self):
        table, status = rows(self.dir)
        bad = {k: v for k, v in table.items() if v[0] not in ("PASS", "INFO", "SKIP")}
        self.assertEqual(bad, {})
        self.assertEqual(status, 0)
        skips = sorted(k for k, v in table.items() if v[0] == "SKIP")
        self.assertEqual(skips, ["7c slow leak: the group's `growth`"])
        for prefix in ("3a driver API: every ledger allocation", "3a driver API: live at the end",
                       "3b leaky (cudart shared): leaks from leak_*", "1 pinned cudaHostRegister: registered_host",
                       "7a validation OOM: first failure's user frame", "7c slow leak: top leak group",
                       "7c slow leak: growth of the group's stacks", "7b pinned spike: largest spike",
                       "6 follow-fork: checksum", "4 DDP 2 ranks: rank 1 caching-allocator peak",
                       "4 DDP 2 ranks: rank 0 owner nccl", "5a torch.profiler beside the preload: CUDA device events, "
                       "traced vs untraced", "5b CUPTI, CuPy: trailer cupti_only_events",
                       "2 CUDA graphs + torch.compile: compile phase", "7d cost per event: traced, Python frames on, "
                       "events recorded"):
            self.assertEqual(self.status(table, prefix), "PASS", prefix)
        self.assertIn("+4.00 µs/event", table["7d cost per event: traced, Python frames on"][1])

    def test_wrong_validation_line_fails(self):
        self.fx.edit("story_oom_truth.json", lambda d: d.update(validation_line=61))
        table, status = rows(self.dir, ["story_oom"])
        self.assertEqual(self.status(table, "7a validation OOM: first failure's user frame"), "FAIL")
        self.assertEqual(status, 1)

    def test_user_frame_computed_from_stack_when_absent(self):
        self.fx.edit("story_oom_oom_user.json", lambda d: d["ooms"][0].pop("user_frame"))
        table, _ = rows(self.dir, ["story_oom"])
        self.assertEqual(self.status(table, "7a validation OOM: first failure's user frame"), "PASS")

    def test_leak_group_on_another_line_fails(self):
        def move(d):
            d["leaks"][0]["user_frame"]["line"] = 39
        self.fx.edit("story_leak_leaks_user.json", move)
        table, _ = rows(self.dir, ["story_leak"])
        self.assertEqual(self.status(table, "7c slow leak: top leak group"), "FAIL")

    def test_growth_key_is_checked_when_present(self):
        self.fx.edit("story_leak_leaks_user.json", lambda d: d["leaks"][0].update(growth=[10, 20, 30]))
        table, _ = rows(self.dir, ["story_leak"])
        self.assertEqual(self.status(table, "7c slow leak: the group's `growth`"), "PASS")
        self.fx.edit("story_leak_leaks_user.json", lambda d: d["leaks"][0].update(growth=[30, 20, 10]))
        table, _ = rows(self.dir, ["story_leak"])
        self.assertEqual(self.status(table, "7c slow leak: the group's `growth`"), "FAIL")

    def test_missed_segment_breaks_reserved_at_steps(self):
        self.fx.edit("story_leak_events.json", lambda d: d["events"].pop())
        table, _ = rows(self.dir, ["story_leak"])
        self.assertEqual(self.status(table, "7c slow leak: caching-allocator live bytes at each step"), "FAIL")

    def test_ledger_free_missing_from_trace_fails(self):
        self.fx.edit("driver_api_events.json", lambda d: d["events"].pop(15))  # cuMemRelease
        table, _ = rows(self.dir, ["driver_api"])
        self.assertEqual(self.status(table, "3a driver API: every ledger free"), "FAIL")
        self.assertEqual(self.status(table, "3a driver API: every ledger allocation"), "PASS")

    def test_extra_event_fails(self):
        def add(d):
            d["events"].append(dict(d["events"][1], seq=99, address="0x7f0000f00000"))
        self.fx.edit("driver_api_events.json", add)
        table, _ = rows(self.dir, ["driver_api"])
        self.assertEqual(self.status(table, "3a driver API: events the program did not make"), "FAIL")
        self.assertEqual(self.status(table, "3a driver API: live at the end"), "FAIL")

    def test_registered_peak_against_allocated_bytes(self):
        self.fx.edit("pinned_register_truth.json",
                     lambda d: d["host_memory_stats"].update({"allocated_bytes.peak": 30408704}))
        table, _ = rows(self.dir, ["pinned_register"])
        self.assertEqual(self.status(table, "1 pinned cudaHostRegister: registered_host peak"), "FAIL")

    def test_one_gpu_skips_ddp(self):
        self.fx.write("gpus.txt", "1\n")
        table, status = rows(self.dir, ["ddp"])
        self.assertEqual(list(table.values()), [("SKIP", "1 GPU(s)")])
        self.assertEqual(status, 0)

    def test_rank_without_nccl_or_with_another_peak_fails(self):
        self.fx.edit("ddp_r1_summary.json", lambda d: d.update(owners=[{"device": 1, "owner": "pytorch"}]))
        self.fx.edit("ddp_truth.0.json", lambda d: d["memory_stats"].update({"reserved_bytes.all.peak": 40 * MiB}))
        table, _ = rows(self.dir, ["ddp"])
        self.assertEqual(self.status(table, "4 DDP 2 ranks: rank 1 owner nccl"), "FAIL")
        self.assertEqual(self.status(table, "4 DDP 2 ranks: rank 0 caching-allocator peak"), "FAIL")
        self.assertEqual(self.status(table, "4 DDP 2 ranks: rank 1 caching-allocator peak"), "PASS")

    def test_cupti_only_events_fail_and_are_listed(self):
        def cupti_only(d):
            d["events"][0]["cupti_only"] = True
        self.fx.edit("cupti_torch_events.json", cupti_only)
        self.fx.edit("cupti_torch_summary.json", lambda d: d["health"].update(cupti_only_events=1))
        self.fx.edit("cupti_cupy_summary.json", lambda d: d["process"].update(cupti_enabled=False))
        table, _ = rows(self.dir, ["cupti"])
        self.assertEqual(self.status(table, "5b CUPTI, PyTorch training step: trailer cupti_only_events"), "FAIL")
        self.assertEqual(self.status(table, "5b CUPTI, CuPy: header cupti_enabled"), "FAIL")
        with open(os.path.join(self.dir, "rows.md")) as f:
            self.assertIn("CUPTI-only events by api: {'cudaMalloc': 1}", f.read())

    def test_checksum_difference_fails_follow_fork(self):
        self.fx.edit("dataloader_fork_truth.json", lambda d: d.update(checksum=123456.7891))
        table, _ = rows(self.dir, ["dataloader"])
        self.assertEqual(self.status(table, "6 follow-fork: checksum"), "FAIL")
        self.assertEqual(self.status(table, "7b pinned spike: checksum"), "PASS")

    def test_stacks_of_another_trace_are_not_used(self):
        # dataloader_fork's reports name stack 5 too, with other frames: dataloader's own pinned blocks must still
        # be PyTorch's (the trace name dataloader is a prefix of dataloader_fork).
        other = [nat("cudaHostAlloc", "/venv/libcudart.so.13"), nat("main", "/usr/bin/python3")]
        self.fx.write("dataloader_fork_summary.json", summary(52, {5: other}))
        table, _ = rows(self.dir, ["dataloader"])
        self.assertEqual(self.status(table, "7b pinned spike: CachingHostAllocator pinned peak"), "PASS")

    def test_spike_without_python_frames_fails(self):
        def strip(d):
            d["pinned_spikes"][0]["stack"] = d["pinned_spikes"][0]["stack"][:2]
        self.fx.edit("dataloader_pinned_user.json", strip)
        table, _ = rows(self.dir, ["dataloader"])
        self.assertEqual(self.status(table, "7b pinned spike: largest spike"), "FAIL")

    def test_dropped_events_fail_health(self):
        self.fx.edit("profiler_summary.json", lambda d: d["health"].update(dropped_events=3))
        table, _ = rows(self.dir, ["profiler"])
        self.assertEqual(self.status(table, "5a torch.profiler beside the preload: tool health"), "FAIL")

    def test_compile_window_peak(self):
        # A transient 30 MiB segment inside the compile phase, freed before its end: the phase's peak rises.
        def transient(d):
            rows_ = d["events"]
            rows_.append(dict(rows_[0], seq=6, time_ns=6 * 10**9, address="0x7fb400000000", size=30 * MiB))
            rows_.append(dict(rows_[0], seq=7, time_ns=7 * 10**9, op="free", api="cudaFree",
                              address="0x7fb400000000", size=30 * MiB))
        self.fx.edit("graphs_compile_events.json", transient)
        table, _ = rows(self.dir, ["graphs_compile"])
        self.assertEqual(self.status(table, "2 CUDA graphs + torch.compile: compile phase"), "FAIL")
        self.fx.edit("graphs_compile_truth.json", lambda d: d["phases"]["compile"]["end"]["stats"].update(
            {"reserved_bytes.all.peak": 130 * MiB}))
        table, _ = rows(self.dir, ["graphs_compile"])
        self.assertEqual(self.status(table, "2 CUDA graphs + torch.compile: compile phase"), "PASS")
        self.assertEqual(self.status(table, "2 CUDA graphs + torch.compile: graphs phase"), "PASS")

    def test_missing_input_is_missing(self):
        os.remove(os.path.join(self.dir, "story_leak_leaks_user.json"))
        table, status = rows(self.dir, ["story_leak"])
        self.assertEqual(table["7c slow leak"][0], "MISSING")
        self.assertEqual(status, 1)

    def test_sanitizer_disagreeing_with_trace_fails(self):
        def one_less(d):
            d["leaks"] = d["leaks"][:1]
        self.fx.edit("leaky_shared_summary.json", one_less)
        table, _ = rows(self.dir, ["leaky_shared"])
        self.assertEqual(self.status(table, "3b leaky (cudart shared): leaks from leak_*"), "FAIL")
        self.assertEqual(self.status(table, "3b leaky (cudart shared): properly_freed"), "PASS")

    def test_marker_lines_name_the_story_lines(self):
        import rows_common
        here = os.path.dirname(os.path.abspath(__file__))
        for script, tag, code in (("story_oom.py", "validation-output", "outputs.append(model(val_x))"),
                                  ("story_oom.py", "train-forward", "loss = model(x)"),
                                  ("story_leak.py", "leak-forward", "loss = model("),
                                  ("story_leak.py", "leak-append", "losses.append(loss)")):
            path = os.path.join(here, script)
            line = rows_common.marker_lines(path)[tag]
            with open(path) as f:
                self.assertIn(code, f.read().splitlines()[line - 1], (script, tag, line))

    def test_ledger_parser(self):
        allocs, frees, planted = check.parse_ledger(
            "LEDGER alloc cuMemCreate vmm_physical 0 2097152 0x1\nnoise\nLEDGER free cuMemRelease 0x1\n"
            "PLANTED leak_driver_buffer 9437184 0x7f0000000000\n")
        self.assertEqual(allocs, [("cuMemCreate", "vmm_physical", 0, 2097152, 1)])
        self.assertEqual(frees, [("cuMemRelease", 1)])
        self.assertEqual(planted, [("leak_driver_buffer", 9437184, 0x7f0000000000)])


@unittest.skipUnless(os.environ.get("CUMEM_ANALYZE"), "CUMEM_ANALYZE (the cumem-analyze to run) is not set")
class RealAnalyzerTest(unittest.TestCase):
    """check.py's reading of the real analyzer's JSON, on the H200 trace of validation run 1 (examples/): the
    caching-allocator and pinned peaks it computes must be PyTorch's own figures from that run, recorded in
    docs/validation.md (reserved_bytes.all.peak 547356672, host allocated_bytes.peak 83927044)."""

    def test_run_1_figures_from_the_example_trace(self):
        import subprocess
        analyzer = os.environ["CUMEM_ANALYZE"]
        pb = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(check.HERE))), "examples",
                          "torch_train_pinned_h200.pb")
        work = tempfile.mkdtemp(prefix="rows-real-")
        try:
            usage = subprocess.run([analyzer, "--help"], capture_output=True, text=True).stdout
            group = ["--group-by", "stack"] if "--group-by" in usage else []
            for what, extra in (("summary", group + ["--top", "100000"]), ("events", [])):
                with open(os.path.join(work, "tt_%s.json" % what), "w") as f:
                    subprocess.run([analyzer, what, pb, "--json"] + extra, stdout=f, check=True)
            trace = check.load_trace(work, "tt")
            self.assertEqual(trace.replay(check.is_c10_device)["peak"], 547356672)
            torch_pinned = trace.replay(lambda e: e.kind == "pinned_host" and check.has_module(
                e.stack, check.compare.TORCH_CUDA))
            self.assertEqual(torch_pinned["peak"], 83927044)
            table = check.Table()
            check.health_rows(table, "example", trace)
            self.assertEqual(table.rows[0][4], "PASS")
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
