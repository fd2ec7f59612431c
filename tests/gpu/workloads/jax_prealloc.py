#!/usr/bin/env python3
"""JAX with XLA's default preallocation, limited by the runner to XLA_PYTHON_CLIENT_MEM_FRACTION=0.2 (a fifth of the
GPU, not three quarters). The work and the truth are jax_work.py's. Usage: jax_prealloc.py TRUTH_JSON."""
import sys

import jax_work

if __name__ == "__main__":
    sys.exit(jax_work.main("jax_prealloc"))
