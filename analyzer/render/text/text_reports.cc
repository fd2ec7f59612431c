// The reports as text for people. Layout only: must never compute anything the report did not.
#include "analyzer/render/text/text_reports.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/model/memory/timelines.h"
#include "analyzer/render/phases_render.h"
#include "analyzer/render/text/text_common.h"
#include "analyzer/render/text/text_owners.h"
#include "analyzer/render/text/text_torch.h"

namespace cumemtrace::analyzer {
namespace {

constexpr char kFrameIndent[] = "        ";

std::string CommandLine(const TraceHeader& h) {
  std::vector<std::string> args;
  for (const std::string& a : h.argv) args.push_back(Printable(a));
  return args.empty() ? std::string("(unknown command)") : absl::StrJoin(args, " ");
}

// Events processed out of order make every number after them suspect: say so before any number is printed.
void AppendOrderWarning(const Overview& o, std::string* out) {
  const ReadStats& s = o.info->stats;
  if (s.late_events == 0) return;
  absl::StrAppendFormat(out,
                        "WARNING: %d events reached the analyzer after later ones (up to %d sequence numbers late)%s: "
                        "the peaks, live sets and leaks below may be wrong.\n\n",
                        s.late_events, s.max_lateness,
                        s.order_marked ? "" : " in a trace without order marks (written by an older preload)");
}

// ", times to 10 us" for a trace written with CUMEMTRACE_TIME_RESOLUTION, "" for one in nanoseconds.
std::string TimeResolution(const TraceInfo& info) {
  const uint64_t unit = info.stats.time_unit_ns;
  if (unit <= 1) return "";
  if (unit % 1000000 == 0) return absl::StrCat(", times to ", unit / 1000000, " ms");
  if (unit % 1000 == 0) return absl::StrCat(", times to ", unit / 1000, " us");
  return absl::StrCat(", times to ", unit, " ns");
}

// One line naming the trace and its process, for the reports other than the summary.
void AppendTraceLine(const Overview& o, std::string* out) {
  AppendOrderWarning(o, out);
  const TraceInfo& info = *o.info;
  absl::StrAppend(out, "trace ", Printable(info.path), ": pid ", info.header.pid, " ", CommandLine(info.header),
                  ", ran ", Seconds(info.DurationNs()), TimeResolution(info), "\n\n");
  if (o.phases != nullptr) AppendPhaseFilterText(*o.phases, out);
}

void AppendProcess(const Overview& o, std::string* out) {
  AppendOrderWarning(o, out);
  const TraceInfo& info = *o.info;
  const TraceHeader& h = info.header;
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"trace", Printable(info.path)});
  rows.push_back({"process", absl::StrCat("pid ", h.pid, "  ", CommandLine(h))});
  if (!h.executable.empty()) rows.push_back({"executable", Printable(h.executable)});
  rows.push_back({"host", absl::StrCat(h.hostname.empty() ? "unknown" : Printable(h.hostname), "   started ",
                                       UtcDate(h.start_unix_time_ns), "   ran ", Seconds(info.DurationNs()),
                                       TimeResolution(info))});
  bool first = true;
  for (const auto& [ordinal, d] : info.devices) {
    if (ordinal == format::kHostDevice) continue;
    rows.push_back({first ? "devices" : "",
                    absl::StrCat(DeviceName(ordinal), "  ", Printable(d.name), "  ", HumanBytes(d.total_memory))});
    first = false;
  }
  absl::StrAppend(out, Table(rows, "ll"), "\n");
}

// GPUs by ordinal first, the host last; on each device the total first, then kinds in their order.
bool SectionBefore(const PeakSection* a, const PeakSection* b) {
  if (a->device != b->device) {
    if (a->device == format::kHostDevice || b->device == format::kHostDevice) return b->device == format::kHostDevice;
    return a->device < b->device;
  }
  const int ra = a->series == kDeviceTotalSeries ? -1 : a->series;
  const int rb = b->series == kDeviceTotalSeries ? -1 : b->series;
  return ra < rb;
}

bool IsAddressSpace(const PeakSection& s) { return s.series == static_cast<int>(format::Kind::kAddressReserve); }

std::vector<const PeakSection*> OrderedSections(const PeakReport& r, bool with_totals, bool address_space) {
  std::vector<const PeakSection*> out;
  if (with_totals && !address_space) {
    for (const PeakSection& s : r.device_totals) out.push_back(&s);
  }
  for (const PeakSection& s : r.peaks) {
    if (IsAddressSpace(s) == address_space) out.push_back(&s);
  }
  std::stable_sort(out.begin(), out.end(), SectionBefore);
  return out;
}

void AppendPeakSection(const PeakSection& s, std::string* out, size_t stacks = SIZE_MAX) {
  const std::string kind = s.series == kDeviceTotalSeries ? std::string("total device memory") : s.kind;
  absl::StrAppendFormat(out, "%s, %s: peak %s at %s, %s live (at the end: %s in %d)\n", DeviceName(s.device), kind,
                        HumanBytes(s.peak_bytes), Seconds(s.peak_time_ns),
                        Plural(s.peak_count, "allocation", "allocations"), HumanBytes(s.final_bytes),
                        s.final_count);
  if (s.snapshot_taken) AppendGroups(s.top, s.other_bytes, s.other_count, s.group_count, out, stacks);
  out->push_back('\n');
}

// `with_address_space`: also the kinds that are not memory (address reservations, mappings).
void AppendPeakTable(const PeakReport& r, bool with_address_space, std::string* out) {
  const std::vector<const PeakSection*> memory = OrderedSections(r, true, false);
  const std::vector<const PeakSection*> address_space =
      with_address_space ? OrderedSections(r, false, true) : std::vector<const PeakSection*>{};
  if (memory.empty() && address_space.empty()) {
    absl::StrAppend(out, "No allocations traced.\n\n");
    return;
  }
  auto row = [](const PeakSection* s) {
    return std::vector<std::string>{DeviceName(s->device),
                                    s->series == kDeviceTotalSeries ? std::string("total") : s->kind,
                                    HumanBytes(s->peak_bytes),
                                    Seconds(s->peak_time_ns),
                                    absl::StrCat(s->peak_count),
                                    HumanBytes(s->final_bytes)};
  };
  if (!memory.empty()) {
    std::vector<std::vector<std::string>> rows = {{"Peak memory", "kind", "peak", "at", "live", "at the end"}};
    for (const PeakSection* s : memory) rows.push_back(row(s));
    absl::StrAppend(out, Table(rows, "llrrrr"));
    absl::StrAppend(out, "(total = device + managed + pool + vmm_physical on that device)\n\n");
  }
  if (!address_space.empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"Address space (not memory)", "kind", "peak", "at", "live", "at the end"}};
    for (const PeakSection* s : address_space) rows.push_back(row(s));
    absl::StrAppend(out, Table(rows, "llrrrr"), "\n");
  }
}

// What the allocator replay says of settings, under the verdict: only what it checked.
void AppendReplayChecks(const OomReport& r, std::string* out) {
  if (!r.replayed) return;
  if (!r.replay_unchecked.empty()) {
    absl::StrAppend(out, "  no setting is advised: ", r.replay_unchecked, "\n");
    return;
  }
  std::vector<std::string> answers;
  for (const ReplayCheck& c : r.replay_checks) {
    const std::string what = c.without_outside ? "without the memory outside PyTorch" : c.setting;
    answers.push_back(c.oom ? absl::StrCat(what, ": still out of memory")
                            : absl::StrCat(what, ": every recorded request fits, ", HumanBytes(c.reserved_peak),
                                           " reserved at the peak"));
  }
  if (answers.empty()) return;
  // The replay knows the requests up to the end of the trace: a run that stopped at its OOM made none after it.
  absl::StrAppend(out, "  the allocator replay (it reproduced this run exactly",
                  r.replay_under_cap ? absl::StrCat("; the memory cap kept as recorded, between ", HumanBytes(r.cap_low),
                                                    " and ", HumanBytes(r.cap_high))
                                     : "",
                  "): ", absl::StrJoin(answers, "; "), "\n");
}

void AppendOom(const OomEntry& o, bool details, std::string* out) {
  absl::StrAppendFormat(out, "seq %d at %s: %s of %s on %s (%s) failed: %s (%d)%s\n", o.seq, Seconds(o.time_ns),
                        o.api, HumanBytes(o.requested_bytes), DeviceName(o.device), o.kind, o.error, o.error_code,
                        o.recovered ? "; PyTorch's allocator then released cache, asked again and was served: "
                                      "not a failure the program saw"
                                    : "");
  if (o.has_mem_info) {
    absl::StrAppendFormat(out, "  driver: %s free of %s\n", HumanBytes(o.free_bytes), HumanBytes(o.total_bytes));
  } else {
    absl::StrAppend(out, "  driver: free memory unknown\n");
  }
  absl::StrAppendFormat(out, "  traced live %s: %s in %s\n",
                        o.live_is_host ? "host memory" : absl::StrCat("on ", DeviceName(o.device)),
                        HumanBytes(o.live_bytes), Plural(o.live_count, "allocation", "allocations"));
  if (!o.phase.empty()) absl::StrAppend(out, "  in phase ", Printable(o.phase), "\n");
  if (o.has_verdict) absl::StrAppend(out, "  PyTorch's allocator asked: ", VerdictText(o.verdict, {}), "\n");
  absl::StrAppend(out, "  requested by thread ", ThreadLabel(o.thread, o.thread_name), " at\n");
  AppendStack(o.stack, o.view, kFrameIndent, out);
  if (details && o.snapshot_taken && !o.live_by_stack.empty()) {
    absl::StrAppend(out, "  live then, by group:\n");
    AppendGroups(o.live_by_stack, o.other_bytes, o.other_count, o.group_count, out);
  }
}

std::string GrowthText(const std::array<uint64_t, kGrowthPoints>& growth) {
  std::vector<std::string> parts;
  for (uint64_t b : growth) parts.push_back(HumanBytes(b));
  return absl::StrJoin(parts, ", ");
}

void AppendLeakEntries(const LeakReport& r, std::string* out) {
  for (const LeakEntry& e : r.top) {
    absl::StrAppendFormat(out, "  %10s  %-16s  %s, %s  %s%s\n", HumanBytes(e.bytes),
                          Plural(e.count, "allocation", "allocations"), DeviceName(e.device), e.kind,
                          GroupLabelText(e.label, e.stack_id),
                          e.pytorch_cache ? "  [cached by PyTorch: not a leak]" : "");
    absl::StrAppend(out, kFrameIndent, "live at each quarter of the run: ", GrowthText(e.growth), "\n");
    if (!e.phase.empty()) absl::StrAppend(out, kFrameIndent, "allocated in phase ", Printable(e.phase), "\n");
    AppendStack(e.frames, e.view, kFrameIndent, out);
  }
  if (r.group_count > r.top.size()) {
    absl::StrAppendFormat(out, "  ... and %s more\n", Plural(r.group_count - r.top.size(), "group", "groups"));
  }
}

// "3.0 GiB in 1200 allocations still live at exit; 2.9 GiB of it allocated at train.py:55 step (1100
// allocations), growing over the run: 742.0 MiB, 1.5 GiB, 2.2 GiB, 2.9 GiB"
std::string LeakDiagnosis(const LeakReport& r) {
  if (r.memory_count == 0) return "Nothing was live at the end of the trace.\n";
  std::string out = absl::StrFormat("%s in %s still live %s", HumanBytes(r.memory_bytes),
                                    Plural(r.memory_count, "allocation", "allocations"),
                                    r.clean_end ? "at exit" : "when the trace ended (no clean exit)");
  const LeakEntry* top = nullptr;
  for (const LeakEntry& e : r.top) {
    if (e.bytes != 0 && !e.address_space_or_view) {
      top = &e;
      break;
    }
  }
  if (top != nullptr) {
    std::string where = WhereText(top->label);
    if (where.empty()) where = absl::StrCat("stack #", top->stack_id);
    absl::StrAppendFormat(&out, "; %s of it allocated at %s (%s of %s on %s)", HumanBytes(top->bytes), where,
                          Plural(top->count, "allocation", "allocations"), top->kind, DeviceName(top->device));
    if (top->growth.front() < top->growth.back()) {
      absl::StrAppend(&out, ", growing over the run: ", GrowthText(top->growth));
    }
  }
  out += "\n";
  return out;
}

// "device 0 ran out of memory at train.py:42 validate: cudaMalloc of 2.0 GiB failed (out of memory), 1.1 GiB free
// of 139.8 GiB; 137.2 GiB was live, 96% of it allocated at train.py:37 train_step"
std::string OomDiagnosis(const OomEntry& o) {
  std::string out = absl::StrCat(DeviceName(o.device), " ran out of memory");
  if (const std::string where = WhereText(o.request); !where.empty()) absl::StrAppend(&out, " at ", where);
  absl::StrAppendFormat(&out, ": %s of %s failed (%s)", o.api, HumanBytes(o.requested_bytes),
                        o.out_of_memory ? std::string("out of memory") : o.error);
  if (o.has_mem_info) {
    absl::StrAppendFormat(&out, ", %s free of %s", HumanBytes(o.free_bytes), HumanBytes(o.total_bytes));
  }
  absl::StrAppendFormat(&out, "; %s was live", HumanBytes(o.live_bytes));
  if (o.live_is_host) absl::StrAppend(&out, " in host memory");
  if (o.snapshot_taken && !o.live_by_stack.empty()) {
    const ResolvedGroup& g = o.live_by_stack.front();
    std::string where = WhereText(g.label);
    if (where.empty()) where = absl::StrCat("stack #", g.stack_id);
    absl::StrAppendFormat(&out, ", %.0f%% of it allocated at %s", g.share * 100.0, where);
  }
  out += "\n";
  return out;
}

void AppendLeakTotals(const LeakReport& r, std::string* out) {
  std::vector<std::vector<std::string>> rows;
  for (const LeakTotal& t : r.totals) {
    rows.push_back({DeviceName(t.device), format::KindName(t.kind), HumanBytes(t.bytes),
                    Plural(t.count, "allocation", "allocations"),
                    IsMemoryKind(t.kind) ? "" : "(not counted as memory)"});
  }
  absl::StrAppend(out, Table(rows, "llrll", "  "));
}

std::string LeakHeadline(const LeakReport& r) {
  if (r.totals.empty()) return "Leaks: nothing live at the end of the trace.\n";
  const char* end = r.clean_end ? "" : " (it has no clean end: the process may still have freed them)";
  if (r.pytorch_cache_driver_bytes == 0) {
    return absl::StrFormat("Leaks: %s in %s live at the end of the trace%s\n", HumanBytes(r.memory_bytes),
                           Plural(r.memory_count, "allocation", "allocations"), end);
  }
  // PyTorch's cached segments are its cache, and its tensors are counted above them: what is left is other memory.
  const uint64_t bytes = r.memory_bytes - std::min(r.memory_bytes, r.pytorch_cache_driver_bytes);
  const uint64_t count = r.memory_count - std::min(r.memory_count, r.pytorch_cache_driver_count);
  if (count == 0) return absl::StrFormat("Leaks: none beyond PyTorch's tensors and its cache%s\n", end);
  return absl::StrFormat("Leaks beyond PyTorch's tensors and its cache: %s in %s live at the end of the trace%s\n",
                         HumanBytes(bytes), Plural(count, "allocation", "allocations"), end);
}

// When a later phase peaks above the first one (validation above training, the commonest surprise), one line saying
// so: with PyTorch's tensors traced, by their allocated bytes; otherwise by the device total. "" otherwise.
std::string PhasePeakHeadline(const PhaseResults& phases) {
  if (phases.phases.size() < 2) return "";
  auto peak_of = [](const PhaseSummary& s, int series, int32_t* device) {
    uint64_t best = 0;
    for (const PhasePeak& p : s.peaks) {
      if (p.series == series && p.peak_bytes > best) {
        best = p.peak_bytes;
        *device = p.device;
      }
    }
    return best;
  };
  int series = kTorchAllocatedSeries;
  int32_t device = 0;
  if (peak_of(phases.phases.front(), series, &device) == 0) series = kDeviceTotalSeries;
  const PhaseSummary& first = phases.phases.front();
  const uint64_t first_peak = peak_of(first, series, &device);
  const PhaseSummary* highest = nullptr;
  uint64_t highest_peak = first_peak;
  for (size_t i = 1; i < phases.phases.size(); ++i) {
    const uint64_t peak = peak_of(phases.phases[i], series, &device);
    if (peak > highest_peak) {
      highest = &phases.phases[i];
      highest_peak = peak;
    }
  }
  if (highest == nullptr) return "";
  return absl::StrFormat("Phase %s peaks above %s%s: %s %s against %s\n", Printable(highest->name),
                         Printable(first.name),
                         phases.detected ? " (phases found from backward passes, no NVTX ranges)" : "",
                         HumanBytes(highest_peak),
                         series == kTorchAllocatedSeries ? "of tensors" : "of device memory", HumanBytes(first_peak));
}

// "Failed allocations: 1 (and 2 that PyTorch's allocator recovered from)".
std::string FailureCount(const OomReport& r) {
  const uint64_t failed = r.total - std::min(r.total, r.recovered);
  std::string out = absl::StrCat("Failed allocations: ", failed == 0 ? std::string("none") : absl::StrCat(failed));
  if (r.recovered != 0) {
    absl::StrAppend(&out, " (and ", r.recovered,
                    " that PyTorch's allocator recovered from by releasing its cache: not failures)");
  }
  return out;
}

// The spike's line, and its stack unless `line_only` (the summary's: the line names the place already).
void AppendSpike(const PinnedSpike& s, std::string* out, bool line_only = false) {
  absl::StrAppendFormat(out, "  +%s in %s .. %s (%s -> %s), mostly by thread %s: %s %s\n",
                        HumanBytes(s.rise_bytes), Seconds(s.start_ns), Seconds(s.end_ns), HumanBytes(s.start_bytes),
                        HumanBytes(s.max_bytes), ThreadLabel(s.thread, s.thread_name), HumanBytes(s.allocated_bytes),
                        GroupLabelText(s.label, s.stack_id));
  if (!line_only) AppendStack(s.stack, s.view, kFrameIndent, out);
}

void AppendHealth(const Overview& o, std::string* out) {
  const TraceInfo& info = *o.info;
  absl::StrAppendFormat(out, "Health: %d events read", info.stats.events);
  if (info.stats.unknown_api_events != 0) {
    absl::StrAppendFormat(out, ", %d with an unknown api skipped", info.stats.unknown_api_events);
  }
  if (info.stats.late_events != 0) {
    absl::StrAppendFormat(out, ", %d out of order (numbers may be wrong)", info.stats.late_events);
  }
  if (info.stats.damaged_packets != 0) {
    absl::StrAppendFormat(out, ", %d damaged packets skipped (%d bytes)", info.stats.damaged_packets,
                          info.stats.skipped_bytes);
  }
  if (info.stats.undecodable_batches != 0) {
    absl::StrAppendFormat(out, ", %d compressed batches not inflated (their frame was damaged)",
                          info.stats.undecodable_batches);
  }
  if (o.model.unmatched_frees != 0) absl::StrAppendFormat(out, ", %d frees of nothing live", o.model.unmatched_frees);
  if (o.model.predating_torch_frees != 0) {
    absl::StrAppendFormat(out, ", %d PyTorch blocks freed that were allocated before the tracker was attached",
                          o.model.predating_torch_frees);
  }
  if (o.model.overwritten != 0) {
    absl::StrAppendFormat(out, ", %d allocations at an address already live", o.model.overwritten);
  }
  if (info.has_trailer) {
    const TrailerInfo& t = info.trailer;
    absl::StrAppendFormat(out, "; the tool wrote %d events, dropped %d, %d unwind failures, %d truncated stacks",
                          t.events, t.dropped_events, t.unwind_failures, t.truncated_stacks);
    if (t.wrapper_slots_exhausted != 0) {
      absl::StrAppendFormat(out, ", %d driver pointers not wrapped", t.wrapper_slots_exhausted);
    }
    if (info.header.python_frames_enabled) {
      absl::StrAppendFormat(out, "; %d stacks with Python frames", t.python_stacks);
      if (t.python_failures != 0) absl::StrAppendFormat(out, " (%d Python frame chains broken)", t.python_failures);
    }
    if (info.header.cupti_enabled) {
      absl::StrAppendFormat(out, "; CUPTI saw %d memory calls interposition missed", t.cupti_only_events);
    }
  } else if (info.stats.truncated) {
    absl::StrAppendFormat(out, "; the trace is cut off at byte %d", info.stats.truncated_at);
  } else {
    absl::StrAppend(out, "; no trailer (the process did not exit cleanly)");
  }
  out->append("\n");
  for (const NoticeInfo& n : info.notices) absl::StrAppendFormat(out, "Note: %s\n", n.message);
}

}  // namespace

std::string PeakText(const Overview& o, const PeakReport& r) {
  std::string out;
  AppendTraceLine(o, &out);
  AppendPeakTable(r, true, &out);
  AppendPhasesText(r.phases, r.start_ns, &out);
  for (const PeakSection* s : OrderedSections(r, true, false)) AppendPeakSection(*s, &out);
  AppendTorchLayerNote(r.torch_layer, &out);
  AppendTorchPeaks(r.torch, true, &out);
  return out;
}

std::string LeaksText(const Overview& o, const LeakReport& r) {
  std::string out;
  AppendTraceLine(o, &out);
  if (r.torch_layer.present) out += TorchLeakDiagnosis(r);
  out += LeakDiagnosis(r);
  out += "\n";
  out += LeakHeadline(r);
  AppendLeakTotals(r, &out);
  if (!r.top.empty()) {
    absl::StrAppend(&out, "\nLargest groups:\n");
    AppendLeakEntries(r, &out);
  }
  return out;
}

std::string OomText(const Overview& o, const OomReport& r) {
  std::string out;
  AppendTraceLine(o, &out);
  if (r.total == 0 && r.torch_total == 0) {
    absl::StrAppend(&out, "No failed allocations.\n");
    return out;
  }
  if (!r.torch_ooms.empty()) {
    const TorchOomEntry& last = r.torch_ooms.back();
    absl::StrAppend(&out, DeviceName(last.device), ": PyTorch ran out of memory: ",
                    VerdictText(last.verdict, last.tensors), "\n");
    out += AutogradText(last.autograd);
    out += OtherProcessesText(last.device, last.verdict.processes);
    AppendReplayChecks(r, &out);
    AppendTorchLayerNote(r.torch_layer, &out);
    absl::StrAppend(&out, "\n", Plural(r.torch_total, "OOM in PyTorch's allocator", "OOMs in PyTorch's allocator"),
                    "\n\n");
    for (const TorchOomEntry& t : r.torch_ooms) {
      AppendTorchOom(t, true, &out);
      out.push_back('\n');
    }
  }
  if (r.total == 0) return out;
  if (const OomEntry* last = r.LastFailure(); last != nullptr) {
    out += OomDiagnosis(*last);
    if (r.torch_ooms.empty()) out += OtherProcessesText(last->device, last->processes);
    if (r.total - r.recovered > 1) absl::StrAppend(&out, "(that was the last of them)\n");
  }
  out += "\n";
  absl::StrAppend(&out, FailureCount(r));
  if (r.ooms.size() < r.total) absl::StrAppendFormat(&out, " (%d kept: the first and the last)", r.ooms.size());
  absl::StrAppend(&out, "\n\n");
  for (const OomEntry& e : r.ooms) {
    AppendOom(e, true, &out);
    out.push_back('\n');
  }
  return out;
}

std::string PinnedText(const Overview& o, const PinnedReport& r) {
  std::string out;
  AppendTraceLine(o, &out);
  if (r.allocations == 0) {
    absl::StrAppend(&out, "No pinned host memory allocated.\n");
    return out;
  }
  absl::StrAppendFormat(&out, "Pinned host memory: peak %s at %s; %s, %s in all; %s live at the end\n",
                        HumanBytes(r.peak_bytes), Seconds(r.peak_time_ns),
                        Plural(r.allocations, "allocation", "allocations"), HumanBytes(r.allocated_bytes),
                        HumanBytes(r.final_bytes));
  absl::StrAppendFormat(&out, "\nLargest rises (windows of %s):\n", Seconds(r.window_ns));
  for (const PinnedSpike& s : r.spikes) AppendSpike(s, &out);
  absl::StrAppend(&out, "\nTimeline (the most live in each interval):\n");
  uint64_t max = 1;
  for (const TimelinePoint& p : r.timeline) max = std::max(max, p.bytes);
  std::vector<std::vector<std::string>> rows;
  for (const TimelinePoint& p : r.timeline) {
    const int bar = static_cast<int>(static_cast<double>(p.bytes) * 40.0 / static_cast<double>(max) + 0.5);
    rows.push_back({Seconds(p.time_ns), HumanBytes(p.bytes), std::string(bar, '#')});
  }
  absl::StrAppend(&out, Table(rows, "rrl", "  "));
  return out;
}

std::string DiagnosisText(const OomReport& ooms, const LeakReport& leaks, const PhaseResults& phases,
                          const std::vector<TorchPeakSection>& torch_peaks) {
  std::string out;
  // Why it ran out of memory, then whether a later phase needed more than the first (validation above training:
  // what users most often meet), then what inflated the peak, then what it leaked.
  // Only a request refused for lack of memory is an out-of-memory (a refused capability probe is not).
  const OomEntry* failure = ooms.LastFailure();
  if (failure != nullptr && !failure->out_of_memory) failure = nullptr;
  if (!ooms.torch_ooms.empty()) {
    const TorchOomEntry& last = ooms.torch_ooms.back();
    absl::StrAppend(&out, "Out of memory: ", DeviceName(last.device), ": PyTorch ran out of memory: ",
                    VerdictText(last.verdict, last.tensors), "\n");
    out += AutogradText(last.autograd);
    out += OtherProcessesText(last.device, last.verdict.processes);
    AppendReplayChecks(ooms, &out);
  } else if (failure != nullptr) {
    absl::StrAppend(&out, "Out of memory: ", OomDiagnosis(*failure));
    out += OtherProcessesText(failure->device, failure->processes);
  }
  out += PhasePeakHeadline(phases);
  if (ooms.torch_ooms.empty()) {
    // No OOM to explain: a peak that autograd's graph inflated is the next thing worth acting on.
    for (const TorchPeakSection& s : torch_peaks) {
      if (std::string autograd = AutogradText(s.autograd); !autograd.empty()) {
        absl::StrAppend(&out, DeviceName(s.device), ", at the tensor peak of ", HumanBytes(s.allocated_peak_bytes),
                        ": ", autograd);
      }
    }
  }
  if (leaks.torch_layer.present) out += TorchLeakDiagnosis(leaks);
  out += LeakHeadline(leaks);
  return out;
}

std::string SummaryText(const Overview& o, const SummaryReport& r) {
  std::string out;
  AppendProcess(o, &out);
  out += DiagnosisText(r.ooms, r.leaks, r.peak.phases, r.peak.torch);  // the answer first
  out.push_back('\n');

  AppendPeakTable(r.peak, false, &out);
  AppendPhasesText(r.peak.phases, r.peak.start_ns, &out);
  // One listing per device: what was live at its total peak, or, with PyTorch's tensors traced, at their peak (the
  // segments holding them are the same memory, listed by the allocator's own frames). `peak` lists every kind; the
  // owners table below names the other holders, and the pinned line the host's.
  for (const PeakSection* s : OrderedSections(r.peak, true, false)) {
    if (s->device == format::kHostDevice) continue;
    const bool torch = r.peak.torch_layer.present && s->series == static_cast<int>(format::Kind::kTorchBlock);
    const bool total = !r.peak.torch_layer.present && s->series == kDeviceTotalSeries;
    // The largest group's stack; the others' lines name their place.
    if (torch || total) AppendPeakSection(*s, &out, 1);
  }
  AppendTorchLayerNote(r.peak.torch_layer, &out);
  AppendTorchPeakFigures(r.peak.torch, &out);
  AppendOwnersText(r, &out);
  AppendDriverMemoryText(r, &out);

  absl::StrAppend(&out, FailureCount(r.ooms), "\n");
  if (r.pinned.allocations == 0) {
    absl::StrAppend(&out, "Pinned host memory: none\n");
  } else {
    absl::StrAppendFormat(&out, "Pinned host memory: peak %s at %s\n", HumanBytes(r.pinned.peak_bytes),
                          Seconds(r.pinned.peak_time_ns));
    if (!r.pinned.spikes.empty()) AppendSpike(r.pinned.spikes.front(), &out, true);
  }
  AppendHealth(o, &out);
  absl::StrAppend(&out, "Details: cumem-analyze peak|leaks|oom|pinned ", Printable(o.info->path),
                  " (--top N, --frames N for more)\n");
  return out;
}

}  // namespace cumemtrace::analyzer
