// PyTorch's caching allocator as text (see text_torch.h). Layout only.
#include "analyzer/render/text/text_torch.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/model/stacks/frame_class.h"
#include "analyzer/render/text/text_common.h"

namespace cumemtrace::analyzer {
namespace {

// "pid 818 (python3 x.py holder) 59.98 GiB, pid 90 ...".
std::string ProcessList(const OtherProcesses& p) {
  std::vector<std::string> parts;
  for (const GpuProcessInfo& process : p.others) {
    std::string part = absl::StrCat("pid ", process.pid);
    if (!process.command.empty()) {
      std::string command = Printable(process.command);
      if (command.size() > 60) command = command.substr(0, 57) + "...";
      absl::StrAppend(&part, " (", command, ")");
    }
    absl::StrAppend(&part, " ", process.used_unknown ? std::string("memory unknown") : HumanBytes(process.used_bytes));
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, ", ");
}

std::string OutsideText(const OomVerdict& v) {
  std::vector<std::string> parts;
  for (const OutsideOwner& o : v.outside) {
    parts.push_back(absl::StrCat(Printable(o.name.display_name), " ", HumanBytes(o.bytes)));
  }
  const OtherProcesses& p = v.processes;
  if (v.has_outside_untraced && v.outside_untraced_bytes != 0) {
    if (p.listed && !p.others.empty() && p.pids == GpuProcessesInfo::Pids::kSame) {
      // NVML's per-process figures: the rest of what is not traced is this process's own (its CUDA context).
      const uint64_t rest = v.outside_untraced_bytes > p.others_bytes ? v.outside_untraced_bytes - p.others_bytes : 0;
      parts.push_back(absl::StrCat("other processes ", HumanBytes(p.others_bytes), ": ", ProcessList(p)));
      if (rest != 0) parts.push_back(absl::StrCat("not traced (CUDA context) ", HumanBytes(rest)));
    } else {
      parts.push_back(
          absl::StrCat("not traced (CUDA context, other processes) ", HumanBytes(v.outside_untraced_bytes)));
    }
  }
  return parts.empty() ? std::string("none seen") : absl::StrJoin(parts, ", ");
}

// "the code at train.py:41 in evaluate()", or `otherwise`.
std::string LineOf(const std::optional<Frame>& where, const char* otherwise) {
  if (!where.has_value()) return otherwise;
  std::string file = where->file.empty() ? std::string("??") : Printable(std::string(ShortPath(where->file)));
  if (where->line != 0) absl::StrAppend(&file, ":", where->line);
  return absl::StrCat("the code at ", file, " in ", Printable(where->function), "()");
}

std::string WhereOf(const ResolvedGroup& g) {
  std::string where = WhereText(g.label);
  return where.empty() ? absl::StrCat("stack #", g.stack_id) : where;
}

}  // namespace

void AppendTorchLayerNote(const TorchLayerSummary& l, std::string* out) {
  if (!l.present) return;
  absl::StrAppend(out, "PyTorch's caching allocator: ",
                  l.attached ? "blocks traced" : "blocks traced (no attach record)",
                  l.config.empty() ? std::string(", default config")
                                   : absl::StrCat(", PYTORCH_CUDA_ALLOC_CONF=", Printable(l.config)));
  if (!l.estimate) {
    absl::StrAppend(out, "; block extents reconstructed exactly\n");
    return;
  }
  std::vector<std::string> why;
  if (!l.unmodelled.empty()) {
    std::vector<std::string> settings;
    for (const std::string& s : l.unmodelled) settings.push_back(Printable(s));
    why.push_back(absl::StrCat("settings not modelled: ", absl::StrJoin(settings, ", ")));
  }
  if (l.attached && !l.at_first_segment) why.push_back("attached after the allocator's first segment");
  if (l.mismatches != 0) why.push_back(Plural(l.mismatches, "event the layout disagreed with", "events the layout disagreed with"));
  if (l.estimated_blocks != 0) why.push_back(Plural(l.estimated_blocks, "block estimated", "blocks estimated"));
  absl::StrAppend(out, "; allocated bytes are ESTIMATES (", absl::StrJoin(why, "; "), ")\n");
}

namespace {

void AppendTorchFigures(const TorchPeakSection& s, std::string* out) {
  absl::StrAppendFormat(out,
                        "%s, PyTorch tensors: allocated peak %s in %s at %s (requested bytes peak %s); "
                        "reserved peak %s at %s, of which %s allocated and %s reserved but unallocated\n",
                        DeviceName(s.device), HumanBytes(s.allocated_peak_bytes),
                        Plural(s.allocated_peak_count, "tensor", "tensors"), Seconds(s.allocated_peak_time_ns),
                        HumanBytes(s.requested_peak_bytes), HumanBytes(s.reserved_peak_bytes),
                        Seconds(s.reserved_peak_time_ns), HumanBytes(s.allocated_at_reserved_peak),
                        HumanBytes(s.unallocated_at_reserved_peak));
  absl::StrAppendFormat(out, "  at the end: %s allocated in %s, %s reserved, largest cached free block %s\n",
                        HumanBytes(s.at_end.allocated_bytes), Plural(s.at_end.allocations, "tensor", "tensors"),
                        HumanBytes(s.at_end.reserved_bytes), HumanBytes(s.at_end.largest_free_block));
  if (std::string autograd = AutogradText(s.autograd); !autograd.empty()) {
    absl::StrAppend(out, "  at the allocated peak: ", autograd);
  }
}

}  // namespace

void AppendTorchPeaks(const std::vector<TorchPeakSection>& sections, bool details, std::string* out) {
  for (const TorchPeakSection& s : sections) {
    AppendTorchFigures(s, out);
    if (details) {
      if (std::string backward = BackwardText(s.autograd.backward); !backward.empty()) {
        absl::StrAppend(out, "  at the allocated peak: ", backward);
      }
    }
    if (!s.at_allocated_peak.empty()) {
      absl::StrAppend(out, "  tensors live at the allocated peak:\n");
      AppendGroups(s.at_allocated_peak, s.allocated_peak_other_bytes, s.allocated_peak_other_count,
                   s.allocated_peak_groups, out);
    }
    if (details && !s.at_reserved_peak.empty()) {
      absl::StrAppend(out, "  tensors live at the reserved peak:\n");
      AppendGroups(s.at_reserved_peak, s.reserved_peak_other_bytes, s.reserved_peak_other_count,
                   s.reserved_peak_groups, out);
    }
    out->push_back('\n');
  }
}

void AppendTorchPeakFigures(const std::vector<TorchPeakSection>& sections, std::string* out) {
  for (const TorchPeakSection& s : sections) AppendTorchFigures(s, out);
  if (!sections.empty()) out->push_back('\n');
}

std::string AutogradText(const AutogradView& v) {
  const GraphFinding& f = v.finding;
  switch (f.fix) {
    case GraphFix::kNoGrad:
      return absl::StrFormat(
          "Autograd: %s of the %s of live tensors were made inside the model while autograd recorded, by code no "
          "backward pass followed (after %s): their graph keeps them. Wrap %s in `with torch.no_grad():`\n",
          HumanBytes(f.bytes), HumanBytes(v.live_bytes), Plural(f.backward_passes, "backward pass", "backward passes"),
          LineOf(f.where, "the code that made them"));
    case GraphFix::kItem:
      return absl::StrFormat(
          "Autograd: %s in %s made by %s while autograd recorded outlived the backward passes of %u steps: "
          "something keeps them from step to step, a running total of a tensor (`total += value`, which also "
          "keeps each step's graph) or a list of results. Keep `value.item()` (a Python number) or a CPU copy "
          "of what that line computes, not the GPU tensor\n",
          HumanBytes(f.bytes), Plural(f.count, "tensor", "tensors"), LineOf(f.where, "one line"), f.steps);
    case GraphFix::kNone:
      break;
  }
  return "";
}

std::string BackwardText(const BackwardAttribution& b) {
  if (b.bytes == 0) return "";
  std::vector<std::string> parts;
  for (const BackwardNode& n : b.nodes) {
    if (parts.size() == 5) break;
    parts.push_back(absl::StrCat(n.node.empty() ? std::string("no autograd node") : Printable(n.node), " ",
                                 HumanBytes(n.bytes)));
  }
  return absl::StrFormat("Backward pass: %s in %s made by autograd's engine (%s named by autograd node): %s\n",
                         HumanBytes(b.bytes), Plural(b.count, "tensor", "tensors"),
                         HumanBytes(b.named_bytes), absl::StrJoin(parts, ", "));
}

std::string OtherProcessesText(int32_t device, const OtherProcesses& p) {
  if (!p.listed) {
    if (p.error.empty()) return "";
    return absl::StrCat("Other processes on ", DeviceName(device), ": unknown (", Printable(p.error), ")\n");
  }
  const std::string when = p.at_failure ? "at the failure" : absl::StrCat(Seconds(p.age_ns), " before the failure");
  if (p.others.empty()) {
    if (p.pids == GpuProcessesInfo::Pids::kSame) {
      return absl::StrCat("Other processes on ", DeviceName(device), " ", when, ": none\n");
    }
    return "";
  }
  std::string out = absl::StrCat("Other processes on ", DeviceName(device), " ", when, ": ", ProcessList(p));
  if (p.pids == GpuProcessesInfo::Pids::kOtherNamespace) {
    absl::StrAppend(&out, " (pids as the host sees them: this process runs in another pid namespace, a container, "
                          "and is one of them)");
  }
  out += "\n";
  return out;
}

// What is still short when the cause alone would not make room.
std::string StillShort(const OomVerdict& v) {
  return v.cause_suffices ? std::string()
                          : absl::StrCat("; even without it ", HumanBytes(v.still_short_bytes), " would be missing");
}

std::string VerdictText(const OomVerdict& v, const std::vector<ResolvedGroup>& tensors) {
  switch (v.cause) {
    case OomCause::kLargerThanDevice:
      return absl::StrFormat(
          "a request of %s, at least the card's whole memory (%s): it cannot fit, whatever is freed; the program "
          "asks for too much at once",
          HumanBytes(v.request_bytes), HumanBytes(v.device_total_bytes));
    case OomCause::kMemoryCap:
      return absl::StrFormat(
          "a per-process memory cap: the device had %s free for a request of %s, but PyTorch refused it itself "
          "(torch.cuda.set_per_process_memory_fraction); %s reserved, %s of it in tensors",
          HumanBytes(v.driver_free_bytes), HumanBytes(v.request_bytes), HumanBytes(v.reserved_bytes),
          HumanBytes(v.allocated_bytes));
    case OomCause::kFragmentation:
      return absl::StrFormat(
          "fragmentation: %s reserved by PyTorch but unallocated, in holes of at most %s, for a request of %s: "
          "without the holes it would fit%s",
          HumanBytes(v.reserved_unallocated_bytes), HumanBytes(v.largest_free_block), HumanBytes(v.request_bytes),
          StillShort(v));
    case OomCause::kLiveTensors: {
      std::string out = absl::StrFormat("live tensors: %s in %s", HumanBytes(v.allocated_bytes),
                                        Plural(v.tensors, "tensor", "tensors"));
      if (!tensors.empty()) {
        absl::StrAppendFormat(&out, ", %s of them from %s", HumanBytes(tensors.front().bytes),
                              WhereOf(tensors.front()));
      }
      if (v.shortfall_bytes != 0) {
        absl::StrAppendFormat(&out, ", the largest holder; the request of %s needs %s more than the free cache and "
                                    "the device's free memory%s",
                              HumanBytes(v.request_bytes), HumanBytes(v.shortfall_bytes), StillShort(v));
      } else {
        absl::StrAppendFormat(&out, ", the largest holder; the free cache and the device's free memory together "
                                    "would hold the request of %s, but not in one piece",
                              HumanBytes(v.request_bytes));
      }
      return out;
    }
    case OomCause::kOutsidePytorch:
      return absl::StrFormat("memory outside PyTorch: %s (%s), the largest holder, against %s of tensors%s",
                             HumanBytes(v.outside_traced_bytes + v.outside_untraced_bytes), OutsideText(v),
                             HumanBytes(v.allocated_bytes), StillShort(v));
  }
  return "";
}

void AppendTorchOom(const TorchOomEntry& o, bool details, std::string* out) {
  const OomVerdict& v = o.verdict;
  absl::StrAppendFormat(out, "seq %d at %s: PyTorch's allocator could not find %s on %s (thread %s)\n", o.seq,
                        Seconds(o.time_ns), HumanBytes(v.request_bytes), DeviceName(o.device),
                        ThreadLabel(static_cast<uint32_t>(o.thread), o.thread_name));
  absl::StrAppend(out, "  verdict: ", VerdictText(v, o.tensors), "\n");
  absl::StrAppendFormat(out,
                        "  PyTorch: %s allocated in %s, %s reserved, %s reserved but unallocated (largest free "
                        "block %s, %s waiting for streams)\n",
                        HumanBytes(v.allocated_bytes), Plural(v.tensors, "tensor", "tensors"),
                        HumanBytes(v.reserved_bytes), HumanBytes(v.reserved_unallocated_bytes),
                        HumanBytes(v.largest_free_block), HumanBytes(v.pending_free_bytes));
  absl::StrAppendFormat(out, "  device: %s free%s; outside PyTorch: %s\n", HumanBytes(v.driver_free_bytes),
                        v.device_total_bytes != 0 ? absl::StrCat(" of ", HumanBytes(v.device_total_bytes)) : "",
                        OutsideText(v));
  if (std::string autograd = AutogradText(o.autograd); !autograd.empty()) absl::StrAppend(out, "  ", autograd);
  if (!details) return;
  if (std::string backward = BackwardText(o.autograd.backward); !backward.empty()) {
    absl::StrAppend(out, "  ", backward);
  }
  if (!o.tensors.empty()) {
    absl::StrAppend(out, "  tensors live then, by group:\n");
    AppendGroups(o.tensors, o.tensor_other_bytes, o.tensor_other_count, o.tensor_groups, out);
  }
  if (!o.tensors_by_python.empty()) {
    absl::StrAppend(out, "  tensors live then, by Python frame:\n");
    AppendGroups(o.tensors_by_python, o.python_other_bytes, o.python_other_count, o.python_groups, out);
  }
}

std::string TorchLeakDiagnosis(const LeakReport& r) {
  std::string out = absl::StrFormat("%s in %s still live %s (%s requested)", HumanBytes(r.tensor_allocated_bytes),
                                    Plural(r.tensor_count, "PyTorch tensor", "PyTorch tensors"),
                                    r.clean_end ? "at exit" : "when the trace ended",
                                    HumanBytes(r.tensor_requested_bytes));
  for (const LeakEntry& e : r.top) {
    if (std::string_view(e.kind) != "torch_block") continue;
    std::string where = WhereText(e.label);
    if (where.empty()) where = absl::StrCat("stack #", e.stack_id);
    absl::StrAppendFormat(&out, "; %s of it at %s", HumanBytes(e.bytes), where);
    if (e.growth.front() < e.growth.back()) absl::StrAppend(&out, ", growing over the run");
    break;
  }
  absl::StrAppendFormat(&out, ". PyTorch's cache kept %s reserved beyond them: cached by PyTorch, not a leak\n",
                        HumanBytes(r.pytorch_cached_bytes));
  return out;
}

}  // namespace cumemtrace::analyzer
