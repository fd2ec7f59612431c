"""The unwind memo (preload/unwind_memo.h): a stack taken again from the same place reuses the frames found there.
Oracle: libunwind itself. With CUMEMTRACE_UNWIND_MEMO=check the preload unwinds every stack it takes from the memo
as well and counts those that differ; the GPT-2 training of blocks_train.py (Python threads and autograd's engine
thread, whose stacks keep 64 native frames) must take most stacks from the memo and none may differ."""
import re

PATTERN = re.compile(r"unwind memo check: (\d+) stacks remembered, (\d+) taken from the memo, (\d+) unwound, "
                     r"(\d+) memo stacks differed")


def test_remembered_stacks_are_the_unwinders(suite, row):
    """unwind memo: stacks taken from the memo that differ from libunwind's unwind of them == 0 (and most are)"""
    run = suite.run("unwind_memo_check")
    assert run.rc == 0, "blocks_train failed (rc %s):\n%s" % (run.rc, run.output[-3000:])
    found = PATTERN.search(run.output)
    assert found, run.output[-3000:]
    remembered, taken, unwound, differed = (int(g) for g in found.groups())
    row(0, differed, "==")
    assert differed == 0, found.group(0)
    assert remembered > 0 and taken > 10 * unwound, found.group(0)
