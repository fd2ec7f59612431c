// The what-if report: the allocator replay's outcome (model/torch/allocator_whatif.h) and what may be claimed from
// it: a what-if is claimed only when the replay reproduced the recorded run (every segment, every block address,
// the OOM at the same request) and the capacity model failed where the recorded run did.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_WHATIF_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_WHATIF_REPORT_H_

#include <cstdint>

#include "analyzer/model/torch/allocator_whatif.h"

namespace cumemtrace::analyzer {

enum class WhatIfClaim : uint8_t {
  kRunsThrough,            // the what-if replay served every request
  kOom,                    // it fails at a request
  kUnsupported,            // settings the replay does not restate: nothing replayed
  kDiverged,               // the replay under the recorded settings differs from the recorded run
  kNoCapacity,             // no figure of the card's memory in the trace, and no --capacity
  kCapacityModelDisagrees, // the capacity model does not fail where the recorded run failed
  kDependsOnCap,           // under the recorded run's memory cap, the answer differs between the cap's bounds
};
const char* WhatIfClaimName(WhatIfClaim claim);

struct WhatIfReport {
  WhatIf replay;
  WhatIfClaim claim = WhatIfClaim::kUnsupported;
  bool claimed() const { return claim == WhatIfClaim::kRunsThrough || claim == WhatIfClaim::kOom; }
  uint64_t free_at_failure = 0;  // kOom: the card less reserved and outside memory then
};

WhatIfReport BuildWhatIfReport(WhatIf replay);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_WHATIF_REPORT_H_
