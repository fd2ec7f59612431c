"""Pinned host memory: PyTorch's CachingHostAllocator (cudaHostAlloc, and cudaHostRegister mode) against
host_memory_stats, the thread that pins (`pt_data_pin`), and the pinned report's spikes with their DataLoader
frames (story 3 / row 7b). Workloads: torch_train_pinned.py, pinned_register.py, dataloader_pin.py."""
from tracekit import (fmt_bytes, has_module, host_stats_key, is_torch_pinned, norm_stack, python_frames,
                      same_checksum, to_int)


def test_caching_host_allocator_peak(suite, row):
    """CachingHostAllocator pinned blocks: peak live bytes == host_memory_stats"""
    run = suite.run("torch_train")
    hs = run.truth.get("host_memory_stats") or {}
    key = host_stats_key(hs)
    oracle = to_int(hs.get(key))
    peak = run.trace.replay(is_torch_pinned)["peak"]
    row("host_memory_stats[%s] = %s" % (key, fmt_bytes(oracle)), fmt_bytes(peak), "==")
    assert oracle is not None and peak == oracle, "host_memory_stats %s = %s, trace %s" % (key, oracle, peak)


def test_caching_host_allocator_block_count(suite, row):
    """CachingHostAllocator pinned blocks: number of cudaHostAlloc == num_host_alloc"""
    run = suite.run("torch_train")
    oracle = to_int((run.truth.get("host_memory_stats") or {}).get("num_host_alloc"))
    n = len(run.trace.allocs(is_torch_pinned))
    row("num_host_alloc = %s" % oracle, n, "==")
    assert oracle is not None and n == oracle, "num_host_alloc %s, trace %d" % (oracle, n)


def test_pinning_thread(suite, row):
    """thread of the pinned allocations: contains pt_data_pin"""
    names = sorted(set(e.thread_name for e in suite.run("torch_train").trace.allocs(is_torch_pinned)))
    row("DataLoader pins on pt_data_pin", ", ".join(names) or "-", "contains")
    assert any("pt_data_pin" in n for n in names), names


def test_largest_spike_on_pin_thread(suite, row):
    """analyzer `pinned` report: the largest spike is on pt_data_pin"""
    spikes = suite.run("torch_train").analyze("pinned", "--group-by", "stack", "--top", "100000").get(
        "pinned_spikes") or []
    assert spikes, "the pinned report lists no spike"
    top = max(spikes, key=lambda s: to_int(s.get("rise_bytes"), 0))
    row("on thread pt_data_pin", "+%s on %s" % (fmt_bytes(to_int(top.get("rise_bytes"))), top.get("thread")),
        "thread matches")
    assert "pt_data_pin" in str(top.get("thread")), top


def test_host_register_peak(suite, row):
    """cudaHostRegister mode: registered_host peak == host_memory_stats allocated_bytes.peak"""
    run = suite.run("pinned_register")
    hs = run.truth.get("host_memory_stats") or {}
    key = host_stats_key(hs)
    oracle = to_int(hs.get(key))
    peak = run.trace.replay(lambda e: e.kind == "registered_host")["peak"]
    row("host_memory_stats %s = %s" % (key, fmt_bytes(oracle)), fmt_bytes(peak), "==")
    assert oracle and peak == oracle, "host_memory_stats %s = %s, registered peak %s" % (key, oracle, peak)


def test_host_register_count(suite, row):
    """cudaHostRegister mode: number of cudaHostRegister == num_host_alloc"""
    run = suite.run("pinned_register")
    oracle = to_int((run.truth.get("host_memory_stats") or {}).get("num_host_alloc"))
    n = len(run.trace.allocs(lambda e: e.kind == "registered_host"))
    row("num_host_alloc = %s" % oracle, n, "==")
    assert oracle is not None and n == oracle, "num_host_alloc %s, cudaHostRegister %d" % (oracle, n)


def test_dataloader_checksum(suite, row):
    """pinned spike story: the traced DataLoader computes the untraced checksum"""
    plain, traced = suite.run("dataloader", traced=False).truth, suite.run("dataloader").truth
    assert plain and traced, "a run wrote no truth"
    row(plain.get("checksum_repr"), traced.get("checksum_repr"), "==")
    assert same_checksum(plain, traced), "untraced %s, traced %s" % (plain, traced)


def test_spike_has_dataloader_pin_memory_frames(suite, row):
    """pinned spike story: the largest spike's stack has Python frames of torch/utils/data/ named pin_memory"""
    spikes = suite.run("dataloader").report("pinned").get("pinned_spikes") or []
    assert spikes, "the pinned report lists no spike"
    top = max(spikes, key=lambda s: to_int(s.get("rise_bytes"), 0))
    py = python_frames(norm_stack(top.get("stack")))
    in_data = [f for f in py if "torch/utils/data/" in str(f.file or "")]
    pin = sorted(set(f.function for f in py if "pin_memory" in f.function))
    row("files under torch/utils/data/, functions with pin_memory",
        "%d frames under torch/utils/data/, pin_memory functions %s" % (len(in_data), pin), "both present")
    assert in_data and pin, "largest spike's Python frames: %s" % [f.short() for f in py]


def test_dataloader_pinned_peak(suite, row):
    """pinned spike story: CachingHostAllocator pinned peak == host_memory_stats"""
    run = suite.run("dataloader")
    hs = run.truth.get("host_memory_stats") or {}
    key = host_stats_key(hs)
    oracle = to_int(hs.get(key))
    peak = run.trace.replay(is_torch_pinned)["peak"]
    row("host_memory_stats %s = %s" % (key, fmt_bytes(oracle)), fmt_bytes(peak), "==")
    assert oracle is not None and peak == oracle, "host_memory_stats %s = %s, trace %s" % (key, oracle, peak)


def test_torch_pinned_blocks_have_torch_stacks(suite, row):
    """every pinned block of the training run resolves to a stack (through libtorch_cuda or libc10_cuda)"""
    run = suite.run("torch_train")
    pinned = run.trace.allocs(lambda e: e.kind == "pinned_host")
    torch_owned = [e for e in pinned if has_module(e.stack, "libtorch_cuda") or has_module(e.stack, "libc10_cuda")]
    row("pinned blocks through PyTorch", "%d of %d" % (len(torch_owned), len(pinned)), "> 0")
    assert torch_owned, "no pinned block through PyTorch's modules"
