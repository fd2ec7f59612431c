#!/usr/bin/env python3
"""The launcher's --help is where users learn the settings: it must name every CUMEMTRACE_* variable the preload
reads (string literals "CUMEMTRACE_..." in preload/*.cc, config.cc first of all) and nothing the preload does not
know, apart from the launcher's own CUMEMTRACE_LIB. Usage: launcher_help_test.py SOURCE_DIR
"""
import glob
import os
import re
import subprocess
import sys

LAUNCHER_ONLY = {"CUMEMTRACE_LIB"}


def main():
    source = sys.argv[1]
    read = set()
    for path in glob.glob(os.path.join(source, "preload", "*.cc")):
        with open(path, encoding="utf-8") as f:
            read |= set(re.findall(r'"(CUMEMTRACE_[A-Z_]+)"', f.read()))
    assert "CUMEMTRACE_OUTPUT" in read, f"found no settings in {source}/preload: {sorted(read)}"
    help_text = subprocess.run([os.path.join(source, "scripts", "cumemtrace"), "--help"], capture_output=True,
                               text=True, check=True).stdout
    listed = set(re.findall(r"\b(CUMEMTRACE_[A-Z_]+)", help_text))
    missing = sorted(read - listed)
    unknown = sorted(listed - read - LAUNCHER_ONLY)
    assert not missing, f"cumemtrace --help does not list {missing}, which preload/*.cc reads"
    assert not unknown, f"cumemtrace --help lists {unknown}, which no preload/*.cc reads"
    print(f"cumemtrace --help lists all {len(read)} settings: {', '.join(sorted(read))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
