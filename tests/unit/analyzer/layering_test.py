"""The analyzer's one path, checked on its sources: commands/ -> reader/ -> model/ -> reports/ -> render/, export/
(docs/design.md, section 2). Each folder may include only the folders before it (and itself), and only reader/,
model/ and tools/ (which writes new traces) read a trace file. A change that makes a report format text, a renderer
read the trace, or the model include a command fails here with the file and the include that breaks the rule.

Usage: layering_test.py ANALYZER_SOURCE_DIR"""
import os
import re
import sys

# What each folder may include from analyzer/ (besides itself and the top-level helpers).
ALLOWED = {
    "reader": set(),
    "model": {"reader"},
    "reports": {"reader", "model"},
    "render": {"reader", "model", "reports"},
    "export": {"reader", "model", "reports", "render"},
    "tools": {"reader", "model", "reports", "render"},
    "commands": {"reader", "model", "reports", "render", "export", "tools"},
}
READS_TRACES = {"reader", "model", "tools"}
INCLUDE = re.compile(r'^\s*#include "analyzer/([a-z_]+)/')


def main():
    root = sys.argv[1]
    problems = []
    checked = 0
    for folder, allowed in ALLOWED.items():
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                checked += 1
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1) != folder and m.group(1) not in allowed:
                            problems.append(f"analyzer/{rel}:{number}: {folder}/ includes {m.group(1)}/: "
                                            f"{line.strip()}")
                        if folder not in READS_TRACES and re.search(r"\bReadTrace\(", line):
                            problems.append(f"analyzer/{rel}:{number}: {folder}/ reads the trace itself "
                                            "(passes over the raw stream belong in model/)")
    if checked < 100:
        problems.append(f"only {checked} source files found under {root}: wrong folder?")
    for p in problems:
        print(p)
    print(f"{checked} files checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
