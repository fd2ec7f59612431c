#include "analyzer/render/text/text_whatif.h"

#include "absl/strings/str_cat.h"
#include "analyzer/render/text/text_common.h"

namespace cumemtrace::analyzer {
namespace {

std::string Settings(const std::string& text) { return text.empty() ? "the defaults" : text; }

std::string Verdict(const WhatIfReport& r) {
  const WhatIf& w = r.replay;
  const ReplayOutcome& o = w.whatif;
  switch (r.claim) {
    case WhatIfClaim::kUnsupported:
      return absl::StrCat("Not replayed: the replay does not restate ", w.unsupported, " yet. Nothing is claimed.");
    case WhatIfClaim::kDiverged:
      return absl::StrCat("Not claimed: under the recorded settings the replay differs from the recorded run at "
                          "event ", w.fidelity.diverged_seq, ": ", w.fidelity.divergence, ".");
    case WhatIfClaim::kNoCapacity:
      return "Not claimed: the trace holds no figure of the card's memory; give --capacity SIZE.";
    case WhatIfClaim::kCapacityModelDisagrees:
      return absl::StrCat(
          "Not claimed: with the card's memory and what was outside PyTorch, the replay under the recorded "
          "settings ",
          w.capacity_check.oom ? absl::StrCat("fails at event ", w.capacity_check.failed_seq) : "runs through",
          ", where the recorded run ",
          w.recorded_oom ? absl::StrCat("failed at event ", w.recorded_oom_seq) : "ran through", ".");
    case WhatIfClaim::kDependsOnCap:
      return absl::StrCat("Not claimed: the answer depends on the exact value of the memory cap, which the trace "
                          "bounds between ", HumanBytes(w.fidelity.cap_low), " and ",
                          HumanBytes(w.fidelity.cap_high), ".");
    case WhatIfClaim::kRunsThrough:
      return absl::StrCat("Runs through: every request is served, ", HumanBytes(o.reserved_peak),
                          " reserved at the peak (recorded: ", HumanBytes(w.recorded_reserved_peak), "), ",
                          HumanBytes(o.headroom), " left on the card at the closest.");
    case WhatIfClaim::kOom:
      return absl::StrCat("Runs out of memory at event ", o.failed_seq, ", a request of ", HumanBytes(o.failed_size),
                          ": ", HumanBytes(o.reserved_at_failure), " reserved (", HumanBytes(o.allocated_at_failure),
                          " of it in tensors; the largest cached free block ",
                          HumanBytes(o.largest_free_at_failure), "), ", HumanBytes(o.outside_at_failure),
                          " outside PyTorch, ", HumanBytes(r.free_at_failure), " free on the card.",
                          (w.fidelity.capped_refusals > 0 || w.whatif_cap != 0) && r.free_at_failure >= o.failed_size
                              ? " The card had room: the per-process memory cap refused it."
                              : "");
  }
  return "";
}

}  // namespace

std::string WhatIfText(const WhatIfReport& r) {
  const WhatIf& w = r.replay;
  std::string out = absl::StrCat("What if, device ", w.device, ": ", Settings(w.settings),
                                 w.capacity != w.recorded_capacity && w.capacity != 0
                                     ? absl::StrCat(", a card of ", HumanBytes(w.capacity))
                                     : "",
                                 w.without_outside ? ", nothing outside PyTorch" : "", "\n");
  absl::StrAppend(&out, "  ", Verdict(r), "\n");
  for (const std::string& note : w.notes) absl::StrAppend(&out, "  Note: ", note, ".\n");
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, "Recorded run: ", Settings(w.recorded_settings), ", ", w.torch_requests, " requests, ",
                  HumanBytes(w.recorded_reserved_peak), " reserved at the peak, ",
                  w.recorded_oom ? absl::StrCat("out of memory at event ", w.recorded_oom_seq) : "no OOM", "; card ",
                  w.recorded_capacity != 0 ? HumanBytes(w.recorded_capacity) : "unknown", ", up to ",
                  HumanBytes(w.outside_max), " outside PyTorch\n");
  if (w.fidelity.capped_refusals > 0) {
    absl::StrAppend(&out, "A per-process memory cap (torch.cuda.set_per_process_memory_fraction) refused ",
                    w.fidelity.capped_refusals, w.fidelity.capped_refusals == 1 ? " request" : " requests",
                    " without asking the driver: the cap is between ", HumanBytes(w.fidelity.cap_low), " and ",
                    HumanBytes(w.fidelity.cap_high), ", not the card. Every replay keeps it.\n");
  }
  if (w.unsupported.empty()) {
    absl::StrAppend(&out, "Replay checked against it: ",
                    w.fidelity.exact ? "exact" : absl::StrCat("differs at event ", w.fidelity.diverged_seq), " (",
                    w.fidelity.requests, " requests, ", w.fidelity.segments, " segment allocations and releases, ",
                    w.fidelity.blocks, " block addresses)");
    if (w.capacity_check.ran) {
      absl::StrAppend(&out, "; the capacity model ",
                      w.capacity_model_agrees ? (w.recorded_oom ? "fails where the recorded run failed"
                                                                : "runs through, as the recorded run did")
                                              : "does not reproduce the recorded outcome");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace cumemtrace::analyzer
