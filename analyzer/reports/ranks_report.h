// The ranks report: the traces of the ranks of one multi-GPU job side by side. Per rank: who it was (rank, host,
// pid), each GPU's peak and which owners held memory at that moment, failed allocations and leaks; across ranks:
// how far apart the device peaks are (one rank holding much more than the others is the usual imbalance to find).
// Built from one Analysis at a time, so that only one trace's model is in memory at once.
#ifndef CUMEMTRACE_ANALYZER_REPORTS_RANKS_REPORT_H_
#define CUMEMTRACE_ANALYZER_REPORTS_RANKS_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/model/analysis.h"

namespace cumemtrace::analyzer {

struct RankOwnerBytes {
  std::string owner;  // slug (owners.h)
  uint64_t bytes = 0;
};

struct RankDevice {
  int32_t device = 0;
  uint64_t peak_bytes = 0;   // the device total's peak
  int64_t peak_time_ns = 0;  // relative to the start of that trace
  std::vector<RankOwnerBytes> owners_at_peak;  // owners with bytes at the peak, largest first, then by slug
};

struct RankEntry {
  std::string path;
  int32_t rank = -1;  // -1: the header has none
  int32_t local_rank = -1;
  int32_t world_size = -1;
  std::string hostname;
  int32_t pid = 0;
  uint64_t events = 0;
  uint64_t failed_allocations = 0;
  uint64_t leaked_bytes = 0;  // memory kinds live at the end
  std::vector<RankDevice> devices;  // GPUs with device memory, by ordinal
};

struct RanksSpread {
  bool any = false;  // some rank had a device peak
  uint64_t device_peak_max = 0;
  uint64_t device_peak_min = 0;
  std::optional<double> max_over_min;  // absent when the smallest peak is 0 or nothing peaked
  size_t max_entry = 0, min_entry = 0;  // where they are: entries[i]
  int32_t max_device = 0, min_device = 0;
};

struct RanksReport {
  std::vector<RankEntry> entries;  // by rank; traces without a rank last, by pid, then path
  RanksSpread spread;
};

// One trace's entry (the Analysis needs no snapshots).
RankEntry BuildRankEntry(const Analysis& analysis);
// Sorts the entries and computes the spread.
RanksReport BuildRanksReport(std::vector<RankEntry> entries);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_REPORTS_RANKS_REPORT_H_
