#!/usr/bin/env python3
"""CuPy: device memory through its MemoryPool and pinned host memory through its PinnedMemoryPool.

CuPy links the CUDA runtime statically and reaches the driver through cuGetProcAddress, so a cudaMalloc interposer
sees nothing of it (docs/design.md). The pool keeps what it got from CUDA until free_all_blocks(): its total_bytes()
is what the driver handed out and still holds (used_bytes() is the part arrays use now). the suite replays the trace
up to this script's checkpoint (time.monotonic_ns(), the trace's clock) and requires the live device bytes whose
stacks pass through a CuPy module to be >= total_bytes(), and, after free_all_blocks(), equal to it (0).

Fixed work, with no kernel launched (nothing to compile: cupy.zeros is a memset, ndarray.set a copy):
device 64 + 128 MiB, free the 64 MiB array (its chunk stays in the pool), 32 MiB more (from that chunk);
pinned 8 + 24 MiB from cupyx.empty_pinned, free the 8 MiB one (back to the pinned pool), 8 MiB again (the same
block, normally). At least 2 pinned blocks (32 MiB) must come from CUDA. Usage: cupy_pool.py TRUTH_JSON.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import coverage_common as cc  # noqa: E402
import cupy  # noqa: E402
import cupyx  # noqa: E402
import numpy  # noqa: E402

MiB = cc.MiB


def pool_state(pool, pinned_pool):
    state = {
        "used_bytes": pool.used_bytes(),
        "total_bytes": pool.total_bytes(),
        "free_bytes": pool.free_bytes(),
        "n_free_blocks": pool.n_free_blocks(),
        "pinned_n_free_blocks": pinned_pool.n_free_blocks(),
    }
    # Newer CuPy versions count pinned bytes too; record them where they exist.
    for name in ("used_bytes", "total_bytes", "free_bytes"):
        fn = getattr(pinned_pool, name, None)
        if callable(fn):
            state["pinned_" + name] = cc.safe(fn)
    return state


def main():
    path = cc.out_path("cupy_pool_truth.json")
    try:
        n_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        print("cupy_pool: no CUDA device: %s" % e, file=sys.stderr)
        return 3
    if n_devices < 1:
        print("cupy_pool: no CUDA device", file=sys.stderr)
        return 3
    cupy.cuda.Device(0).use()
    pool = cupy.get_default_memory_pool()
    pinned_pool = cupy.get_default_pinned_memory_pool()

    a = cupy.zeros(64 * MiB, dtype=cupy.uint8)
    b = cupy.zeros(128 * MiB, dtype=cupy.uint8)
    h1 = cupyx.empty_pinned((8 * MiB,), dtype=numpy.uint8)
    h2 = cupyx.empty_pinned((24 * MiB,), dtype=numpy.uint8)
    h1[:] = 1
    h2[:] = 2
    b[:8 * MiB].set(h1)
    b[8 * MiB:32 * MiB].set(h2)
    del a, h1
    c = cupy.zeros(32 * MiB, dtype=cupy.uint8)
    h3 = cupyx.empty_pinned((8 * MiB,), dtype=numpy.uint8)
    c[:8 * MiB].get(out=h3)
    cupy.cuda.Device(0).synchronize()
    checkpoint = cc.checkpoint("arrays_live", **pool_state(pool, pinned_pool))

    del b, c, h2, h3
    cupy.cuda.Device(0).synchronize()
    pool.free_all_blocks()
    pinned_pool.free_all_blocks()
    cupy.cuda.Device(0).synchronize()
    after = cc.checkpoint("after_free_all_blocks", **pool_state(pool, pinned_pool))

    truth = cc.base_truth("cupy_pool", T0_MONO_NS, T0_UNIX_NS)
    props = cc.safe(lambda: cupy.cuda.runtime.getDeviceProperties(0))
    truth.update({
        "cupy_version": cupy.__version__,
        "cuda_runtime_version": cc.safe(cupy.cuda.runtime.runtimeGetVersion),
        "cuda_driver_version": cc.safe(cupy.cuda.runtime.driverGetVersion),
        "device_name": props.get("name", b"").decode(errors="replace") if isinstance(props, dict) and isinstance(
            props.get("name"), bytes) else (props.get("name") if isinstance(props, dict) else None),
        "device_total_memory": props.get("totalGlobalMem") if isinstance(props, dict) else None,
        "device_requests": [64 * MiB, 128 * MiB, 32 * MiB],
        "pinned_requests": [8 * MiB, 24 * MiB, 8 * MiB],
        "expected_min_pinned_blocks": 2,
        "expected_min_pinned_bytes": 32 * MiB,
        "checkpoint": checkpoint,
        "after_free": after,
        "checkpoints": [checkpoint, after],
    })
    print("  cupy %s: at the checkpoint %s; after free_all_blocks %s" % (cupy.__version__, checkpoint, after))
    cc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
