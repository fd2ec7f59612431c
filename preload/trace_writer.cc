#include "preload/trace_writer.h"

#include "preload/module_map.h"
#include "preload/stack_table.h"
#include "preload/wire_encoder.h"
#include "proto/format.h"

namespace cumemtrace::preload {
namespace {

namespace f = format::field;

// Frames one packet: Trace.packet (field 1) { Packet.<which> { ... } }. Finish() closes both and reports whether
// the buffer kept up; on failure the partial packet is cut off again.
class PacketScope {
 public:
  PacketScope(ByteBuffer* out, uint32_t which) : out_(out), enc_(out), start_(out->size()) {
    outer_ = enc_.Begin(f::kTracePacket);
    inner_ = enc_.Begin(which);
  }
  WireEncoder& enc() { return enc_; }
  bool Finish() {
    enc_.End(inner_);
    enc_.End(outer_);
    if (out_->ok()) return true;
    out_->Truncate(start_);
    return false;
  }

 private:
  ByteBuffer* out_;
  WireEncoder enc_;
  size_t start_;
  size_t outer_ = 0;
  size_t inner_ = 0;
};

// Writes a packed repeated field of `count` values produced by `value(i)`, as varints, zigzag or not.
template <typename Fn>
void PackedVarints(WireEncoder& enc, uint32_t field, size_t count, Fn value) {
  if (count == 0) return;
  size_t mark = enc.Begin(field);
  for (size_t i = 0; i < count; ++i) enc.RawVarint(value(i));
  enc.End(mark);
}

// A column of `n` values: one entry when all are the same; else (value, run length) pairs when there are fewer
// than n / 2 runs; else one entry per row.
template <typename Value>
void WriteRunsOrRows(WireEncoder& e, uint32_t field, uint32_t runs_field, size_t n, Value value) {
  size_t runs = n == 0 ? 0 : 1;
  for (size_t i = 1; i < n; ++i) runs += value(i) != value(i - 1) ? 1 : 0;
  if (runs <= 1 || runs * 2 >= n) {
    PackedVarints(e, field, runs <= 1 ? (n == 0 ? 0 : 1) : n, value);
    return;
  }
  size_t mark = e.Begin(field);
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || value(i) != value(i - 1)) e.RawVarint(value(i));
  }
  e.End(mark);
  mark = e.Begin(runs_field);
  size_t length = 1;
  for (size_t i = 1; i <= n; ++i) {
    if (i < n && value(i) == value(i - 1)) {
      ++length;
      continue;
    }
    e.RawVarint(length);
    length = 1;
  }
  e.End(mark);
}

// The Header message's fields, in field order. `identity`: also what names the process and its machine (the tool's
// version, the command line, the host name, the executable), which the copies repeated through the file leave out.
void EncodeHeaderFields(WireEncoder& e, const HeaderInfo& h, bool identity) {
  e.Fixed64(f::header::kMagic, format::kMagic);  // first: a reader looking for a copy looks for these bytes
  e.Uint64(f::header::kFormatVersion, format::kFormatVersion);
  if (identity) e.String(f::header::kToolVersion, h.tool_version);
  e.Int32(f::header::kPid, h.pid);
  e.Int32(f::header::kPpid, h.ppid);
  if (identity) {
    for (int i = 0; i < h.argc; ++i) e.String(f::header::kArgv, h.argv[i]);
    e.String(f::header::kHostname, h.hostname);
  }
  e.Uint64(f::header::kClockId, 1);  // CLOCK_MONOTONIC
  e.Int64(f::header::kStartTimeNs, h.start_time_ns);
  e.Int64(f::header::kStartUnixTimeNs, h.start_unix_time_ns);
  e.Int32(f::header::kDriverVersion, h.driver_version);
  e.Uint64(f::header::kStackDepth, h.stack_depth);
  e.Uint64(f::header::kTorchStackDepth, h.torch_stack_depth);
  if (identity) e.String(f::header::kExecutable, h.executable);
  if (h.rank >= 0) e.Int32Always(f::header::kRank, h.rank);
  if (h.local_rank >= 0) e.Int32Always(f::header::kLocalRank, h.local_rank);
  if (h.world_size >= 0) e.Int32Always(f::header::kWorldSize, h.world_size);
  e.Bool(f::header::kForkedChild, h.forked_child);
  e.Bool(f::header::kPythonFramesEnabled, h.python_frames_enabled);
  e.Bool(f::header::kCuptiEnabled, h.cupti_enabled);
}

}  // namespace

bool WriteHeader(ByteBuffer* out, const HeaderInfo& h) {
  PacketScope p(out, f::packet::kHeader);
  EncodeHeaderFields(p.enc(), h, true);
  return p.Finish();
}

bool WriteHeaderCopy(ByteBuffer* out, const HeaderInfo& h) {
  PacketScope p(out, f::packet::kHeaderCopy);
  EncodeHeaderFields(p.enc(), h, false);
  return p.Finish();
}

bool WriteDevice(ByteBuffer* out, const DeviceRecord& d) {
  PacketScope p(out, f::packet::kDevice);
  WireEncoder& e = p.enc();
  e.Int32(f::device::kOrdinal, d.ordinal);
  e.String(f::device::kName, d.name);
  if (d.uuid_size != 0) e.Bytes(f::device::kUuid, d.uuid, d.uuid_size);
  e.Uint64(f::device::kTotalMemory, d.total_memory);
  e.Int32(f::device::kDriverVersion, d.driver_version);
  return p.Finish();
}

bool WriteThread(ByteBuffer* out, uint32_t index, int32_t tid, const char* name) {
  PacketScope p(out, f::packet::kThread);
  WireEncoder& e = p.enc();
  e.Uint64(f::thread::kIndex, index);
  e.Int32(f::thread::kTid, tid);
  e.String(f::thread::kName, name);
  return p.Finish();
}

bool WriteModule(ByteBuffer* out, const ModuleEntry& m) {
  PacketScope p(out, f::packet::kModule);
  WireEncoder& e = p.enc();
  e.Uint64(f::module::kId, m.id);
  e.String(f::module::kPath, m.path);
  e.Uint64(f::module::kLoadBias, m.load_bias);
  e.Uint64(f::module::kStart, m.start);
  e.Uint64(f::module::kEnd, m.end);
  if (m.build_id_size != 0) e.Bytes(f::module::kBuildId, m.build_id, m.build_id_size);
  return p.Finish();
}

bool WriteStackNodes(ByteBuffer* out, const StackTable& table, uint64_t first_id, uint64_t end_id) {
  PacketScope p(out, f::packet::kStackNodes);
  WireEncoder& e = p.enc();
  size_t count = end_id - first_id;
  e.Uint64(f::stack_nodes::kFirstId, first_id);
  PackedVarints(e, f::stack_nodes::kParent, count, [&](size_t i) { return table.parent(first_id + i); });
  PackedVarints(e, f::stack_nodes::kPc, count, [&](size_t i) { return table.pc(first_id + i); });
  return p.Finish();
}

bool WriteStrings(ByteBuffer* out, uint32_t first_id, const char* const* values, size_t count) {
  PacketScope p(out, f::packet::kStrings);
  WireEncoder& e = p.enc();
  e.Uint64(f::strings::kFirstId, first_id);
  for (size_t i = 0; i < count; ++i) e.String(f::strings::kValue, values[i]);
  return p.Finish();
}

bool WriteSymbols(ByteBuffer* out, const uint64_t* pcs, const uint32_t* functions, const uint32_t* modules,
                  const uint64_t* offsets, const uint32_t* files, const uint32_t* lines, size_t count) {
  PacketScope p(out, f::packet::kSymbols);
  WireEncoder& e = p.enc();
  PackedVarints(e, f::symbols::kPc, count, [&](size_t i) { return pcs[i]; });
  PackedVarints(e, f::symbols::kFunction, count, [&](size_t i) { return functions[i]; });
  PackedVarints(e, f::symbols::kModule, count, [&](size_t i) { return modules[i]; });
  PackedVarints(e, f::symbols::kOffset, count, [&](size_t i) { return offsets[i]; });
  if (files != nullptr && lines != nullptr) {
    PackedVarints(e, f::symbols::kFile, count, [&](size_t i) { return files[i]; });
    PackedVarints(e, f::symbols::kLine, count, [&](size_t i) { return lines[i]; });
  }
  return p.Finish();
}

bool WritePythonFrames(ByteBuffer* out, uint32_t first_id, const uint32_t* functions, const uint32_t* files,
                       const uint32_t* lines, size_t count) {
  PacketScope p(out, f::packet::kPythonFrames);
  WireEncoder& e = p.enc();
  e.Uint64(f::python_frames::kFirstId, first_id);
  PackedVarints(e, f::python_frames::kFunction, count, [&](size_t i) { return functions[i]; });
  PackedVarints(e, f::python_frames::kFile, count, [&](size_t i) { return files[i]; });
  PackedVarints(e, f::python_frames::kLine, count, [&](size_t i) { return lines[i]; });
  return p.Finish();
}

bool WriteMemorySample(ByteBuffer* out, const MemorySampleRecord& m) {
  PacketScope p(out, f::packet::kMemorySample);
  WireEncoder& e = p.enc();
  e.Int64(f::memory_sample::kTimeNs, m.time_ns);
  e.Int32(f::memory_sample::kDevice, m.device);
  e.Uint64(f::memory_sample::kFreeBytes, m.free_bytes);
  e.Uint64(f::memory_sample::kTotalBytes, m.total_bytes);
  e.Uint64(f::memory_sample::kAfterSeq, m.after_seq);
  return p.Finish();
}

bool WriteGpuProcesses(ByteBuffer* out, const GpuProcessesRecord& list) {
  PacketScope p(out, f::packet::kGpuProcesses);
  WireEncoder& e = p.enc();
  namespace gf = f::gpu_processes;
  namespace pf = f::gpu_process;
  e.Int64(gf::kTimeNs, list.time_ns);
  e.Uint64(gf::kAfterSeq, list.after_seq);
  e.Int32(gf::kDevice, list.device);
  e.Uint64(gf::kReason, list.reason);
  e.Uint64(gf::kPids, list.pids);
  for (int i = 0; i < list.count; ++i) {
    const GpuProcessRecord& r = list.process[i];
    size_t mark = e.Begin(gf::kProcess);
    e.Uint64(pf::kPid, r.pid);
    e.Uint64(pf::kUsedBytes, r.used_bytes);
    e.Bool(pf::kUsedUnknown, r.used_unknown);
    e.Bool(pf::kSelf, r.self);
    e.String(pf::kCommand, r.command);
    e.End(mark);
  }
  e.String(gf::kError, list.error);
  return p.Finish();
}

bool WriteNotice(ByteBuffer* out, uint32_t code, const char* message, int64_t time_ns) {
  PacketScope p(out, f::packet::kNotice);
  WireEncoder& e = p.enc();
  e.Uint64(f::notice::kCode, code);
  e.String(f::notice::kMessage, message);
  e.Int64(f::notice::kTimeNs, time_ns);
  return p.Finish();
}

bool WriteAllocatorAttach(ByteBuffer* out, const AllocatorAttachRecord& a) {
  PacketScope p(out, f::packet::kAllocatorAttach);
  WireEncoder& e = p.enc();
  namespace af = f::allocator_attach;
  e.Uint64(af::kAfterSeq, a.after_seq);
  e.Int64(af::kTimeNs, a.time_ns);
  e.String(af::kLibrary, a.library);
  e.Uint64(af::kDevices, a.devices);
  e.String(af::kConfig, a.config);
  e.Bool(af::kAtFirstSegment, a.at_first_segment);
  return p.Finish();
}

bool WritePhase(ByteBuffer* out, const PhaseRecord& ph) {
  PacketScope p(out, f::packet::kPhase);
  WireEncoder& e = p.enc();
  namespace pf = f::phase;
  e.Uint64(pf::kAfterSeq, ph.after_seq);
  e.Int64(pf::kTimeNs, ph.time_ns);
  e.Uint64(pf::kThread, ph.thread);
  e.Uint64(pf::kKind, ph.kind);
  e.Bytes(pf::kName, ph.name, ph.name_size);
  e.Uint64(pf::kRangeId, ph.range_id);
  e.Uint64(pf::kDomain, ph.domain);
  return p.Finish();
}

bool WriteEventBatch(ByteBuffer* out, const EventRecord* ev, size_t n, uint64_t complete_below,
                     uint64_t time_unit_ns, int64_t time_origin_ns) {
  if (n == 0) return true;
  namespace ef = f::events;
  PacketScope p(out, f::packet::kEvents);
  WireEncoder& e = p.enc();
  e.Uint64(ef::kFirstSeq, ev[0].seq);
  // Times rounded down to the origin plus a multiple of the unit, stored as deltas in units: at 1 us a delta
  // between two rows of a busy loop fits a byte, and repeats from step to step where nanoseconds never do. From the
  // trace's start, so that a time shown relative to it to the millisecond is the same as at full resolution.
  const int64_t unit = time_unit_ns > 1 ? static_cast<int64_t>(time_unit_ns) : 1;
  auto time = [&](size_t i) {
    const int64_t t = ev[i].time_ns - time_origin_ns;
    const int64_t r = t % unit;
    return time_origin_ns + (r < 0 ? t - r - unit : t - r);
  };
  e.Int64(ef::kBaseTimeNs, time(0));
  bool contiguous = true;
  for (size_t i = 1; i < n && contiguous; ++i) contiguous = ev[i].seq == ev[i - 1].seq + 1;
  if (!contiguous) {
    PackedVarints(e, ef::kSeqDelta, n, [&](size_t i) {
      return ZigZag(static_cast<int64_t>(ev[i].seq - (i == 0 ? ev[0].seq : ev[i - 1].seq)));
    });
  }
  PackedVarints(e, ef::kTimeDeltaNs, n, [&](size_t i) { return ZigZag((time(i) - time(i == 0 ? 0 : i - 1)) / unit); });
  if (unit > 1) e.Uint64(ef::kTimeUnitNs, static_cast<uint64_t>(unit));
  PackedVarints(e, ef::kApi, n, [&](size_t i) { return static_cast<uint64_t>(ev[i].api); });
  // Device addresses share their low zero bits (PyTorch's blocks: 512-byte multiples; segments: 2 MiB): the deltas
  // are stored without them. The shift of the whole batch, so that one odd address (a host pointer) costs nothing
  // but that batch's saving.
  uint64_t all_bits = 0;
  for (size_t i = 0; i < n; ++i) all_bits |= ev[i].address;
  const int shift = all_bits == 0 ? 0 : __builtin_ctzll(all_bits);
  PackedVarints(e, ef::kAddressDelta, n, [&](size_t i) {
    // Both addresses are multiples of 2^shift, so the wrapped difference is too: the arithmetic shift is exact.
    return ZigZag(static_cast<int64_t>(ev[i].address - (i == 0 ? 0 : ev[i - 1].address)) >> shift);
  });
  if (shift > 0) e.Uint64(ef::kAddressShift, static_cast<uint64_t>(shift));
  // Per-api columns: only rows whose api has the value.
  auto info = [&](size_t i) { return format::FindApi(ev[i].api); };
  {
    size_t mark = e.Begin(ef::kSize);
    for (size_t i = 0; i < n; ++i) {
      const format::ApiInfo* a = info(i);
      if (a != nullptr && a->has_size) e.RawVarint(ev[i].size);
    }
    e.End(mark);
  }
  {
    size_t mark = e.Begin(ef::kStream);
    for (size_t i = 0; i < n; ++i) {
      const format::ApiInfo* a = info(i);
      if (a != nullptr && a->has_stream) e.RawVarint(ev[i].stream);
    }
    e.End(mark);
  }
  {
    size_t mark = e.Begin(ef::kAux);
    for (size_t i = 0; i < n; ++i) {
      const format::ApiInfo* a = info(i);
      if (a != nullptr && a->has_aux) e.RawVarint(ev[i].aux);
    }
    e.End(mark);
  }
  // The stack column covers the rows whose api has a stack: once when it is the same for all of them.
  {
    size_t with_stack = 0;
    bool same = true;
    uint64_t first = 0;
    for (size_t i = 0; i < n; ++i) {
      const format::ApiInfo* a = info(i);
      if (a == nullptr || !format::RowHasStack(*a, format::kFormatVersion)) continue;
      if (with_stack++ == 0) first = ev[i].stack; else same = same && ev[i].stack == first;
    }
    if (with_stack > 0) {
      size_t mark = e.Begin(ef::kStack);
      for (size_t i = 0; i < n; ++i) {
        const format::ApiInfo* a = info(i);
        if (a == nullptr || !format::RowHasStack(*a, format::kFormatVersion)) continue;
        e.RawVarint(ev[i].stack);
        if (same) break;
      }
      e.End(mark);
    }
  }
  // Thread and device change rarely within a batch (forward on one thread, backward on another): once when the
  // same for every row, else runs when that is shorter, else one per row.
  auto thread = [&](size_t i) { return static_cast<uint64_t>(ev[i].thread); };
  auto device = [&](size_t i) { return ZigZag(ev[i].device); };
  WriteRunsOrRows(e, ef::kThread, ef::kThreadRuns, n, thread);
  WriteRunsOrRows(e, ef::kDevice, ef::kDeviceRuns, n, device);
  for (size_t i = 0; i < n; ++i) {
    if (ev[i].result == 0) continue;
    size_t mark = e.Begin(ef::kFailures);
    e.Uint64(f::failure::kRow, i);
    e.Int32(f::failure::kResult, ev[i].result);
    e.Uint64(f::failure::kFreeBytes, ev[i].free_bytes);
    e.Uint64(f::failure::kTotalBytes, ev[i].total_bytes);
    e.Bool(f::failure::kHasMemInfo, ev[i].has_mem_info);
    e.End(mark);
  }
  size_t cupti_rows = 0;
  for (size_t i = 0; i < n; ++i) cupti_rows += ev[i].cupti_only ? 1 : 0;
  if (cupti_rows > 0) {
    size_t mark = e.Begin(ef::kCuptiRows);
    for (size_t i = 0; i < n; ++i) {
      if (ev[i].cupti_only) e.RawVarint(i);
    }
    e.End(mark);
  }
  e.Uint64(ef::kCompleteBelow, complete_below);
  return p.Finish();
}

bool WriteTrailer(ByteBuffer* out, const TrailerRecord& t) {
  PacketScope p(out, f::packet::kTrailer);
  WireEncoder& e = p.enc();
  namespace tf = f::trailer;
  e.Uint64(tf::kEvents, t.events);
  e.Uint64(tf::kDroppedEvents, t.dropped_events);
  e.Uint64(tf::kUnwindFailures, t.unwind_failures);
  e.Uint64(tf::kTruncatedStacks, t.truncated_stacks);
  e.Uint64(tf::kBytesWritten, t.bytes_written);
  e.Uint64(tf::kStackNodes, t.stack_nodes);
  e.Uint64(tf::kWrapperSlotsExhausted, t.wrapper_slots_exhausted);
  e.Int64(tf::kEndTimeNs, t.end_time_ns);
  e.Uint64(tf::kRecorderTimeNs, t.recorder_time_ns);
  e.Uint64(tf::kFlushes, t.flushes);
  e.Uint64(tf::kPythonStacks, t.python_stacks);
  e.Uint64(tf::kPythonFailures, t.python_failures);
  e.Uint64(tf::kMemorySamples, t.memory_samples);
  e.Uint64(tf::kCuptiOnlyEvents, t.cupti_only_events);
  e.Uint64(tf::kAllocatorEvents, t.allocator_events);
  e.Uint64(tf::kAllocatorIgnored, t.allocator_ignored);
  e.Uint64(tf::kDroppedFrames, t.dropped_frames);
  e.Uint64(tf::kRecorderPythonNs, t.recorder_python_ns);
  e.Uint64(tf::kRecorderUnwindNs, t.recorder_unwind_ns);
  e.Uint64(tf::kRecorderLockWaitNs, t.recorder_lock_wait_ns);
  e.Uint64(tf::kRecorderStackNs, t.recorder_stack_ns);
  e.Uint64(tf::kWriterTimeNs, t.writer_time_ns);
  e.Uint64(tf::kStalledSeals, t.stalled_seals);
  e.Uint64(tf::kClockCalibrations, t.clock_calibrations);
  e.Uint64(tf::kClockMaxErrorNs, t.clock_max_error_ns);
  e.Uint64(tf::kClockSteps, t.clock_steps);
  e.Uint64(tf::kRecorderPrologueNs, t.recorder_prologue_ns);
  e.Uint64(tf::kRecorderAppendNs, t.recorder_append_ns);
  return p.Finish();
}

}  // namespace cumemtrace::preload
