#!/usr/bin/env python3
"""Lists the Python frame chains of a cumemtrace trace, reading the wire format directly (standard library only).

Why this exists: to check the preload's Python frames on a machine whose Python version differs from the CPU tests'
(3.12 on the GPU machine) with nothing but the trace: no analyzer, no protobuf. It decodes only the packets it needs
(Strings, PythonFrames, StackNodes; trace.proto is the reference) and prints, for every stack-tree leaf that has
Python frames, the chain innermost first as "file:line function" lines. Exit status 1 when the file does not parse.

Usage: trace_python_frames.py TRACE.pb [--json]
"""
import json
import sys

PYTHON_BIT = 1 << 63


def varint(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def fields(data):
    """Yields (field, wire_type, value) of one message; value is an int or a bytes slice."""
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
        elif wire == 2:
            length, pos = varint(data, pos)
            value = data[pos:pos + length]
            pos += length
        elif wire == 1:
            value = int.from_bytes(data[pos:pos + 8], "little")
            pos += 8
        elif wire == 5:
            value = int.from_bytes(data[pos:pos + 4], "little")
            pos += 4
        else:
            raise ValueError("wire type %d" % wire)
        yield field, wire, value


def packed(data):
    out, pos = [], 0
    while pos < len(data):
        value, pos = varint(data, pos)
        out.append(value)
    return out


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    strings, frames, nodes = {0: ""}, {}, {}
    for field, wire, packet in fields(data):
        if field != 1 or wire != 2:
            continue
        for kind, _, body in fields(packet):
            if kind == 6:  # Strings
                first, values = 0, []
                for f, _, v in fields(body):
                    if f == 1:
                        first = v
                    elif f == 2:
                        values.append(bytes(v).decode("utf-8", "replace"))
                for i, s in enumerate(values):
                    strings[first + i] = s
            elif kind == 10:  # PythonFrames
                first, cols = 0, {2: [], 3: [], 4: []}
                for f, w, v in fields(body):
                    if f == 1:
                        first = v
                    elif f in cols:
                        cols[f] += packed(v) if w == 2 else [v]
                for i, (fn, fi, ln) in enumerate(zip(cols[2], cols[3], cols[4])):
                    frames[first + i] = (fn, fi, ln)
            elif kind == 4:  # StackNodes
                first, parents, pcs = 0, [], []
                for f, w, v in fields(body):
                    if f == 1:
                        first = v
                    elif f == 2:
                        parents += packed(v) if w == 2 else [v]
                    elif f == 3:
                        pcs += packed(v) if w == 2 else [v]
                for i, (p, pc) in enumerate(zip(parents, pcs)):
                    nodes[first + i] = (p, pc)
    return strings, frames, nodes


def chains(strings, frames, nodes):
    parents = {p for p, _ in nodes.values()}
    out = []
    for leaf in sorted(set(nodes) - parents):
        chain, node = [], leaf
        while node:
            parent, pc = nodes[node]
            if pc & PYTHON_BIT:
                fid = pc & ~PYTHON_BIT
                if fid == 0:
                    chain.append({"marker": "no Python frames on this thread"})
                else:
                    fn, fi, ln = frames.get(fid, (0, 0, 0))
                    chain.append({"function": strings.get(fn, "?"), "file": strings.get(fi, "?"), "line": ln})
            node = parent
        if chain:
            out.append({"leaf": leaf, "frames": chain})
    return out


def main():
    try:
        result = chains(*read(sys.argv[1]))
    except (OSError, ValueError, IndexError, KeyError) as e:
        print("trace_python_frames.py: %s: %s" % (sys.argv[1], e), file=sys.stderr)
        return 1
    if "--json" in sys.argv:
        json.dump(result, sys.stdout)
        print()
        return 0
    for c in result:
        print("stack leaf %d:" % c["leaf"])
        for f in c["frames"]:
            print("   ", f.get("marker") or "%s:%s %s" % (f["file"], f["line"], f["function"]))
    return 0


sys.exit(main())
