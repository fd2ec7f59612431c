"""PickleWriter (analyzer/export/pickle_writer.h) read back by Python's own pickle module: pickle_writer_sample
writes every kind of value the writer has, this script loads it and compares it with what it must be, and checks
that only opcodes PyTorch's memory_viz unpickler (torch/utils/viz/MemoryViz.js) also reads were used.
Usage: pickle_writer_test.py PICKLE_WRITER_SAMPLE WORKDIR"""
import os
import pickle
import pickletools
import subprocess
import sys

# The opcodes MemoryViz.js's unpickle() handles (PROTO 2..4 accepted there).
VIEWER_OPCODES = {
    "PROTO", "STOP", "MARK", "EMPTY_DICT", "EMPTY_LIST", "SETITEMS", "SETITEM", "APPENDS", "APPEND", "DICT", "LIST",
    "BINUNICODE", "SHORT_BINUNICODE", "BININT", "BININT1", "BININT2", "LONG1", "NEWTRUE", "NEWFALSE", "NONE",
    "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_TUPLE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET", "MEMOIZE",
    "FRAME", "BINFLOAT",
}


def main():
    sample, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "sample.pickle")
    subprocess.run([sample, path], check=True)
    data = open(path, "rb").read()
    value = pickle.loads(data)

    frames = [{"filename": "train.py", "line": i, "name": "step"} for i in range(300)]
    expected = {
        "ints": [0, 1, 255, 256, 65535, 65536, -1, -128, -129, 2147483647, 2147483648, -2147483648, -2147483649,
                 1 << 40, 139892487094272, 2**63 - 1, -2**63, 2**64 - 1, 2**63],
        "strings": ["", "segment_alloc", "caf\u00e9 \u20ac \U0001f525", "bad \ufffd\ufffd end \ufffd",
                    "surrogate \ufffd\ufffd\ufffd."],
        "flags": [True, False, None, (0, 7)],
        "long_list": list(range(2500)),
        "long_dict": {"k%d" % i: i * 3 for i in range(1500)},
        "empty": {"list": [], "dict": {}},
        "memo": frames + [frames[0], frames[299]],
    }
    assert value == expected, "decoded value differs:\n%r" % ({k: v for k, v in value.items() if expected.get(k) != v},)
    memo = value["memo"]
    assert memo[300] is memo[0] and memo[301] is memo[299], "BINGET did not return the memoized objects"
    assert list(value.keys()) == list(expected.keys()), "key order"

    used = {op.name for op, _, _ in pickletools.genops(data)}
    assert used <= VIEWER_OPCODES, "opcodes memory_viz cannot read: %s" % sorted(used - VIEWER_OPCODES)
    for needed in ("LONG1", "BININT", "BININT2", "LONG_BINPUT", "LONG_BINGET", "APPENDS", "SETITEMS", "TUPLE2"):
        assert needed in used, "%s not exercised" % needed
    # Batches of at most 1000 items, as CPython writes them (a browser cannot spread an unbounded list): the 2500
    # list items take 3 APPENDS and 4 more lists one each (an empty one none); the 1500 dict items take 2 SETITEMS,
    # the top dict, "empty" and the 300 frames one each (an empty dict none).
    ops = [op.name for op, _, _ in pickletools.genops(data)]
    assert (ops.count("APPENDS"), ops.count("SETITEMS")) == (3 + 4, 2 + 2 + 300), (ops.count("APPENDS"),
                                                                                   ops.count("SETITEMS"))
    print("PASS: %d bytes, %d opcodes kinds, all readable by pickle and memory_viz" % (len(data), len(used)))


if __name__ == "__main__":
    main()
