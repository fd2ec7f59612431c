#!/usr/bin/env python3
"""Compares two cumem-analyze JSON reports member by member, leaving out times (members whose name ends in _ns or
_s, and the trace's own path, size and timing health), and prints every other difference with its path; exit 1
when there is one. For two traces of the same program traced two ways (bench/long_run_size.sh): what the reports
say must not depend on how the trace was written.

Usage: bench/compare_reports.py A.json B.json [--ignore NAME ...]
"""
import json
import sys

# What differs between two runs of one program whatever the trace holds (times, ending in _ns or _s, are left out
# by name below): the process and the trace file.
IGNORED = {"path", "bytes", "pid", "ppid", "tid", "hostname", "flushes", "bytes_written"}


def ignored(name, extra):
    return name in IGNORED or name in extra or name.endswith("_ns") or name.endswith("_s")


def compare(a, b, path, extra, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if ignored(key, extra):
                continue
            if key not in a or key not in b:
                out.append(f"{path}.{key}: only in {'B' if key not in a else 'A'}")
                continue
            compare(a[key], b[key], f"{path}.{key}", extra, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} entries against {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]", extra, out)
    elif a != b:
        out.append(f"{path}: {json.dumps(a)[:80]} against {json.dumps(b)[:80]}")


def main():
    args = sys.argv[1:]
    extra = set()
    while "--ignore" in args:
        i = args.index("--ignore")
        extra.add(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    with open(args[0]) as fa, open(args[1]) as fb:
        a, b = json.load(fa), json.load(fb)
    out = []
    compare(a, b, "", extra, out)
    for line in out[:200]:
        print(line)
    print(f"{len(out)} differences")
    sys.exit(1 if out else 0)


if __name__ == "__main__":
    main()
