"""The JAX workload behind jax_prealloc.py and jax_noprealloc.py (they differ only in the environment the runner
gives them: XLA_PYTHON_CLIENT_MEM_FRACTION=0.2 with preallocation, XLA_PYTHON_CLIENT_PREALLOCATE=false without).

XLA reaches the driver through dlopen + dlsym (no runtime API), allocates device memory for its BFC allocator
(cuMemAlloc or cuMemCreate, depending on the XLA version and settings) and pinned host staging buffers with
cuMemHostAlloc (docs/design.md). the suite requires the peak of live device-side bytes in the trace to be >= the
allocator's own peak_bytes_in_use from jax.devices()[0].memory_stats(), and lists the driver APIs used and the
modules that asked.

Fixed work, a few hundred MB: a (8192 x 4096 f32, 128 MiB) random, b (4096 x 4096, 64 MiB) ones,
f(a, b) = (tanh(a @ b) + 1, sum) jitted; then a2 (16384 x 4096, 256 MiB), f(a2, b) (a second compilation) and a
small device-to-host copy. Exit 3 when JAX has no GPU device.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import coverage_common as cc  # noqa: E402


def main(workload):
    path = cc.out_path("%s_truth.json" % workload)
    import jax  # noqa: E402  (imported here so that T0 is before it)
    import jax.numpy as jnp
    import numpy as np

    devices = jax.devices()
    dev = devices[0]
    if dev.platform not in ("gpu", "cuda"):
        print("%s: JAX has no GPU device (default backend %s, devices %s)" % (workload, jax.default_backend(),
                                                                             devices), file=sys.stderr)
        return 3
    checkpoints = [cc.checkpoint("backend_up", memory_stats=cc.safe(dev.memory_stats))]

    @jax.jit
    def f(x, w):
        y = jnp.tanh(x @ w)
        return y + 1.0, y.sum()

    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (8192, 4096), dtype=jnp.float32)
    b = jnp.ones((4096, 4096), dtype=jnp.float32)
    out, total = f(a, b)
    out.block_until_ready()
    first_sum = float(np.asarray(total))
    checkpoints.append(cc.checkpoint("first_call", memory_stats=cc.safe(dev.memory_stats)))
    del a, out
    a2 = jax.random.normal(jax.random.PRNGKey(1), (16384, 4096), dtype=jnp.float32)
    out2, total2 = f(a2, b)
    out2.block_until_ready()
    head = np.asarray(out2[:4, :8])
    second_sum = float(np.asarray(total2))
    stats = cc.safe(dev.memory_stats)
    checkpoints.append(cc.checkpoint("second_call", memory_stats=stats))

    truth = cc.base_truth(workload, T0_MONO_NS, T0_UNIX_NS)
    truth.update({
        "jax_version": jax.__version__,
        "jaxlib_version": cc.safe(lambda: __import__("jaxlib").__version__),
        "platform": dev.platform,
        "device_kind": getattr(dev, "device_kind", None),
        "platform_version": cc.safe(lambda: dev.client.platform_version),
        "devices": [str(d) for d in devices],
        "memory_stats": stats,
        "checkpoints": checkpoints,
        "results": {"first_sum": first_sum, "second_sum": second_sum, "head": head.tolist()},
        "live_array_bytes": int(b.nbytes + out2.nbytes + a2.nbytes),
    })
    print("  jax %s on %s: memory_stats %s" % (jax.__version__, truth["device_kind"], stats))
    cc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[2] if len(sys.argv) > 2 else "jax"))
