// ReadHistory: a TraceVisitor that replays the model and fills buckets, snapshots and totals.
#include "analyzer/model/memory/history.h"

#include <algorithm>
#include <map>
#include <memory>

#include "analyzer/model/memory/memory_model.h"

namespace cumemtrace::analyzer {
namespace {

class HistoryPass : public TraceVisitor {
 public:
  HistoryPass(const Analysis& a, const HistoryOptions& options, History& h)
      : options_(options), h_(h), owners_(a.stacks, a.symbols, a.info.header.executable) {
    start_ = a.info.StartNs();
    duration_ = std::max<int64_t>(a.info.DurationNs(), 1);
    h_.buckets = std::max(options.buckets, 1);
    // duration / buckets rounded up, and duration * j / (moments - 1) rounded down, without the products and sums
    // that overflow when a damaged trace's times span most of int64 (duration is at least 1 here).
    h_.bucket_ns = std::max<int64_t>(duration_ / h_.buckets + (duration_ % h_.buckets != 0 ? 1 : 0), 1);
    expected_events_ = a.model.events;
    const int moments = std::max(options.moments, 0);
    for (int j = 0; j < moments; ++j) {
      if (moments == 1) {
        moment_times_.push_back(duration_);
        continue;
      }
      const int64_t steps = moments - 1;
      moment_times_.push_back(duration_ / steps * j + duration_ % steps * j / steps);
    }
  }

  void OnMemorySample(const MemorySample& s) override {
    if (h_.driver.size() >= options_.max_driver_points) {
      ++h_.driver_dropped;
      return;
    }
    h_.driver.push_back({s.device, Relative(s.time_ns), s.total_bytes - std::min(s.free_bytes, s.total_bytes),
                         s.total_bytes});
  }

  void OnEvents(absl::Span<const Event> events) override {
    for (const Event& e : events) {
      const int64_t rel = Relative(e.time_ns);
      while (next_moment_ < moment_times_.size() && rel > moment_times_[next_moment_]) TakeMoment();
      const Outcome o = model_.Apply(e);
      Apply(e, o, rel);
      if (options_.progress && (++h_.events & 0xffff) == 0 && expected_events_ > 0) {
        options_.progress(std::min(1.0, static_cast<double>(h_.events) / static_cast<double>(expected_events_)));
      }
    }
  }

  void Finish() {
    while (next_moment_ < moment_times_.size()) TakeMoment();
    for (auto& [key, s] : states_) {
      Advance(*s, h_.buckets);
      h_.series.push_back(std::move(s->out));
    }
    for (uint32_t i = 0; i < owner_count_; ++i) h_.owners.push_back(owners_.Name(i));
  }

 private:
  struct State {
    BucketedSeries out;
    int last_bucket = -1;  // buckets [0, last_bucket] hold values
    uint64_t cur = 0;
    std::vector<uint64_t> owner_cur;
  };

  int64_t Relative(int64_t t) const { return std::clamp<int64_t>(SaturatingSub(t, start_), 0, duration_); }
  int BucketOf(int64_t rel) const {
    return static_cast<int>(std::min<int64_t>(rel / h_.bucket_ns, h_.buckets - 1));
  }

  State& StateFor(int32_t device, int series) {
    std::unique_ptr<State>& s = states_[{device, series}];
    if (s == nullptr) {
      s = std::make_unique<State>();
      s->out.device = device;
      s->out.series = series;
      s->out.min.resize(h_.buckets);
      s->out.max.resize(h_.buckets);
      s->out.last.resize(h_.buckets);
      s->out.owners_at_max.resize(h_.buckets);
    }
    return *s;
  }

  // Fills buckets (last_bucket, bucket) with the current value, and opens `bucket` (if < buckets) at it.
  void Advance(State& s, int bucket) {
    for (int b = s.last_bucket + 1; b <= bucket && b < h_.buckets; ++b) {
      s.out.min[b] = s.out.max[b] = s.out.last[b] = s.cur;
      s.out.owners_at_max[b] = s.owner_cur;
    }
    s.last_bucket = std::max(s.last_bucket, std::min(bucket, h_.buckets - 1));
  }

  void Change(int32_t device, int series, uint32_t owner, uint64_t size, bool up, int bucket) {
    State& s = StateFor(device, series);
    Advance(s, bucket);
    if (owner >= s.owner_cur.size()) s.owner_cur.resize(owner + 1);
    if (up) {
      s.cur += size;
      s.owner_cur[owner] += size;
    } else {
      s.cur -= std::min(size, s.cur);
      s.owner_cur[owner] -= std::min(size, s.owner_cur[owner]);
    }
    if (s.cur > s.out.max[bucket]) {
      s.out.max[bucket] = s.cur;
      s.out.owners_at_max[bucket] = s.owner_cur;
    }
    s.out.min[bucket] = std::min(s.out.min[bucket], s.cur);
    s.out.last[bucket] = s.cur;
  }

  void ChangeAll(const Allocation& a, bool up, int bucket) {
    if (!IsMemoryKind(a.kind)) return;
    const uint32_t owner = owners_.OwnerOf(a.stack);
    owner_count_ = std::max(owner_count_, owner + 1);
    const int32_t device = IsHostMemory(a.kind) ? format::kHostDevice : a.device;
    Change(device, static_cast<int>(a.kind), owner, a.size, up, bucket);
    if (InDeviceTotal(a.kind)) Change(device, kDeviceTotalSeries, owner, a.size, up, bucket);
  }

  void Apply(const Event& e, const Outcome& o, int64_t rel) {
    const int bucket = BucketOf(rel);
    if (o.effect == Effect::kReplaced || o.effect == Effect::kFreed) ChangeAll(o.previous, false, bucket);
    if (o.effect == Effect::kAllocated || o.effect == Effect::kReplaced) {
      Allocation a;
      a.size = e.size;
      a.stack = e.stack;
      a.device = e.device;
      a.kind = e.info->kind;
      ChangeAll(a, true, bucket);
      if (IsMemoryKind(a.kind)) {
        StackAllocations& t = h_.allocated_by_stack[e.stack];
        ++t.count;
        t.bytes += e.size;
      }
    }
  }

  void TakeMoment() {
    Moment m;
    m.time_ns = moment_times_[next_moment_++];
    std::map<std::pair<int32_t, int>, absl::flat_hash_map<uint64_t, StackGroup>> groups;
    auto add = [](absl::flat_hash_map<uint64_t, StackGroup>& g, const Allocation& a) {
      StackGroup& group = g[a.stack];
      group.stack = a.stack;
      group.key.value = a.stack;
      group.bytes += a.size;
      ++group.count;
    };
    model_.live().ForEach([&](uint64_t, const Allocation& a) {
      if (InDeviceTotal(a.kind)) add(groups[{a.device, kDeviceTotalSeries}], a);
      if (IsHostMemory(a.kind)) add(groups[{format::kHostDevice, static_cast<int>(a.kind)}], a);
    });
    for (auto& [key, g] : groups) {
      m.scopes.push_back({key.first, key.second, FinishGroups(g, options_.moment_stacks)});
    }
    h_.moments.push_back(std::move(m));
  }

  const HistoryOptions& options_;
  History& h_;
  MemoryModel model_;
  OwnerTracker owners_;
  uint32_t owner_count_ = 0;
  int64_t start_ = 0;
  int64_t duration_ = 1;
  uint64_t expected_events_ = 0;
  std::vector<int64_t> moment_times_;
  size_t next_moment_ = 0;
  std::map<std::pair<int32_t, int>, std::unique_ptr<State>> states_;
};

}  // namespace

absl::StatusOr<History> ReadHistory(const Analysis& analysis, const HistoryOptions& options) {
  History h;
  HistoryPass pass(analysis, options, h);
  ReadStats stats;
  if (absl::Status s = ReadTrace(analysis.info.path, pass, &stats); !s.ok()) return s;
  pass.Finish();
  if (options.progress) options.progress(1.0);
  return h;
}

}  // namespace cumemtrace::analyzer
