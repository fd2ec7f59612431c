"""The preload's own stack walker (preload/fast_unwind.cc) against libunwind, its oracle, on real programs: with
CUMEMTRACE_UNWIND_CHECK=1 every stack is walked both ways and each traced process says at exit how many walks
differed. Relation: 0 differing walks in every process (tolerance zero), and the program exits as it does untraced.
Reported, not tested: how many stacks the walker left to libunwind, and how many frames it took from the thread's
previous walk."""
import re

import pytest

# PyTorch (training with a pinned DataLoader, the caching allocator's blocks, GPT-2, torch.compile with CUDA graphs,
# a DataLoader whose forked workers trace), CuPy, JAX, and CUDA C++ with static and with no cudart.
CHECKED = ("torch_train", "blocks_default", "gpt2_overhead", "graphs_compile", "dataloader_fork", "story_oom",
           "cupy_pool", "jax_prealloc", "leaky", "driver_api")

LINE = re.compile(r"cumemtrace: unwind check: (\d+) stacks, (\d+) walked by libunwind, (\d+) differ from "
                  r"libunwind's walk; (\d+) of (\d+) frames taken from the thread's previous walk")


@pytest.mark.parametrize("name", CHECKED)
def test_walker_agrees_with_libunwind(suite, row, name):
    """the preload's walker == libunwind's unw_backtrace, every stack"""
    run = suite.run(name, check_walkers=True)
    lines = [tuple(int(x) for x in m.groups()) for m in LINE.finditer(run.output)]
    stacks, by_libunwind, differing, reused, walked = (sum(v[i] for v in lines) for i in range(5))
    row("0 differing walks", "%d processes: %d stacks, %d differ; %d walked by libunwind; %d of %d frames from "
        "the previous walk" % (len(lines), stacks, differing, by_libunwind, reused, walked), "== 0")
    assert run.rc == 0, "%s exited %s:\n%s" % (name, run.rc, run.output[-2000:])
    assert lines and stacks > 0, "%s: no unwind check line in its output:\n%s" % (name, run.output[-2000:])
    assert differing == 0, "%s: %d of %d stacks differ from libunwind's" % (name, differing, stacks)
