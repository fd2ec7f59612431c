// Memory over time, for pictures (the HTML report, Perfetto) and for pprof's allocation totals: a second read of
// a trace already analyzed (its start, duration and stack tables known), replaying the same memory model.
//
// Timelines are downsampled into a fixed number of buckets per (device, series) keeping each bucket's min and max
// exactly, so the peak drawn is the peak; with the max comes each owner's bytes at that moment (the stacked chart
// adds up to the max). What was live is snapshotted at evenly spaced moments, per stack, capped to the largest
// stacks with the rest summed. Memory grows with buckets, owners, snapshots and unique stacks, never with events:
// a trace of ten million events costs what a trace of ten thousand does.
#ifndef CUMEMTRACE_ANALYZER_MODEL_MEMORY_HISTORY_H_
#define CUMEMTRACE_ANALYZER_MODEL_MEMORY_HISTORY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "analyzer/model/analysis.h"

namespace cumemtrace::analyzer {

struct HistoryOptions {
  int buckets = 2000;            // per timeline
  int moments = 48;              // evenly spaced snapshots of what was live
  size_t moment_stacks = 400;    // stacks kept per snapshot and timeline, largest first
  size_t max_driver_points = 100000;  // driver samples kept (the first ones)
  // Called now and then with the share of events replayed (0..1), for a progress bar; may be empty.
  std::function<void(double)> progress;
};

// One (device, series): device -1 holds host memory.
struct BucketedSeries {
  int32_t device = 0;
  int series = 0;  // format::Kind value, or kDeviceTotalSeries
  std::vector<uint64_t> min;  // per bucket
  std::vector<uint64_t> max;
  std::vector<uint64_t> last;  // at the bucket's end
  // owners_at_max[bucket][owner]: the owner's bytes in this series when the bucket's max was reached (owners
  // beyond the vector's size had 0).
  std::vector<std::vector<uint64_t>> owners_at_max;
};

struct MomentScope {
  int32_t device = 0;
  int series = 0;  // kDeviceTotalSeries, or a host memory kind
  GroupedSnapshot live;  // one group per stack, capped
};

struct Moment {
  int64_t time_ns = 0;  // relative: the state after every event at or before it
  std::vector<MomentScope> scopes;
};

struct StackAllocations {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

struct DriverPoint {
  int32_t device = 0;
  int64_t time_ns = 0;  // relative
  uint64_t used_bytes = 0;
  uint64_t total_bytes = 0;
};

struct History {
  int buckets = 0;
  int64_t bucket_ns = 1;  // width of a bucket; bucket i starts at i * bucket_ns (relative)
  std::vector<BucketedSeries> series;  // by device, then series
  std::vector<OwnerName> owners;       // by owner index
  std::vector<Moment> moments;
  absl::flat_hash_map<uint64_t, StackAllocations> allocated_by_stack;  // successful allocations of memory kinds
  std::vector<DriverPoint> driver;
  uint64_t driver_dropped = 0;  // samples beyond max_driver_points
  uint64_t events = 0;
};

// Reads `analysis.info.path` again. `analysis` must be the result of Analyze on that path.
absl::StatusOr<History> ReadHistory(const Analysis& analysis, const HistoryOptions& options);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_MEMORY_HISTORY_H_
