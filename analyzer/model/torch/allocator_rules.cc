// PyTorch's allocator rules (see allocator_rules.h). Pure functions: must never depend on anything but the config.
#include "analyzer/model/torch/allocator_rules.h"

#include <algorithm>
#include <bit>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace cumemtrace::analyzer {
namespace {

// PyTorch's lexer: ',', ':', '[' and ']' are tokens of their own; spaces are dropped.
std::vector<std::string> Lex(absl::string_view text) {
  std::vector<std::string> tokens;
  std::string word;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) tokens.push_back(std::move(word));
      word.clear();
      tokens.emplace_back(1, c);
    } else if (c != ' ') {
      word.push_back(c);
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

bool ParseBool(absl::string_view v) { return v == "True" || v == "true" || v == "1"; }

int Log2Floor(uint64_t v) { return v == 0 ? 0 : 63 - std::countl_zero(v); }

// Parses the value of roundup_power2_divisions starting at tokens[i] (after the ':'); returns the last token used.
size_t ParseRoundup(const std::vector<std::string>& t, size_t i, AllocatorConfig& c) {
  auto& d = c.roundup_divisions;
  if (i >= t.size()) return i;
  if (t[i] != "[") {
    uint64_t value = 0;
    if (absl::SimpleAtoi(t[i], &value)) d.fill(value);
    return i;
  }
  c.roundup_list = true;
  bool first = true;
  int last_index = 0;
  while (++i < t.size() && t[i] != "]") {
    const std::string& key = t[i];
    if (i + 2 >= t.size() || t[i + 1] != ":") return i;
    uint64_t value = 0;
    if (!absl::SimpleAtoi(t[i + 2], &value)) return i;  // not a number: the rest is not understood
    i += 2;
    if (key == ">") {
      std::fill(d.begin() + std::min(last_index + 1, kTorchRoundupIntervals), d.end(), value);
    } else {
      uint64_t boundary_mb = 0;
      if (!absl::SimpleAtoi(key, &boundary_mb)) return i;
      const int index = std::clamp(Log2Floor(boundary_mb), 0, kTorchRoundupIntervals - 1);
      if (first) std::fill(d.begin(), d.begin() + index, value);
      first = false;
      d[index] = value;
      last_index = index;
    }
    if (i + 1 < t.size() && t[i + 1] == ",") ++i;
  }
  return i;
}

uint64_t DivisionsFor(uint64_t size, const AllocatorConfig& c) {
  const int log_size = Log2Floor(size);
  const int start = Log2Floor(kTorchSmallSize);  // intervals start at 1 MiB
  const int index = std::min(log_size > start ? log_size - start : 0, kTorchRoundupIntervals - 1);
  return c.roundup_divisions[index];
}

uint64_t RoundupPower2NextDivision(uint64_t size, uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  const uint64_t floor = std::bit_floor(size);
  const uint64_t step = floor >> Log2Floor(divisions);
  if (step == 0) return floor << 1;
  const uint64_t rounded_down = size & ~(step - 1);
  return rounded_down == size ? size : rounded_down + step;
}

}  // namespace

AllocatorConfig ParseAllocatorConfig(absl::string_view text) {
  AllocatorConfig c;
  c.text = std::string(text);
  const std::vector<std::string> t = Lex(text);
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string& key = t[i];
    if (key == ",") continue;
    const bool has_value = i + 2 < t.size() && t[i + 1] == ":";
    const std::string value = has_value ? t[i + 2] : std::string();
    if (key == "expandable_segments") {
      c.expandable_segments = ParseBool(value);
    } else if (key == "max_split_size_mb") {
      uint64_t mb = 0;
      if (absl::SimpleAtoi(value, &mb)) {
        mb = std::max<uint64_t>(mb, kTorchLargeBuffer >> 20);
        c.max_split_size = mb >= (uint64_t{1} << 44) ? c.max_split_size : mb << 20;
      }
    } else if (key == "roundup_power2_divisions") {
      i = has_value ? ParseRoundup(t, i + 2, c) : i;
      continue;
    } else if (key == "backend") {
      if (value == "cudaMallocAsync") c.cuda_malloc_async = true;
    } else if (key == "garbage_collection_threshold") {
      // PyTorch refuses anything outside (0, 1); 0 here (a what-if's) turns it off.
      double threshold = 0;
      if (absl::SimpleAtod(value, &threshold) && threshold >= 0 && threshold < 1) {
        c.garbage_collection_threshold = threshold;
      } else {
        c.unmodelled.push_back(key + ":" + value);
      }
    } else if (key == "per_process_memory_fraction") {
      double fraction = 0;
      if (absl::SimpleAtod(value, &fraction) && fraction >= 0 && fraction <= 1) {
        c.per_process_memory_fraction = fraction;
      } else {
        c.unmodelled.push_back(key + ":" + value);
      }
    } else if (key == "max_non_split_rounding_mb") {
      uint64_t mb = 0;
      if (absl::SimpleAtoi(value, &mb) && mb < (uint64_t{1} << 44)) c.max_non_split_rounding = mb << 20;
    } else if (key == "release_lock_on_cudamalloc" || key == "release_lock_on_device_malloc" ||
               absl::StartsWithIgnoreCase(key, "pinned_")) {
      // Change which block is chosen or when cache is released (both seen as events), never a block's extent.
    } else if (key == "[" || key == "]" || key == ":") {
      continue;
    } else {
      c.unmodelled.push_back(value.empty() ? key : key + ":" + value);
    }
    if (has_value) i += 2;
  }
  return c;
}

uint64_t TorchFractionCap(const AllocatorConfig& config, uint64_t card_bytes) {
  const double f = config.per_process_memory_fraction;
  if (f <= 0 || f >= 1 || card_bytes == 0) return 0;
  return static_cast<uint64_t>(f * static_cast<double>(card_bytes));
}

uint64_t TorchRoundSize(uint64_t requested, const AllocatorConfig& config) {
  if (requested < kTorchMinBlock) return kTorchMinBlock;
  const uint64_t divisions = DivisionsFor(requested, config);
  if (divisions > 1 && requested > kTorchMinBlock * divisions) {
    return RoundupPower2NextDivision(requested, divisions);
  }
  return kTorchMinBlock * ((requested + kTorchMinBlock - 1) / kTorchMinBlock);
}

bool TorchShouldSplit(uint64_t block_size, uint64_t rounded, bool small_pool, const AllocatorConfig& config) {
  if (block_size < rounded) return false;
  const uint64_t remaining = block_size - rounded;
  if (small_pool || config.expandable_segments) return remaining >= kTorchMinBlock;
  return rounded < config.max_split_size && remaining > kTorchSmallSize;
}

uint64_t TorchSegmentSizeFor(uint64_t rounded) {
  if (rounded <= kTorchSmallSize) return kTorchSmallBuffer;
  if (rounded < kTorchMinLargeAlloc) return kTorchLargeBuffer;
  return kTorchRoundLarge * ((rounded + kTorchRoundLarge - 1) / kTorchRoundLarge);
}

}  // namespace cumemtrace::analyzer
