// PerfettoTrace: descriptors first, then counter values per track, then instants; one trusted sequence whose first
// packet clears incremental state. trace_processor sorts packets by timestamp, so tracks need not interleave.
#include "analyzer/export/export_perfetto.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "analyzer/render/text/text_common.h"
#include "proto/perfetto_trace.pb.h"

namespace cumemtrace::analyzer {
namespace {

constexpr uint32_t kSequence = 1;
constexpr uint64_t kProcessUuid = 1;
constexpr uint64_t kOomUuid = 2;
constexpr uint64_t kPeakUuid = 3;
constexpr uint64_t kSeriesUuid = 0x1000;
constexpr uint64_t kDriverUuid = 0x2000;
constexpr uint64_t kPhaseUuid = 0x100000;  // + a track per (thread, domain) of pushed ranges, then one per start/end

using perfetto::TracePacket;
using perfetto::TrackEvent;

TracePacket* NewPacket(perfetto::Trace& trace, uint64_t timestamp) {
  TracePacket* p = trace.add_packet();
  p->set_timestamp(timestamp);
  p->set_trusted_packet_sequence_id(kSequence);
  return p;
}

void DescribeCounterTrack(perfetto::Trace& trace, uint64_t ts, uint64_t uuid, const std::string& name) {
  perfetto::TrackDescriptor* d = NewPacket(trace, ts)->mutable_track_descriptor();
  d->set_uuid(uuid);
  d->set_parent_uuid(kProcessUuid);
  d->set_name(name);
  d->mutable_counter()->set_unit(perfetto::CounterDescriptor::UNIT_SIZE_BYTES);
}

void EventTrack(perfetto::Trace& trace, uint64_t ts, uint64_t uuid, const std::string& name) {
  perfetto::TrackDescriptor* d = NewPacket(trace, ts)->mutable_track_descriptor();
  d->set_uuid(uuid);
  d->set_parent_uuid(kProcessUuid);
  d->set_name(name);
}

void Counter(perfetto::Trace& trace, uint64_t ts, uint64_t uuid, uint64_t value) {
  TrackEvent* e = NewPacket(trace, ts)->mutable_track_event();
  e->set_type(TrackEvent::TYPE_COUNTER);
  e->set_track_uuid(uuid);
  e->set_counter_value(static_cast<int64_t>(value));
}

TrackEvent* Instant(perfetto::Trace& trace, uint64_t ts, uint64_t uuid, const std::string& name) {
  TrackEvent* e = NewPacket(trace, ts)->mutable_track_event();
  e->set_type(TrackEvent::TYPE_INSTANT);
  e->set_track_uuid(uuid);
  e->set_name(name);
  e->add_categories("cumemtrace");
  return e;
}

void Annotate(TrackEvent* e, const std::string& name, uint64_t value) {
  perfetto::DebugAnnotation* a = e->add_debug_annotations();
  a->set_name(name);
  a->set_uint_value(value);
}

}  // namespace

std::string PerfettoTrace(const TimelineReport& r) {
  perfetto::Trace trace;
  const uint64_t start = static_cast<uint64_t>(std::max<int64_t>(r.start_ns, 0));
  auto at = [&](int64_t rel) { return start + static_cast<uint64_t>(std::max<int64_t>(rel, 0)); };

  TracePacket* first = NewPacket(trace, start);
  first->set_sequence_flags(1);  // SEQ_INCREMENTAL_STATE_CLEARED
  perfetto::TrackDescriptor* process = first->mutable_track_descriptor();
  process->set_uuid(kProcessUuid);
  process->mutable_process()->set_pid(r.pid);
  process->mutable_process()->set_process_name(absl::StrCat(r.process_name, " (CUDA memory)"));
  EventTrack(trace, start, kOomUuid, "failed allocations");
  EventTrack(trace, start, kPeakUuid, "peaks");

  for (size_t i = 0; i < r.series.size(); ++i) {
    const uint64_t uuid = kSeriesUuid + i;
    DescribeCounterTrack(trace, start, uuid, r.series[i].name);
    for (const CounterPoint& p : r.series[i].points) Counter(trace, at(p.time_ns), uuid, p.bytes);
  }
  absl::flat_hash_map<int32_t, bool> driver_tracks;
  for (const DriverUsed& p : r.driver) {
    const uint64_t uuid = kDriverUuid + static_cast<uint64_t>(p.device + 1);
    if (!driver_tracks[p.device]) {
      driver_tracks[p.device] = true;
      DescribeCounterTrack(trace, start, uuid, absl::StrCat(DeviceName(p.device), " driver: used"));
    }
    Counter(trace, at(p.time_ns), uuid, p.bytes);
  }
  // Phases (NVTX ranges): pushed ranges as nested slices on a track per thread and domain; a start/end range,
  // which may overlap others, on a track of its own.
  absl::flat_hash_map<std::pair<uint32_t, uint32_t>, uint64_t> phase_tracks;
  uint64_t next_phase_track = kPhaseUuid;
  for (const PhaseSpan& p : r.phases) {
    uint64_t uuid;
    if (p.stacked) {
      auto [it, inserted] = phase_tracks.try_emplace(std::make_pair(p.thread, p.domain), next_phase_track);
      if (inserted) {
        ++next_phase_track;
        EventTrack(trace, start, it->second,
                   absl::StrCat("phases: thread ", p.thread, p.domain != 0 ? absl::StrCat(" domain ", p.domain) : ""));
      }
      uuid = it->second;
    } else {
      uuid = next_phase_track++;
      EventTrack(trace, start, uuid, absl::StrCat("phase: ", p.name));
    }
    TrackEvent* begin = NewPacket(trace, at(p.begin_ns))->mutable_track_event();
    begin->set_type(TrackEvent::TYPE_SLICE_BEGIN);
    begin->set_track_uuid(uuid);
    begin->set_name(p.name);
    begin->add_categories("nvtx");
    TrackEvent* end = NewPacket(trace, at(p.end_ns))->mutable_track_event();
    end->set_type(TrackEvent::TYPE_SLICE_END);
    end->set_track_uuid(uuid);
  }
  for (const OomInstant& o : r.ooms) {
    TrackEvent* ev = Instant(trace, at(o.time_ns), kOomUuid,
                             absl::StrCat("OOM: ", o.api, " ", HumanBytes(o.requested_bytes), " on ",
                                          DeviceName(o.device), " (", o.error, ")"));
    Annotate(ev, "requested_bytes", o.requested_bytes);
    Annotate(ev, "live_bytes", o.live_bytes);
    if (o.has_mem_info) {
      Annotate(ev, "free_bytes", o.free_bytes);
      Annotate(ev, "total_bytes", o.total_bytes);
    }
  }
  for (const PeakInstant& p : r.peaks) {
    TrackEvent* ev = Instant(trace, at(p.time_ns), kPeakUuid,
                             absl::StrCat("peak of ", p.timeline, ": ", HumanBytes(p.peak_bytes)));
    Annotate(ev, "peak_bytes", p.peak_bytes);
  }
  return trace.SerializeAsString();
}

}  // namespace cumemtrace::analyzer
