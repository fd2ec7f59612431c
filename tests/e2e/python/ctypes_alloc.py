"""A Python program that reaches the (fake) CUDA driver through ctypes, the way PyTorch reaches it from Python: the
call releases the GIL, so cumemtrace must read this thread's frames without it.

Every allocation is made on a line that ends with a `# LINE:<tag>` marker; the test finds the line numbers from the
markers in this file (its oracle), not from anything cumemtrace wrote. Prints "ok" at the end.
"""
import ctypes
import os
import sys
import threading

cuda = ctypes.CDLL("libcuda.so.1")  # CDLL calls release the GIL
assert cuda.cuInit(0) == 0


class Model:
    def allocate(self, size):
        pointer = ctypes.c_uint64()
        assert cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size)) == 0  # LINE:method
        return pointer.value


def inner(size):
    pointer = ctypes.c_uint64()
    assert cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size)) == 0  # LINE:inner
    return pointer.value


def outer(size):
    return inner(size)  # LINE:outer


def churn():
    """Allocations from alternating lines and depths under the same outer frames: each stack shares its outer frames
    with the one before it and differs inside (cumemtrace remembers a thread's last stack)."""
    pointers = []
    for i in range(6):
        if i % 2 == 0:
            pointers.append(inner((5 << 20) + i))  # LINE:churn_even
        else:
            pointers.append(outer((5 << 20) + i))  # LINE:churn_odd
    return pointers


def generator(size):
    yield inner(size)  # LINE:generator


async def coroutine(size):
    return inner(size)  # LINE:coroutine


def run_coroutine(size):
    """Drives the coroutine by hand (no event loop): its frame runs on this thread's chain."""
    try:
        coroutine(size).send(None)  # LINE:run_coroutine
    except StopIteration as done:
        return done.value
    raise AssertionError("the coroutine did not finish")


def worker(results):
    results.append(outer(3 << 20))  # LINE:worker


def main():
    first = outer(1 << 20)  # LINE:main_outer
    second = Model().allocate(2 << 20)  # LINE:main_method
    results = []
    thread = threading.Thread(target=worker, args=(results,), name="py-worker")
    thread.start()
    thread.join()
    # A thread that never ran Python (the library creates it), like PyTorch's autograd engine threads.
    plugin = ctypes.CDLL(os.path.join(sys.argv[1], "libe2e_native_thread_plugin.so"))
    plugin.AllocateOnNativeThread.restype = ctypes.c_ulonglong
    native = plugin.AllocateOnNativeThread(ctypes.c_size_t(4 << 20))
    assert native != 0
    churned = churn()  # LINE:main_churn
    generated = next(generator(6 << 20))  # LINE:main_generator
    awaited = run_coroutine(7 << 20)  # LINE:main_coroutine
    # A C function between two Python frames: map() calls inner from C.
    mapped = list(map(inner, [8 << 20]))[0]  # LINE:main_map
    for pointer in [first, second, results[0], native] + churned + [generated, awaited, mapped]:
        assert cuda.cuMemFree_v2(ctypes.c_uint64(pointer)) == 0
    print("ok")


main()  # LINE:module
