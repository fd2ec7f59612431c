// DiffText and DiffJson. Every JSON name here is in docs/json.md.
#include "analyzer/render/diff_render.h"

#include "absl/strings/str_cat.h"
#include "analyzer/render/json/json_common.h"
#include "analyzer/render/json/json_writer.h"
#include "analyzer/render/text/text_common.h"

namespace cumemtrace::analyzer {
namespace {

// "+1.5 GiB", "-200 B", "=".
std::string ChangeText(int64_t change) {
  if (change == 0) return "=";
  if (change > 0) return absl::StrCat("+", HumanBytes(static_cast<uint64_t>(change)));
  return absl::StrCat("-", HumanBytes(0 - static_cast<uint64_t>(change)));
}

void AppendTotals(const char* title, const std::vector<TotalDiff>& totals, std::string* out) {
  absl::StrAppend(out, "\n", title, "\n");
  if (totals.empty()) {
    absl::StrAppend(out, "  (none in either trace)\n");
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"", "", "A", "B", "change"}};
  for (const TotalDiff& t : totals) {
    rows.push_back({DeviceName(t.device), t.kind, HumanBytes(t.a_bytes), HumanBytes(t.b_bytes),
                    ChangeText(t.change())});
  }
  absl::StrAppend(out, Table(rows, "llrrr", "  "));
}

void AppendGroups(const char* title, const std::vector<GroupDiff>& groups, uint64_t changed, size_t frames,
                  std::string* out) {
  const std::string shown = changed > groups.size() ? absl::StrCat(", the top ", groups.size()) : "";
  absl::StrAppend(out, "\n", title, " (", changed, " changed", shown, ")\n");
  if (groups.empty()) {
    absl::StrAppend(out, "  (no change)\n");
    return;
  }
  for (const GroupDiff& g : groups) {
    std::string where = WhereText(g.label);
    if (where.empty()) where = absl::StrCat("stack #", g.stack_id, g.in_b ? " in B" : " in A");
    absl::StrAppend(out, "  ", ChangeText(g.change()), "  ", DeviceName(g.device), " ", g.kind, "  ",
                    Printable(where), "\n    A ", HumanBytes(g.a_bytes), " in ", g.a_count, ", B ",
                    HumanBytes(g.b_bytes), " in ", g.b_count, "\n");
    AppendFrames(g.frames, frames, "      ", out);
  }
}

// Churn: allocations made and their bytes summed, per (device, kind).
void AppendChurnTotals(const DiffReport& r, std::string* out) {
  absl::StrAppend(out, "\nallocated over the run (allocations; bytes summed)\n");
  if (r.churn_totals.empty()) {
    absl::StrAppend(out, "  (none in either trace)\n");
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"", "", "A", "B", "A bytes", "B bytes", "change"}};
  for (size_t i = 0; i < r.churn_totals.size(); ++i) {
    const TotalDiff& t = r.churn_totals[i];
    rows.push_back({DeviceName(t.device), t.kind, absl::StrCat(r.churn_total_a_counts[i]),
                    absl::StrCat(r.churn_total_b_counts[i]), HumanBytes(t.a_bytes), HumanBytes(t.b_bytes),
                    ChangeText(t.change())});
  }
  absl::StrAppend(out, Table(rows, "llrrrrr", "  "));
}

void WriteTotals(JsonWriter& w, const char* key, const std::vector<TotalDiff>& totals) {
  w.Key(key);
  w.BeginArray();
  for (const TotalDiff& t : totals) {
    w.BeginObject();
    w.Member("device", t.device);
    w.Member("kind", t.kind);
    w.Member("a_bytes", t.a_bytes);
    w.Member("b_bytes", t.b_bytes);
    w.Member("change_bytes", t.change());
    w.EndObject();
  }
  w.EndArray();
}

void WriteGroupDiffs(JsonWriter& w, const char* key, const std::vector<GroupDiff>& groups) {
  w.Key(key);
  w.BeginArray();
  for (const GroupDiff& g : groups) {
    w.BeginObject();
    w.Member("device", g.device);
    w.Member("kind", g.kind);
    w.Member("a_bytes", g.a_bytes);
    w.Member("a_count", g.a_count);
    w.Member("b_bytes", g.b_bytes);
    w.Member("b_count", g.b_count);
    w.Member("change_bytes", g.change());
    w.Member("identity", g.identity);
    w.Member("stack_in", g.in_b ? "b" : "a");
    w.Member("stack_id", g.stack_id);
    w.Key("stack");
    WriteStack(w, g.frames);
    WriteLabel(w, g.label);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string DiffText(const DiffHeading& h, const DiffReport& r) {
  std::string out = absl::StrCat("diff: A ", Printable(h.a_path), "\n      B ", Printable(h.b_path),
                                 "\n      groups matched by function, file and line (--group-by ", h.group_by,
                                 ")\n");
  AppendTotals("peaks", r.peaks, &out);
  AppendTotals("live at the end", r.leak_totals, &out);
  AppendGroups("live at the end by group, largest change first", r.leak_groups, r.leak_group_count, h.frames, &out);
  AppendGroups("live at the peak by group, largest change first", r.peak_groups, r.peak_group_count, h.frames,
               &out);
  AppendChurnTotals(r, &out);
  AppendGroups("allocated over the run by group (bytes summed, in allocations), largest change first",
               r.churn_groups, r.churn_group_count, h.frames, &out);
  return out;
}

std::string DiffJson(const DiffHeading& h, const DiffReport& r) {
  std::string out;
  JsonWriter w(&out, 2);
  w.BeginObject();
  w.Member("schema_version", kJsonSchemaVersion);
  w.Member("command", "diff");
  w.Member("a", h.a_path);
  w.Member("b", h.b_path);
  w.Member("group_by", h.group_by);
  WriteTotals(w, "peaks", r.peaks);
  WriteTotals(w, "leak_totals", r.leak_totals);
  WriteGroupDiffs(w, "leak_groups", r.leak_groups);
  w.Member("leak_groups_changed", r.leak_group_count);
  WriteGroupDiffs(w, "peak_groups", r.peak_groups);
  w.Member("peak_groups_changed", r.peak_group_count);
  w.Key("churn_totals");
  w.BeginArray();
  for (size_t i = 0; i < r.churn_totals.size(); ++i) {
    const TotalDiff& t = r.churn_totals[i];
    w.BeginObject();
    w.Member("device", t.device);
    w.Member("kind", t.kind);
    w.Member("a_count", r.churn_total_a_counts[i]);
    w.Member("b_count", r.churn_total_b_counts[i]);
    w.Member("a_bytes", t.a_bytes);
    w.Member("b_bytes", t.b_bytes);
    w.Member("change_bytes", t.change());
    w.EndObject();
  }
  w.EndArray();
  WriteGroupDiffs(w, "churn_groups", r.churn_groups);
  w.Member("churn_groups_changed", r.churn_group_count);
  w.EndObject();
  out += "\n";
  return out;
}

}  // namespace cumemtrace::analyzer
