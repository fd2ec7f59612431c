// Owner and driver sections of the summary, as text. Layout only: must never compute anything the report did not.
#include "analyzer/render/text/text_owners.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analyzer/render/text/text_common.h"

namespace cumemtrace::analyzer {

std::string SignedBytes(int64_t bytes) {
  if (bytes >= 0) return HumanBytes(static_cast<uint64_t>(bytes));
  return absl::StrCat("-", HumanBytes(0 - static_cast<uint64_t>(bytes)));
}

void AppendOwnersText(const SummaryReport& r, std::string* out) {
  if (r.owners.empty()) {
    absl::StrAppend(out, "Memory by owner: no memory allocated.\n\n");
    return;
  }
  // GPUs first, the host last, as in the peak table.
  std::vector<const OwnerUsage*> owners;
  for (const OwnerUsage& o : r.owners) owners.push_back(&o);
  std::stable_partition(owners.begin(), owners.end(),
                        [](const OwnerUsage* o) { return o->device != format::kHostDevice; });
  std::vector<std::vector<std::string>> rows = {
      {"Memory by owner", "owner", "own peak", "at device peak", "at the end", "allocations"}};
  for (size_t i = 0; i < owners.size(); ++i) {
    const OwnerUsage& o = *owners[i];
    const bool first = i == 0 || owners[i - 1]->device != o.device;
    rows.push_back({first ? DeviceName(o.device) : "", Printable(o.name.display_name), HumanBytes(o.peak_bytes),
                    HumanBytes(o.bytes_at_device_peak), HumanBytes(o.live_bytes_at_end),
                    absl::StrCat(o.allocations)});
  }
  absl::StrAppend(out, Table(rows, "llrrrr"));
  absl::StrAppend(out,
                  "(owner = first library on the stack outside CUDA, glibc and the tool; host = pinned and "
                  "registered host memory)\n\n");
}

void AppendDriverMemoryText(const SummaryReport& r, std::string* out) {
  if (r.driver_memory.empty()) {
    absl::StrAppend(out, "driver: the trace has no memory samples");
    if (r.memory_samples_in_trailer != 0) {
      absl::StrAppend(out, " (the tool wrote ", r.memory_samples_in_trailer, " but none could be read)");
    } else {
      absl::StrAppend(out, " (sampling off: CUMEMTRACE_SAMPLE_MS=0, or a trace from an older tool)");
    }
    absl::StrAppend(out, "\n\n");
    return;
  }
  for (const DriverMemory& d : r.driver_memory) {
    absl::StrAppendFormat(out, "driver, %s: %s used at most", DeviceName(d.device), HumanBytes(d.used_max));
    if (d.unexplained_at_max >= 0) {
      absl::StrAppendFormat(out, "; traced allocations explain %s of it; %s is context, other processes or untraced "
                                 "memory",
                            HumanBytes(d.traced_at_max), HumanBytes(static_cast<uint64_t>(d.unexplained_at_max)));
    } else {
      absl::StrAppendFormat(out, "; traced allocations (%s) exceed it by %s (memory freed meanwhile by another "
                                 "process?)",
                            HumanBytes(d.traced_at_max), HumanBytes(0 - static_cast<uint64_t>(d.unexplained_at_max)));
    }
    absl::StrAppendFormat(out, "\n  %s of %s; unexplained from %s to %s, %s at the last\n",
                          Plural(d.samples, "sample", "samples"), HumanBytes(d.total_bytes),
                          SignedBytes(d.unexplained_min), SignedBytes(d.unexplained_max),
                          SignedBytes(d.unexplained_last));
  }
  out->push_back('\n');
}

}  // namespace cumemtrace::analyzer
