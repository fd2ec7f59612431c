// Owner attribution (see owners.h). The module rules live in ClassifyModule alone; everything else is caching and
// bookkeeping. Must never walk a stack per event: only once per unique stack.
#include "analyzer/model/usage/owners.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {
namespace {

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

// "libfoo.so.1.2" -> "foo", "_C.cpython-311-x86_64-linux-gnu.so" -> "_C.cpython-311-x86_64-linux-gnu".
std::string ModuleSlug(absl::string_view base) {
  if (absl::StartsWith(base, "lib") && base.size() > 3) base.remove_prefix(3);
  for (size_t at = base.find(".so"); at != absl::string_view::npos; at = base.find(".so", at + 1)) {
    if (at + 3 == base.size() || base[at + 3] == '.') {
      if (at != 0) base = base.substr(0, at);
      break;
    }
  }
  return std::string(base);
}

// A shared object named `stem`, any version: "libcuda.so", "libcuda.so.1", "libcuda.so.580.1".
bool IsSharedObject(absl::string_view base, absl::string_view stem) {
  if (!absl::StartsWith(base, stem)) return false;
  const absl::string_view rest = base.substr(stem.size());
  return absl::StartsWith(rest, ".so") && (rest.size() == 3 || rest[3] == '.');
}

bool IsPlumbing(absl::string_view base, bool* cuda) {
  *cuda = IsSharedObject(base, "libcuda") || IsSharedObject(base, "libcudart");
  if (*cuda) return true;
  if (absl::StartsWith(base, "libcumemtrace")) return true;
  // glibc (libpthread and libdl are parts of libc before glibc 2.34) and the dynamic loader.
  for (absl::string_view stem : {"libc", "libpthread", "libdl"}) {
    if (IsSharedObject(base, stem)) return true;
  }
  if (absl::StartsWith(base, "libc-2.") || absl::StartsWith(base, "ld-linux") || absl::StartsWith(base, "ld-2.") ||
      IsSharedObject(base, "ld")) {
    return true;
  }
  return false;
}

bool InDirectory(absl::string_view path, absl::string_view dir) {
  return absl::StrContains(path, absl::StrCat("/", dir, "/")) || absl::StartsWith(path, absl::StrCat(dir, "/"));
}

OwnerName UnknownOwner() { return OwnerName{"unknown", "unknown (no stack, or no known module in it)"}; }

}  // namespace

ModuleClass ClassifyModule(absl::string_view path, absl::string_view executable) {
  ModuleClass c;
  const absl::string_view base = BaseName(path);
  if (IsPlumbing(base, &c.cuda)) {
    c.plumbing = true;
    return c;
  }
  auto named = [&](const char* slug, const char* display) {
    c.owner.slug = slug;
    c.owner.display_name = display;
    return c;
  };
  if (!executable.empty() && path == executable) {
    c.owner.slug = "program";
    c.owner.display_name = absl::StrCat("program (", BaseName(executable), ")");
    return c;
  }
  if (IsSharedObject(base, "libc10_cuda")) return named("pytorch", "PyTorch (caching allocator)");
  if (IsSharedObject(base, "libcublasLt")) return named("cublaslt", "cuBLASLt");
  if (IsSharedObject(base, "libcublas")) return named("cublas", "cuBLAS");
  if (absl::StartsWith(base, "libcudnn") && absl::StrContains(base, ".so")) return named("cudnn", "cuDNN");
  if (IsSharedObject(base, "libnccl")) return named("nccl", "NCCL");
  if (InDirectory(path, "cupy") || InDirectory(path, "cupy_backends")) return named("cupy", "CuPy");
  // jaxlib's xla_extension.so, libxla*.so, and the CUDA PJRT plugin (jax_plugins/xla_cuda*/xla_cuda_plugin.so)
  // that allocates JAX's device memory since jax 0.4.
  if (absl::StartsWith(base, "xla_extension") || absl::StartsWith(base, "libxla") || InDirectory(path, "jaxlib") ||
      InDirectory(path, "jax_plugins")) {
    return named("xla", "JAX/XLA");
  }
  c.owner.slug = ModuleSlug(base);
  c.owner.display_name = std::string(base);
  if (c.owner.slug.empty()) c.owner = UnknownOwner();
  return c;
}

uint32_t OwnerTracker::Intern(const OwnerName& name) {
  auto [it, inserted] = by_slug_.try_emplace(name.slug, static_cast<uint32_t>(names_.size()));
  if (inserted) names_.push_back(name);
  return it->second;
}

uint32_t OwnerTracker::OwnerOf(uint64_t stack) {
  if (have_last_ && stack == last_stack_) return last_owner_;
  uint32_t owner;
  if (stack < kMaxDense) {
    if (stack >= dense_by_stack_.size()) {
      dense_by_stack_.resize(std::clamp<size_t>(dense_by_stack_.size() * 2, stack + 1, kMaxDense), kUnclassified);
    }
    owner = dense_by_stack_[stack];
    if (owner == kUnclassified) owner = dense_by_stack_[stack] = Classify(stack);
  } else {
    auto it = by_stack_.find(stack);
    owner = it != by_stack_.end() ? it->second : (by_stack_[stack] = Classify(stack));
  }
  have_last_ = true;
  last_stack_ = stack;
  last_owner_ = owner;
  return owner;
}

uint32_t OwnerTracker::Classify(uint64_t stack) {
  bool cuda = false;
  for (uint64_t pc : stacks_.Pcs(stack)) {
    if (format::IsPythonFramePc(pc)) continue;
    auto it = by_pc_.find(pc);
    if (it == by_pc_.end()) {
      PcClass pc_class;
      if (const ModuleInfo* m = symbols_.ModuleContaining(pc); m != nullptr) {
        pc_class.found = true;
        pc_class.cls = ClassifyModule(m->path, executable_);
      }
      it = by_pc_.emplace(pc, std::move(pc_class)).first;
    }
    const PcClass& p = it->second;
    if (!p.found) continue;  // a pc in no known module says nothing about its owner
    if (!p.cls.plumbing) return Intern(p.cls.owner);
    cuda |= p.cls.cuda;
  }
  if (cuda) return Intern(OwnerName{"cuda", "CUDA runtime/driver (no caller outside them)"});
  return Intern(UnknownOwner());
}

OwnerTracker::PerDevice& OwnerTracker::Device(int32_t key) {
  if (last_device_ < devices_.size() && devices_[last_device_].device == key) return devices_[last_device_];
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].device == key) {
      last_device_ = i;
      return devices_[i];
    }
  }
  devices_.emplace_back();
  devices_.back().device = key;
  last_device_ = devices_.size() - 1;
  return devices_.back();
}

void OwnerTracker::Add(const Event& e) {
  const format::Kind kind = e.info->kind;
  if (!IsMemoryKind(kind)) return;
  const uint32_t owner = OwnerOf(e.stack);
  PerDevice& d = Device(DeviceKey(e.device, kind));
  PerOwner& o = Owner(d, owner);
  o.live += e.size;
  o.peak = std::max(o.peak, o.live);
  ++o.allocations;
  o.allocated += e.size;
  d.total += e.size;
  if (d.total > d.peak) {
    d.peak = d.total;
    ++d.epoch;
  }
}

void OwnerTracker::Remove(const Allocation& a) {
  if (!IsMemoryKind(a.kind)) return;
  const uint32_t owner = OwnerOf(a.stack);
  PerDevice& d = Device(DeviceKey(a.device, a.kind));
  PerOwner& o = Owner(d, owner);
  // Only what was added is ever removed (the live set holds it), so neither can go below zero.
  o.live -= a.size;
  d.total -= a.size;
}

uint64_t OwnerTracker::DeviceBytes(int32_t device) const {
  if (device == format::kHostDevice) return 0;
  for (const PerDevice& d : devices_) {
    if (d.device == device) return d.total;
  }
  return 0;
}

std::vector<std::pair<uint32_t, uint64_t>> OwnerTracker::LiveOwners(int32_t device) const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  if (device == format::kHostDevice) return out;
  for (const PerDevice& d : devices_) {
    if (d.device != device) continue;
    for (uint32_t i = 0; i < d.owners.size(); ++i) {
      if (d.owners[i].live != 0) out.emplace_back(i, d.owners[i].live);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return out;
}

std::vector<OwnerUsage> OwnerTracker::Results() const {
  std::vector<OwnerUsage> out;
  for (const PerDevice& d : devices_) {
    for (uint32_t i = 0; i < d.owners.size(); ++i) {
      const PerOwner& o = d.owners[i];
      if (o.allocations == 0) continue;
      OwnerUsage u;
      u.device = d.device;
      u.name = names_[i];
      u.allocations = o.allocations;
      u.bytes_allocated = o.allocated;
      u.peak_bytes = o.peak;
      u.bytes_at_device_peak = d.epoch == 0 ? 0 : (o.saved_epoch == d.epoch ? o.saved_at_peak : o.live);
      u.live_bytes_at_end = o.live;
      out.push_back(std::move(u));
    }
  }
  std::sort(out.begin(), out.end(), [](const OwnerUsage& a, const OwnerUsage& b) {
    if (a.device != b.device) return a.device < b.device;
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes > b.peak_bytes;
    if (a.bytes_at_device_peak != b.bytes_at_device_peak) return a.bytes_at_device_peak > b.bytes_at_device_peak;
    return a.name.slug < b.name.slug;
  });
  return out;
}

}  // namespace cumemtrace::analyzer
