"""Prints, for every code object of a few large standard-library modules, its line table and the line the
interpreter itself gives each of its instructions (code.co_lines()): the oracle for cumemtrace's own decoder
(tests/unit/preload/python_line_table_test.cc). One code object per line:

    FORMAT FIRST_LINE TABLE_HEX CODE_UNITS LINE_OF_UNIT_0,LINE_OF_UNIT_1,...

FORMAT is "pairs" (3.10) or "locations" (3.11+); a unit without a line is 0. Runs on CPython 3.10 and later.
"""
import importlib.util
import sys
import types

MODULES = ["argparse", "asyncio.base_events", "json.decoder", "typing", "dataclasses", "difflib", "inspect", "tarfile",
           "unittest.case", "pydoc"]


def code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def main():
    table_format = "pairs" if sys.version_info < (3, 11) else "locations"
    count = 0
    for name in MODULES:
        path = importlib.util.find_spec(name).origin
        with open(path, encoding="utf-8") as f:
            module = compile(f.read(), path, "exec")
        for code in code_objects(module):
            units = len(code.co_code) // 2
            lines = [0] * units
            for start, end, line in code.co_lines():
                for byte in range(start, min(end, 2 * units), 2):
                    lines[byte // 2] = line if line is not None else 0
            print(table_format, code.co_firstlineno, code.co_linetable.hex() or "-", units,
                  ",".join(map(str, lines)) or "-")
            count += 1
    print("end", count)


main()
