// Owner attribution: which library allocated each piece of memory ("PyTorch's caching allocator", "cuBLAS",
// "NCCL", "the program itself"), and per device how much each owner held at its own peak, at the device's peak and
// at the end. It answers "nvidia-smi shows memory that PyTorch's counters do not: whose is it?".
//
// The owner of a stack is its first module, innermost first, that is not the tool or the CUDA plumbing every
// allocation passes through (libcumemtrace, libcuda, libcudart, glibc and the dynamic loader); Python frames are
// skipped. Classification is cached per stack and per pc, so the per-event cost is one lookup; memory grows with
// unique stacks, pcs and owners, never with events. It must never keep anything per allocation: the owner of a
// freed allocation is found again from its stack.
#ifndef CUMEMTRACE_ANALYZER_MODEL_USAGE_OWNERS_H_
#define CUMEMTRACE_ANALYZER_MODEL_USAGE_OWNERS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "analyzer/model/memory/memory_model.h"
#include "analyzer/model/stacks/stack_table.h"
#include "analyzer/model/stacks/symbol_table.h"

namespace cumemtrace::analyzer {

// An owner: `slug` as docs/json.md spells it ("pytorch", "cublas", ..., "program", "cuda", "unknown", or a
// module's basename without "lib" and ".so*"), and a name for people.
struct OwnerName {
  std::string slug;
  std::string display_name;
};

// What one module path says about ownership.
struct ModuleClass {
  bool plumbing = false;  // the tool, libcuda, libcudart, glibc, ld.so: look further out
  bool cuda = false;      // libcuda or libcudart (a stack of only these is owned by "cuda")
  OwnerName owner;        // when !plumbing
};

// Classifies a module by its path; `executable` is the traced program's own path (the header's).
ModuleClass ClassifyModule(absl::string_view path, absl::string_view executable);

// Per (device, owner) results. Device -1 holds host memory (pinned_host, registered_host) whatever device the
// event named; GPUs hold device, managed, pool and vmm_physical.
struct OwnerUsage {
  int32_t device = 0;
  OwnerName name;
  uint64_t allocations = 0;         // successful allocations
  uint64_t bytes_allocated = 0;     // their bytes, summed
  uint64_t peak_bytes = 0;          // the most of this owner's own memory live at once
  uint64_t bytes_at_device_peak = 0;  // this owner's live memory at the device's peak
  uint64_t live_bytes_at_end = 0;
};

// Maps stacks to owners (cached) and follows each owner's live memory per device through the replay.
class OwnerTracker {
 public:
  OwnerTracker(const StackTable& stacks, const SymbolTable& symbols, const std::string& executable)
      : stacks_(stacks), symbols_(symbols), executable_(executable) {}

  // Applies what the memory model did with `event` (call once per event, in replay order).
  void Apply(const Event& event, const Outcome& outcome) {
    switch (outcome.effect) {
      case Effect::kAllocated:
        Add(event);
        break;
      case Effect::kReplaced:
        Remove(outcome.previous);
        Add(event);
        break;
      case Effect::kFreed:
        Remove(outcome.previous);
        break;
      default:
        break;
    }
  }

  // Live device-side memory (device + managed + pool + vmm_physical) of GPU `device` now.
  uint64_t DeviceBytes(int32_t device) const;

  // Owners with live memory on GPU `device` now, as (owner index, live bytes), largest first.
  std::vector<std::pair<uint32_t, uint64_t>> LiveOwners(int32_t device) const;

  // The owner index of stack `stack` (cached).
  uint32_t OwnerOf(uint64_t stack);
  const OwnerName& Name(uint32_t owner) const { return names_[owner]; }

  // Every (device, owner) that allocated: by device ordinal, then peak_bytes, bytes_at_device_peak (largest
  // first), then slug.
  std::vector<OwnerUsage> Results() const;

 private:
  struct PerOwner {
    uint64_t live = 0;
    uint64_t peak = 0;
    uint64_t allocations = 0;
    uint64_t allocated = 0;
    uint64_t saved_at_peak = 0;  // live when the device's peak epoch `saved_epoch` was last passed
    uint64_t saved_epoch = 0;
  };
  struct PerDevice {
    int32_t device = 0;
    uint64_t total = 0;
    uint64_t peak = 0;
    uint64_t epoch = 0;  // bumped at each new device peak; 0 = no peak yet
    std::vector<PerOwner> owners;  // by owner index
  };

  static int32_t DeviceKey(int32_t device, format::Kind kind) {
    return IsHostMemory(kind) ? format::kHostDevice : device;
  }
  PerDevice& Device(int32_t key);
  PerOwner& Owner(PerDevice& d, uint32_t owner) {
    if (owner >= d.owners.size()) d.owners.resize(owner + 1);
    PerOwner& o = d.owners[owner];
    // Keep the value it had at the device's latest peak before changing it.
    if (d.epoch != 0 && o.saved_epoch != d.epoch) {
      o.saved_at_peak = o.live;
      o.saved_epoch = d.epoch;
    }
    return o;
  }
  void Add(const Event& e);
  void Remove(const Allocation& a);
  uint32_t Classify(uint64_t stack);
  uint32_t Intern(const OwnerName& name);

  const StackTable& stacks_;
  const SymbolTable& symbols_;
  const std::string& executable_;
  std::vector<OwnerName> names_;
  absl::flat_hash_map<std::string, uint32_t> by_slug_;
  // Stack ids are consecutive node ids in a well-formed trace: dense_by_stack_[id] (kUnclassified until seen);
  // ids beyond kMaxDense go to by_stack_. As StackTable does, memory follows the nodes the trace has.
  static constexpr uint32_t kUnclassified = ~uint32_t{0};
  static constexpr uint64_t kMaxDense = uint64_t{1} << 24;
  std::vector<uint32_t> dense_by_stack_;
  absl::flat_hash_map<uint64_t, uint32_t> by_stack_;
  bool have_last_ = false;  // last_stack_ and last_owner_ hold a classified stack (any id is possible)
  uint64_t last_stack_ = 0;
  uint32_t last_owner_ = 0;
  struct PcClass {
    bool found = false;  // the pc lies in a known module
    ModuleClass cls;
  };
  absl::flat_hash_map<uint64_t, PcClass> by_pc_;
  std::vector<PerDevice> devices_;  // few: linear lookup with the last one cached
  size_t last_device_ = 0;
};

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_USAGE_OWNERS_H_
