#!/usr/bin/env python3
"""JAX with XLA_PYTHON_CLIENT_PREALLOCATE=false (set by the runner): XLA's allocator grows as the work needs. The
work and the truth are jax_work.py's. Usage: jax_noprealloc.py TRUTH_JSON."""
import sys

import jax_work

if __name__ == "__main__":
    sys.exit(jax_work.main("jax_noprealloc"))
