#!/usr/bin/env python3
"""Where a cumemtrace trace's bytes go: bytes per packet type and per EventBatch column, per event.

Why this exists: performance.md's target is under 8 bytes per event on long runs; knowing which column costs what says
what to change in the encoding. Reads the protobuf wire format directly (docs/format.md), no libprotobuf needed.

Usage: bench/trace_bytes.py TRACE.pb
"""
import collections
import ctypes
import ctypes.util
import sys


class Buffer(ctypes.Structure):  # ZSTD_inBuffer and ZSTD_outBuffer
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]


class Inflater:
    """zstd's decompression through ctypes: format 5's one frame per batch, and format 6's parts of one stream."""

    def __init__(self):
        self.lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
        self.lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
        self.lib.ZSTD_decompress.restype = ctypes.c_size_t
        self.lib.ZSTD_createDCtx.restype = ctypes.c_void_p
        self.lib.ZSTD_decompressStream.restype = ctypes.c_size_t
        self.lib.ZSTD_decompressStream.argtypes = [ctypes.c_void_p, ctypes.POINTER(Buffer), ctypes.POINTER(Buffer)]
        self.lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        self.stream = ctypes.c_void_p(self.lib.ZSTD_createDCtx())

    def frame(self, frame):
        size = self.lib.ZSTD_getFrameContentSize(frame, ctypes.c_size_t(len(frame)))
        out = ctypes.create_string_buffer(size)
        got = self.lib.ZSTD_decompress(out, ctypes.c_size_t(size), frame, ctypes.c_size_t(len(frame)))
        if got != size:
            raise ValueError("a compressed batch does not inflate")
        return out.raw

    def part(self, number, data):
        """One StreamedEvents part: part 0 starts a frame; the parts of a frame come in order."""
        if number == 0:
            self.lib.ZSTD_DCtx_reset(self.stream, 1)
        source = ctypes.create_string_buffer(data, len(data))
        given = Buffer(ctypes.cast(source, ctypes.c_void_p), len(data), 0)
        result = b""
        while True:
            out = ctypes.create_string_buffer(1 << 20)
            taken = Buffer(ctypes.cast(out, ctypes.c_void_p), 1 << 20, 0)
            code = self.lib.ZSTD_decompressStream(self.stream, ctypes.byref(taken), ctypes.byref(given))
            if self.lib.ZSTD_isError(code):
                raise ValueError("a streamed batch does not inflate")
            result += out.raw[:taken.pos]
            if given.pos == given.size and taken.pos < taken.size:
                return result

PACKETS = {1: "Header", 2: "Thread", 3: "Module", 4: "StackNodes", 5: "EventBatch", 6: "Strings", 7: "Symbols",
           8: "Trailer", 9: "Device", 10: "PythonFrames", 11: "MemorySample", 12: "Notice", 13: "AllocatorAttach",
           14: "Phase", 15: "HeaderCopy", 16: "GpuProcesses", 17: "EventBatch (zstd)",
           18: "EventBatch (zstd stream)"}
COLUMNS = {1: "first_seq", 2: "base_time_ns", 3: "seq_delta", 4: "time_delta_ns", 5: "api", 6: "address_delta",
           7: "size", 8: "stack", 9: "thread", 10: "device", 11: "stream", 12: "aux", 13: "failures",
           14: "cupti_rows", 15: "complete_below", 16: "thread_runs", 17: "device_runs", 18: "address_shift",
           19: "time_unit_ns"}


def varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def fields(data, start, end):
    """Yields (field number, bytes the field takes including its tag, payload start, payload end)."""
    pos = start
    while pos < end:
        begin = pos
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = varint(data, pos)
            payload = (pos, pos)
        elif wire == 1:
            pos += 8
            payload = (pos - 8, pos)
        elif wire == 5:
            pos += 4
            payload = (pos - 4, pos)
        elif wire == 2:
            length, pos = varint(data, pos)
            payload = (pos, pos + length)
            pos += length
        else:
            raise ValueError(f"unexpected wire type {wire} at {begin}")
        yield number, pos - begin, payload[0], payload[1]


def streamed_events(data, start, end):
    """A StreamedEvents message: its part number and its compressed bytes."""
    part, payload, pos = 0, b"", start
    while pos < end:
        key, pos = varint(data, pos)
        if key == (1 << 3) | 0:
            part, pos = varint(data, pos)
        elif key == (2 << 3) | 2:
            length, pos = varint(data, pos)
            payload = data[pos:pos + length]
            pos += length
        elif key == (3 << 3) | 5:  # crc32c
            pos += 4
        else:
            raise ValueError(f"unexpected field {key >> 3} in a streamed batch")
    return part, payload


def main():
    data = open(sys.argv[1], "rb").read()
    per_packet = collections.Counter()
    per_column = collections.Counter()
    events = 0
    inflate = None
    inflated_bytes = 0
    for _, size, start, end in fields(data, 0, len(data)):
        for number, _, body_start, body_end in fields(data, start, end):
            per_packet[PACKETS.get(number, str(number))] += size
            if number in (17, 18):  # a compressed batch: its columns are counted as they are once inflated
                try:
                    inflate = inflate or Inflater()
                except OSError:
                    sys.exit("trace_bytes: the trace has compressed batches and libzstd is not here")
                if number == 17:
                    batch = inflate.frame(data[body_start:body_end])
                else:
                    batch = inflate.part(*streamed_events(data, body_start, body_end))
                inflated_bytes += len(batch)
                batch_data, body_start, body_end = batch, 0, len(batch)
            elif number == 5:
                batch_data = data
            else:
                continue
            for column, column_size, col_start, col_end in fields(batch_data, body_start, body_end):
                per_column[COLUMNS.get(column, str(column))] += column_size
                if column == 5:  # api: one varint per row, all below 128
                    events += col_end - col_start
    if inflated_bytes:
        print(f"compressed batches hold {inflated_bytes} bytes of columns ({inflated_bytes / events:.2f} B/event "
              f"before compression)")
    else:
        per_column["(packet framing)"] = per_packet["EventBatch"] - sum(per_column.values())
    print(f"{len(data)} bytes, {events} events, {len(data) / events:.2f} bytes/event")
    print("packets:")
    for name, size in per_packet.most_common():
        print(f"  {name:16} {size:12} bytes  {size / events:6.2f} B/event")
    print("EventBatch columns (before compression):")
    for name, size in per_column.most_common():
        print(f"  {name:16} {size:12} bytes  {size / events:6.2f} B/event")


if __name__ == "__main__":
    main()
