"""A PyTorch-like tensor allocation from Python: through ctypes (the GIL released, as in PyTorch) into the fake
libc10_cuda.so (tests/fakes), with 60 native frames between the call and the caching allocator (PyTorch's
dispatcher puts 30 to 40 there). The block is allocated on the line marked `# LINE:forward`; the test reads the line
numbers from the markers in this file. Prints "ok" at the end.

Usage: torch_blocks.py FAKE_TORCH_DIR [BLOCKS]   (BLOCKS blocks one after another, default 1)
"""
import ctypes
import os
import sys

assert ctypes.CDLL("libcuda.so.1").cuInit(0) == 0
c10 = ctypes.CDLL(os.path.join(sys.argv[1], "libc10_cuda.so"))
c10.fake_torch_init(1)
malloc = c10.fake_torch_malloc_nested
malloc.restype = ctypes.c_void_p
malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
free = c10.fake_torch_free_nested
free.argtypes = [ctypes.c_void_p, ctypes.c_int]


def forward():
    return malloc(3 << 20, 0, 60)  # LINE:forward


def main():
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
        block = forward()  # LINE:main
        assert block
        free(block, 60)
    print("ok")


main()  # LINE:module
