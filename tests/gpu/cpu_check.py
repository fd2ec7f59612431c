#!/usr/bin/env python3
"""What CTest checks of the GPU suite on a machine without a GPU: every module imports and collects (pytest
--collect-only, the GPU itself unused) when pytest is there, else every module compiles; and every workload parses.
Usage: cpu_check.py [PYTHON_WITH_PYTEST]. Exit 0 when all of it holds.
"""
import ast
import glob
import os
import py_compile
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    workloads = sorted(glob.glob(os.path.join(HERE, "workloads", "*.py")))
    for path in workloads:
        with open(path, encoding="utf-8") as f:
            ast.parse(f.read(), path)
    modules = sorted(glob.glob(os.path.join(HERE, "*.py")))
    with tempfile.TemporaryDirectory() as tmp:
        for path in modules:
            py_compile.compile(path, cfile=os.path.join(tmp, "out.pyc"), doraise=True)
    print("%d workloads parse, %d suite files compile" % (len(workloads), len(modules)))
    python = sys.argv[1] if len(sys.argv) > 1 else sys.executable
    has_pytest = subprocess.run([python, "-c", "import pytest"], capture_output=True).returncode == 0
    if not has_pytest:
        print("pytest is not installed for %s: collection not checked (Debian: apt-get install python3-pytest)"
              % python)
        return 0
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([python, "-m", "pytest", "--collect-only", "-q", HERE], capture_output=True, text=True,
                         env=env, cwd=HERE)
    tail = out.stdout.strip().splitlines()[-1:] if out.stdout.strip() else []
    print("\n".join(tail))
    if out.returncode != 0:
        print(out.stdout[-4000:], out.stderr[-2000:])
        return 1
    tests = [line for line in out.stdout.splitlines() if "::" in line]
    modules_seen = sorted(set(line.split("::")[0] for line in tests))
    expected = sorted(os.path.basename(p) for p in glob.glob(os.path.join(HERE, "test_*.py")))
    missing = [m for m in expected if m not in [os.path.basename(s) for s in modules_seen]]
    if missing:
        print("modules with no collected test: %s" % missing)
        return 1
    print("%d tests collected in %d modules" % (len(tests), len(modules_seen)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
