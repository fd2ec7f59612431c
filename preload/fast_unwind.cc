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
std::atomic<uint64_t> g_rules_generation{0};  // bumped when the rules are forgotten: older walk memos are void

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
      g_rules_generation.fetch_add(1, std::memory_order_release);
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

// A thread's previous walk, frame by frame: the registers each frame was stepped from, whether its rule read RBP,
// and where stepping it read the caller's RBP. Consecutive allocations of a thread share their outer frames (the
// training loop, the model, the autograd engine's loop). A frame whose RSP and pc equal a remembered frame's is
// unwound from there by re-reading the stack words that the remembered walk read: if every one still holds what it
// held, the rest of the walk is what it was, since each step is a function of the frame's pc (its rule), its RSP,
// its RBP and those words. RBP must be equal too unless no rule reads it before a frame restores it from the stack:
// optimized code keeps any value in RBP, so requiring it always would miss most matches. A reused walk costs no rule
// lookups, only loads from the stack, which the program has just touched.
constexpr int kMemoFrames = 96;
struct WalkMemo {
  uint64_t generation;  // of g_rules_generation when walked
  int count;            // frames remembered, at most kMemoFrames
  bool complete;        // the walk ended at the outermost frame (not at its max or a zero return address)
  uintptr_t pc[kMemoFrames];
  uintptr_t rsp[kMemoFrames];
  uintptr_t rbp[kMemoFrames];
  uintptr_t rbp_at[kMemoFrames];  // where stepping frame i read the caller's RBP; 0 when it kept RBP
  bool cfa_from_rbp[kMemoFrames];  // frame i's rule computes the CFA from RBP
};
// Two per thread: the previous walk, read while the current one is written.
__thread WalkMemo t_memos[2] __attribute__((tls_model("initial-exec")));
__thread int t_memo_previous __attribute__((tls_model("initial-exec")));

// Whether the walk from memo frame `from` on is still what it was for a frame with that frame's RSP and pc, and
// RBP equal to the remembered one or not (`same_rbp`): the stack words it read hold what they held, and, with a
// different RBP, no rule reads RBP before a frame restores it. Every address lies in a frame at or above the
// current one (memo.rsp[from] is the current frame's RSP) and below high.
bool StillHolds(const WalkMemo& memo, int from, bool same_rbp, uintptr_t high) {
  bool rbp_matters = !same_rbp;
  for (int i = from; i + 1 < memo.count; ++i) {
    if (rbp_matters && memo.cfa_from_rbp[i]) return false;
    if (*reinterpret_cast<const uintptr_t*>(memo.rsp[i + 1] - 8) != memo.pc[i + 1]) return false;
    const uintptr_t at = memo.rbp_at[i];
    if (at != 0) {
      if (at < memo.rsp[from] || at + 8 > high) return false;
      if (*reinterpret_cast<const uintptr_t*>(at) != memo.rbp[i + 1]) return false;
      rbp_matters = false;  // restored from the stack: the same from here on
    }
  }
  return true;
}

// Remembers frame `i` of the walk in progress (stepped from rsp and rbp; its step has not read RBP yet).
inline void Remember(WalkMemo& memo, int i, uintptr_t pc, uintptr_t rsp, uintptr_t rbp) {
  if (i >= kMemoFrames) return;
  memo.pc[i] = pc;
  memo.rsp[i] = rsp;
  memo.rbp[i] = rbp;
  memo.rbp_at[i] = 0;
  memo.cfa_from_rbp[i] = false;
}

}  // namespace

__attribute__((noinline)) int FastBacktrace(void** out, int max, int* frames_reused) {
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

  const uint64_t generation = g_rules_generation.load(std::memory_order_acquire);
  const WalkMemo& previous = t_memos[t_memo_previous];
  WalkMemo& memo = t_memos[t_memo_previous ^ 1];
  memo.generation = generation;
  memo.complete = false;
  // The previous walk's frames are compared in order of their RSP with this walk's, which rises too. One match
  // is tried per walk: a frame whose outer stack words changed will not be followed by one whose words did not.
  int from = previous.generation == generation ? 0 : previous.count;
  bool tried = false;
  int reused = 0;

  int count = 0;
  out[count] = reinterpret_cast<void*>(pc);
  Remember(memo, count++, pc, rsp, rbp);
  while (count < max) {
    // Frame count - 1 = (pc, rsp, rbp) is recorded; step it.
    if (!tried) {
      while (from < previous.count && previous.rsp[from] < rsp) ++from;
      if (from < previous.count && previous.rsp[from] == rsp && previous.pc[from] == pc) {
        tried = true;
        if (StillHolds(previous, from, previous.rbp[from] == rbp, high)) {
          int i = from + 1;
          for (; i < previous.count && count < max; ++i, ++count) {
            // Frame count - 1 is the previous walk's frame i - 1, stepped as it was; RBP is this walk's own until
            // a frame restores it from the stack (StillHolds checked that nothing read it before).
            if (count - 1 < kMemoFrames) {
              memo.rbp_at[count - 1] = previous.rbp_at[i - 1];
              memo.cfa_from_rbp[count - 1] = previous.cfa_from_rbp[i - 1];
            }
            if (previous.rbp_at[i - 1] != 0) rbp = previous.rbp[i];
            pc = previous.pc[i];
            rsp = previous.rsp[i];
            out[count] = reinterpret_cast<void*>(pc);
            Remember(memo, count, pc, rsp, rbp);
          }
          reused = i - from - 1;
          if (count == max) break;
          if (previous.complete) {
            memo.complete = true;
            break;
          }
          // The previous walk stopped short of this one's max: go on from its last frame, (pc, rsp, rbp) now.
        }
      }
    }
    uint64_t word = 0;
    if (rules == nullptr || !LookUp(rules, pc, &word)) {
      if (!Fill(pc, &word)) return -1;
      rules = g_rules.load(std::memory_order_acquire);
    }
    const FrameRule rule = Unpack(word);
    if (rule.kind == FrameRule::kOutermost) {
      memo.complete = true;
      break;
    }
    if (rule.kind != FrameRule::kStep) return -1;
    if (count - 1 < kMemoFrames) memo.cfa_from_rbp[count - 1] = rule.cfa_from_rbp;
    const uintptr_t cfa = (rule.cfa_from_rbp ? rbp : rsp) + static_cast<intptr_t>(rule.cfa_offset);
    // The caller's frame lies above this one, inside the thread's stack.
    if (cfa <= rsp || cfa > high) return -1;
    const uintptr_t next_pc = *reinterpret_cast<const uintptr_t*>(cfa - 8);
    if (rule.rbp_saved) {
      const uintptr_t at = cfa + static_cast<intptr_t>(rule.rbp_offset);
      if (at < rsp || at + 8 > high) return -1;
      rbp = *reinterpret_cast<const uintptr_t*>(at);
      if (count - 1 < kMemoFrames) memo.rbp_at[count - 1] = at;
    }
    rsp = cfa;
    if (next_pc < 0x4000) break;  // where libunwind stops too: a zeroed return address ends some stacks
    pc = next_pc;
    out[count] = reinterpret_cast<void*>(pc);
    Remember(memo, count++, pc, rsp, rbp);
  }
  memo.count = count < kMemoFrames ? count : kMemoFrames;
  if (count > kMemoFrames) memo.complete = false;  // not all of it remembered
  t_memo_previous ^= 1;
  if (frames_reused != nullptr) *frames_reused = reused;
  return count;
}

}  // namespace cumemtrace::preload
