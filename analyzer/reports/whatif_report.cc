#include "analyzer/reports/whatif_report.h"

#include <utility>

namespace cumemtrace::analyzer {

const char* WhatIfClaimName(WhatIfClaim claim) {
  switch (claim) {
    case WhatIfClaim::kRunsThrough: return "runs_through";
    case WhatIfClaim::kOom: return "oom";
    case WhatIfClaim::kUnsupported: return "unsupported";
    case WhatIfClaim::kDiverged: return "diverged";
    case WhatIfClaim::kNoCapacity: return "no_capacity";
    case WhatIfClaim::kCapacityModelDisagrees: return "capacity_model_disagrees";
    case WhatIfClaim::kDependsOnCap: return "depends_on_cap";
  }
  return "unsupported";
}

WhatIfReport BuildWhatIfReport(WhatIf replay) {
  WhatIfReport r;
  r.replay = std::move(replay);
  const WhatIf& w = r.replay;
  if (!w.unsupported.empty()) {
    r.claim = WhatIfClaim::kUnsupported;
  } else if (!w.fidelity.exact) {
    r.claim = WhatIfClaim::kDiverged;
  } else if (w.capacity == 0 || !w.whatif.ran) {
    r.claim = WhatIfClaim::kNoCapacity;
  } else if (w.recorded_capacity != 0 && !w.capacity_model_agrees) {
    r.claim = WhatIfClaim::kCapacityModelDisagrees;
  } else if (!w.cap_bounds_agree) {
    r.claim = WhatIfClaim::kDependsOnCap;
  } else if (w.whatif.oom) {
    r.claim = WhatIfClaim::kOom;
    const uint64_t used = w.whatif.reserved_at_failure + w.whatif.outside_at_failure;
    r.free_at_failure = used < w.capacity ? w.capacity - used : 0;
  } else {
    r.claim = WhatIfClaim::kRunsThrough;
  }
  return r;
}

}  // namespace cumemtrace::analyzer
