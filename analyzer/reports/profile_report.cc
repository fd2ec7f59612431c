#include "analyzer/reports/profile_report.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kMaxFrames = 4096;

}  // namespace

ProfileReport BuildProfileReport(const Analysis& a, const History& h, const std::vector<WeightedStack>& inuse) {
  ProfileReport r;
  r.path = a.info.path;
  r.start_unix_time_ns = a.info.header.start_unix_time_ns;
  r.duration_ns = a.info.DurationNs();
  FrameResolver resolver(a.stacks, a.symbols, a.python_frames);
  absl::flat_hash_map<uint64_t, size_t> index_of;
  auto stack_index = [&](uint64_t stack) {
    auto [it, added] = index_of.try_emplace(stack, r.stacks.size());
    if (added) r.stacks.push_back(resolver.ResolveStack(stack, kMaxFrames));
    return it->second;
  };
  // Allocation totals in stack id order (deterministic output).
  std::vector<std::pair<uint64_t, StackAllocations>> allocated(h.allocated_by_stack.begin(),
                                                               h.allocated_by_stack.end());
  std::sort(allocated.begin(), allocated.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [stack, t] : allocated) {
    r.samples.push_back({stack_index(stack), {static_cast<int64_t>(t.count), static_cast<int64_t>(t.bytes), 0, 0}, ""});
  }
  for (const WeightedStack& w : inuse) {
    r.samples.push_back(
        {stack_index(w.stack), {0, 0, static_cast<int64_t>(w.count), static_cast<int64_t>(w.bytes)}, w.root});
  }
  return r;
}

}  // namespace cumemtrace::analyzer
