// The ranks report as text. Layout only: must never compute anything the report did not.
#include "analyzer/render/text/text_ranks.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analyzer/render/text/text_common.h"

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kOwnersShown = 3;

std::string OrDash(int32_t value) { return value < 0 ? std::string("-") : absl::StrCat(value); }

std::string Owners(const RankDevice& d) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < d.owners_at_peak.size() && i < kOwnersShown; ++i) {
    parts.push_back(absl::StrCat(Printable(d.owners_at_peak[i].owner), " ", HumanBytes(d.owners_at_peak[i].bytes)));
  }
  std::string out = absl::StrJoin(parts, ", ");
  if (d.owners_at_peak.size() > kOwnersShown) {
    absl::StrAppend(&out, " (+", d.owners_at_peak.size() - kOwnersShown, " more)");
  }
  return out;
}

std::string Where(const RanksReport& r, size_t entry, int32_t device) {
  const RankEntry& e = r.entries[entry];
  const std::string who = e.rank >= 0 ? absl::StrCat("rank ", e.rank) : absl::StrCat("pid ", e.pid);
  return absl::StrCat(who, ", ", DeviceName(device));
}

}  // namespace

std::string RanksText(const RanksReport& r) {
  std::string out;
  absl::StrAppend(&out, "Ranks: ", Plural(r.entries.size(), "trace", "traces"), "\n\n");
  std::vector<std::vector<std::string>> rows = {{"rank", "local", "world", "host", "pid", "events", "failed", "leaked",
                                                 "device", "peak", "at", "owners at the peak", "trace"}};
  for (const RankEntry& e : r.entries) {
    std::vector<std::string> who = {OrDash(e.rank),
                                    OrDash(e.local_rank),
                                    OrDash(e.world_size),
                                    e.hostname.empty() ? std::string("-") : Printable(e.hostname),
                                    absl::StrCat(e.pid),
                                    absl::StrCat(e.events),
                                    absl::StrCat(e.failed_allocations),
                                    HumanBytes(e.leaked_bytes)};
    if (e.devices.empty()) {
      std::vector<std::string> row = who;
      row.insert(row.end(), {"-", "-", "-", "(no device memory)", Printable(e.path)});
      rows.push_back(std::move(row));
      continue;
    }
    for (size_t i = 0; i < e.devices.size(); ++i) {
      const RankDevice& d = e.devices[i];
      std::vector<std::string> row = i == 0 ? who : std::vector<std::string>(who.size());
      row.insert(row.end(), {DeviceName(d.device), HumanBytes(d.peak_bytes), Seconds(d.peak_time_ns), Owners(d),
                             i == 0 ? Printable(e.path) : std::string()});
      rows.push_back(std::move(row));
    }
  }
  absl::StrAppend(&out, Table(rows, "rrrlrrrrlrrll"), "\n");
  const RanksSpread& s = r.spread;
  if (!s.any) {
    absl::StrAppend(&out, "Spread: no rank allocated device memory.\n");
    return out;
  }
  absl::StrAppendFormat(&out, "Spread: device peaks from %s (%s) to %s (%s)", HumanBytes(s.device_peak_min),
                        Where(r, s.min_entry, s.min_device), HumanBytes(s.device_peak_max),
                        Where(r, s.max_entry, s.max_device));
  if (s.max_over_min.has_value()) absl::StrAppendFormat(&out, "; max/min %.2f", *s.max_over_min);
  absl::StrAppend(&out, "\n");
  return out;
}

}  // namespace cumemtrace::analyzer
