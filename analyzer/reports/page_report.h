// What the HTML page shows, chosen and ordered: the trace's facts, the timelines (History), the snapshots (evenly
// spaced moments, each drawn peak, the first failed allocations), the peaks, the phase bands, the failed
// allocations, the leaks, the largest pinned spikes, the owners, the tool's health and the caps the page states.
// Every stack it refers to is resolved here into `stacks` (frames, whether each is the user's, the frame its group
// is keyed by), so export/html_data.cc only writes JSON: it never reads the model.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_PAGE_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_PAGE_REPORT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analyzer/model/analysis.h"
#include "analyzer/model/memory/history.h"
#include "analyzer/model/stacks/frame_resolver.h"

namespace cumemtrace::analyzer {

struct PageOptions {
  GroupingOptions grouping{GroupBy::kUser, ""};  // how the page's tables group stacks (--group-by)
  size_t snapshot_stacks = 400;  // stacks kept per snapshot, largest first; the rest summed
  size_t leaks = 200;            // leak stacks listed
  size_t ooms = 200;             // failed allocations marked (the first ones)
  size_t pinned_windows = 20;    // pinned windows listed, largest rise first
  size_t phase_bands = 200;      // outermost phase ranges drawn
};

struct PageFrame {
  Frame frame;
  bool user = false;  // frame_class.h's user class
};

struct PageStack {
  std::vector<PageFrame> frames;  // innermost first
  std::optional<PageFrame> group;  // the frame its group is keyed by; none when grouped by the stack itself
  bool fallback = false;           // "no user frame": keyed by its innermost non-runtime frame
};

struct PageScope {
  int32_t device = 0;
  int series = 0;
  const GroupedSnapshot* live = nullptr;  // groups of one stack each
};

struct PageSnapshot {
  int64_t time_ns = 0;  // relative
  const char* what = "";  // "moment", "peak", "oom"
  std::vector<PageScope> scopes;
};

struct PagePeak {
  int32_t device = 0;
  int series = 0;
  int64_t time_ns = 0;
  uint64_t bytes = 0, count = 0, final_bytes = 0;
  int64_t snapshot = -1;  // index into snapshots, -1 when not drawn
};

struct PagePhaseBand {
  std::string name;
  int64_t begin_ns = 0, end_ns = 0;  // relative
};

struct PageOom {
  int64_t time_ns = 0;
  int32_t device = 0;
  const char* kind = "";
  const char* api = "";
  uint64_t bytes = 0;
  std::string error;
  bool has_mem_info = false;
  uint64_t free_bytes = 0, total_bytes = 0, live_bytes = 0;
  std::string thread;
  uint64_t stack = 0;
  int64_t snapshot = -1;
};

struct PageLeak {
  int32_t device = 0;
  const char* kind = "";
  uint64_t bytes = 0, count = 0;
  std::array<uint64_t, kGrowthPoints> growth{};
  uint64_t stack = 0;
};

struct PageSpike {
  int64_t start_ns = 0, end_ns = 0;
  uint64_t rise_bytes = 0, max_bytes = 0;
  std::string thread;
  uint32_t thread_index = 0;
  uint64_t thread_bytes = 0;
  std::optional<uint64_t> stack;  // none when nobody allocated in the window
};

struct PageReport {
  const TraceInfo* info = nullptr;
  std::string group_by;  // GroupingName
  const ModelStats* model = nullptr;
  const History* history = nullptr;  // timelines (series, owners, driver samples)
  size_t snapshot_stacks = 0;  // PageOptions::snapshot_stacks: stacks listed per snapshot scope
  std::vector<PageSnapshot> snapshots;
  std::vector<PagePeak> peaks;
  std::vector<PagePhaseBand> phases;
  std::vector<PageOom> ooms;
  uint64_t oom_count = 0;
  std::vector<PageLeak> leaks;
  const PinnedResult* pinned = nullptr;
  std::vector<PageSpike> spikes;
  const std::vector<OwnerUsage>* owners = nullptr;
  const std::vector<DriverMemory>* driver_memory = nullptr;
  std::vector<std::string> caps;
  absl::flat_hash_map<uint64_t, PageStack> stacks;  // every stack referred to above
};

// `analysis` analyzed with GroupBy::kStack (per-stack snapshots, uncapped), `history` read from the same trace; both
// must outlive the report.
PageReport BuildPageReport(const Analysis& analysis, const History& history, const PageOptions& options);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_PAGE_REPORT_H_
