// Built with -fno-omit-frame-pointer (preload/CMakeLists.txt): FastBacktrace starts from its own frame pointer.
#include "preload/fast_unwind.h"

#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <atomic>

#include "preload/eh_frame.h"

namespace cumemtrace::preload {
namespace {

// Rules of return addresses, open addressing by a hash of the address. 16 384 entries of 16 bytes (256 KiB of
// address space, touched as used): a PyTorch training process returns to a few thousand distinct addresses.
constexpr size_t kRuleSlots = size_t{1} << 14;
constexpr size_t kProbes = 8;

// A rule packed into one word, so that an entry is two words that a reader can check for a torn write.
// Bits 0-1 kind, bit 2 CFA from RBP, bit 3 RBP saved, bits 8-31 the RBP offset (24-bit signed), 32-63 the CFA
// offset (32-bit signed).
uint64_t Pack(const FrameRule& rule) {
  return static_cast<uint64_t>(rule.kind) | (rule.cfa_from_rbp ? 4u : 0u) | (rule.rbp_saved ? 8u : 0u) |
         ((static_cast<uint64_t>(static_cast<uint32_t>(rule.rbp_offset)) & 0xffffff) << 8) |
         (static_cast<uint64_t>(static_cast<uint32_t>(rule.cfa_offset)) << 32);
}
FrameRule Unpack(uint64_t word) {
  FrameRule rule;
  rule.kind = static_cast<FrameRule::Kind>(word & 3);
  rule.cfa_from_rbp = (word & 4) != 0;
  rule.rbp_saved = (word & 8) != 0;
  rule.rbp_offset = static_cast<int32_t>(static_cast<uint32_t>(word) & 0xffffff00u) >> 8;  // sign-extends
  rule.cfa_offset = static_cast<int32_t>(static_cast<uint32_t>(word >> 32));
  return rule;
}

struct RuleEntry {
  std::atomic<uint64_t> pc;  // 0: empty
  std::atomic<uint64_t> rule;
};

std::atomic<RuleEntry*> g_rules{nullptr};
pthread_mutex_t g_fill_lock = PTHREAD_MUTEX_INITIALIZER;  // writers of g_rules; only ever tried
unsigned long long g_module_unloads = 0;                   // dl_iterate_phdr's dlpi_subs at the last fill

size_t Home(uintptr_t pc) { return static_cast<size_t>((pc * 0x9e3779b97f4a7c15ull) >> 50) & (kRuleSlots - 1); }

// The cached rule of return address `pc`; false when it is not cached (or an entry was being rewritten).
bool LookUp(const RuleEntry* rules, uintptr_t pc, uint64_t* rule) {
  size_t slot = Home(pc);
  for (size_t i = 0; i < kProbes; ++i, slot = (slot + 1) & (kRuleSlots - 1)) {
    const uint64_t seen = rules[slot].pc.load(std::memory_order_acquire);
    if (seen == 0) return false;
    if (seen != pc) continue;
    *rule = rules[slot].rule.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    return rules[slot].pc.load(std::memory_order_relaxed) == pc;  // not rewritten while read
  }
  return false;
}

// Under g_fill_lock.
void Store(RuleEntry* rules, uintptr_t pc, uint64_t rule) {
  size_t slot = Home(pc);
  size_t victim = slot;
  for (size_t i = 0; i < kProbes; ++i, slot = (slot + 1) & (kRuleSlots - 1)) {
    const uint64_t seen = rules[slot].pc.load(std::memory_order_relaxed);
    if (seen == 0 || seen == pc) {
      victim = slot;
      break;
    }
  }
  // A reader that sees pc before and after its read of rule saw this rule whole (LookUp).
  rules[victim].pc.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  rules[victim].rule.store(rule, std::memory_order_relaxed);
  rules[victim].pc.store(pc, std::memory_order_release);
}

struct ModuleSearch {
  uintptr_t pc;
  EhFrameModule module;
  bool found;
  unsigned long long unloads;
};

int FindModule(dl_phdr_info* info, size_t size, void* data) {
  auto* search = static_cast<ModuleSearch*>(data);
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) search->unloads = info->dlpi_subs;
  bool holds_pc = false;
  const ElfW(Phdr)* eh_frame = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && search->pc >= start && search->pc - start < ph.p_memsz) holds_pc = true;
    if (ph.p_type == PT_GNU_EH_FRAME) eh_frame = &ph;
  }
  if (!holds_pc) return 0;
  search->found = true;
  if (eh_frame == nullptr) return 1;
  const uintptr_t hdr = info->dlpi_addr + eh_frame->p_vaddr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {  // the loaded segment that holds the tables bounds every read
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_R) != 0 && hdr >= start && hdr - start < ph.p_memsz) {
      search->module.hdr = reinterpret_cast<const uint8_t*>(hdr);
      search->module.hdr_size = eh_frame->p_memsz;
      search->module.readable_start = start;
      search->module.readable_end = start + ph.p_memsz;
    }
  }
  return 1;
}

// Finds, caches and returns the rule of return address `pc`; false when the table is busy (another thread fills
// it, or this one was interrupted while filling it) or cannot be mapped.
bool Fill(uintptr_t pc, uint64_t* rule) {
  if (pthread_mutex_trylock(&g_fill_lock) != 0) return false;
  RuleEntry* rules = g_rules.load(std::memory_order_relaxed);
  if (rules == nullptr) {
    void* memory = mmap(nullptr, kRuleSlots * sizeof(RuleEntry), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory != MAP_FAILED) {
      rules = static_cast<RuleEntry*>(memory);
      g_rules.store(rules, std::memory_order_release);
    }
  }
  bool filled = false;
  if (rules != nullptr) {
    ModuleSearch search{pc, {}, false, 0};
    dl_iterate_phdr(FindModule, &search);
    if (search.unloads != g_module_unloads) {
      // A library was unloaded: another one may now hold its addresses. Forget every rule (a reader racing with
      // this sees empty or re-checked entries).
      for (size_t i = 0; i < kRuleSlots; ++i) rules[i].pc.store(0, std::memory_order_relaxed);
      g_module_unloads = search.unloads;
    }
    FrameRule found = search.found ? FindFrameRule(search.module, pc - 1) : FrameRule{};
    if (found.kind == FrameRule::kStep && found.rbp_saved &&
        (found.rbp_offset < -(1 << 23) || found.rbp_offset >= (1 << 23))) {
      found = FrameRule{};  // does not pack
    }
    *rule = Pack(found);
    Store(rules, pc, *rule);
    filled = true;
  }
  pthread_mutex_unlock(&g_fill_lock);
  return filled;
}

// The calling thread's stack: [low, high) holds every frame of it. 0/0 until known; high 1 when unknown.
__thread uintptr_t t_stack_high __attribute__((tls_model("initial-exec")));

uintptr_t StackHigh() {
  if (t_stack_high != 0) return t_stack_high;
  pthread_attr_t attr;
  uintptr_t high = 1;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* low = nullptr;
    size_t size = 0;
    if (pthread_attr_getstack(&attr, &low, &size) == 0) high = reinterpret_cast<uintptr_t>(low) + size;
    pthread_attr_destroy(&attr);
  }
  t_stack_high = high;
  return high;
}

}  // namespace

__attribute__((noinline)) int FastBacktrace(void** out, int max) {
  if (max <= 0) return 0;
  const RuleEntry* rules = g_rules.load(std::memory_order_acquire);
  // This function's frame: [frame] = the caller's RBP, [frame + 8] = the return address, frame + 16 = the
  // caller's RSP. Everything above frame on the stack is the walk's to read.
  const uintptr_t frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  const uintptr_t high = StackHigh();
  if (frame + 16 > high || high == 1) return -1;
  uintptr_t pc = *reinterpret_cast<const uintptr_t*>(frame + 8);
  uintptr_t rbp = *reinterpret_cast<const uintptr_t*>(frame);
  uintptr_t rsp = frame + 16;
  int count = 0;
  out[count++] = reinterpret_cast<void*>(pc);
  while (count < max) {
    uint64_t word = 0;
    if (rules == nullptr || !LookUp(rules, pc, &word)) {
      if (!Fill(pc, &word)) return -1;
      rules = g_rules.load(std::memory_order_acquire);
    }
    const FrameRule rule = Unpack(word);
    if (rule.kind == FrameRule::kOutermost) break;
    if (rule.kind != FrameRule::kStep) return -1;
    const uintptr_t cfa = (rule.cfa_from_rbp ? rbp : rsp) + static_cast<intptr_t>(rule.cfa_offset);
    // The caller's frame lies above this one, inside the thread's stack.
    if (cfa <= rsp || cfa > high) return -1;
    const uintptr_t next_pc = *reinterpret_cast<const uintptr_t*>(cfa - 8);
    if (rule.rbp_saved) {
      const uintptr_t at = cfa + static_cast<intptr_t>(rule.rbp_offset);
      if (at < rsp || at + 8 > high) return -1;
      rbp = *reinterpret_cast<const uintptr_t*>(at);
    }
    rsp = cfa;
    if (next_pc < 0x4000) break;  // where libunwind stops too: a zeroed return address ends some stacks
    pc = next_pc;
    out[count++] = reinterpret_cast<void*>(pc);
  }
  return count;
}

}  // namespace cumemtrace::preload
