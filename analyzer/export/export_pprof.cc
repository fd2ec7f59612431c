// PprofProfile: string table, functions and locations interned by symbolic frame (symbolic_frame.h), so the same
// line reached through two pcs is one location.
#include "analyzer/export/export_pprof.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "analyzer/render/utf8.h"
#include "analyzer/reports/symbolic_frame.h"
#include "proto/pprof_profile.pb.h"

namespace cumemtrace::analyzer {
namespace {

class ProfileBuilder {
 public:
  explicit ProfileBuilder(const ProfileReport& r) : report_(r) { String(""); }

  // pprof's string table is proto3 `string`: names and paths from the trace (bytes) are repaired to UTF-8 there
  // (found by tests/fuzz: a module path with a stray byte made a profile `go tool pprof` rejects).
  int64_t String(const std::string& s) {
    auto [it, added] = strings_.try_emplace(s, profile_.string_table_size());
    if (added) profile_.add_string_table(ValidUtf8(s));
    return it->second;
  }

  void AddSample(const ProfileSample& sample) {
    pprof::Sample* s = profile_.add_sample();
    for (uint64_t loc : Locations(sample.stack)) s->add_location_id(loc);
    for (int64_t v : sample.values) s->add_value(v);
    if (!sample.timeline.empty()) {
      pprof::Label* l = s->add_label();
      l->set_key(String("timeline"));
      l->set_str(String(sample.timeline));
    }
  }

  pprof::Profile& profile() { return profile_; }

 private:
  const std::vector<uint64_t>& Locations(size_t stack) {
    auto it = stack_locations_.find(stack);
    if (it != stack_locations_.end()) return it->second;
    std::vector<uint64_t>& out = stack_locations_[stack];
    for (const Frame& f : report_.stacks[stack]) out.push_back(Location(f));
    return out;
  }

  uint64_t Location(const Frame& f) {
    // Unnamed native frames keep their offset apart: two of them in one module are two places.
    std::string key = SymbolicKey(f);
    if (f.kind == FrameKind::kNative && !f.function_known) key += absl::StrCat("+", f.offset.value_or(f.pc));
    auto [it, added] = locations_.try_emplace(key, profile_.location_size() + 1);
    if (!added) return it->second;
    pprof::Location* loc = profile_.add_location();
    loc->set_id(it->second);
    if (f.kind == FrameKind::kNative) loc->set_address(f.offset.value_or(0));
    pprof::Line* line = loc->add_line();
    line->set_function_id(Function(f));
    line->set_line(f.line);
    return it->second;
  }

  uint64_t Function(const Frame& f) {
    // Native frames without a file are told apart by module: "cudaMalloc [libcudart.so.13]" is one function.
    const std::string name = f.file.empty() && f.kind == FrameKind::kNative ? FlameName(f) : f.function;
    const std::string file = f.file.empty() ? std::string(Basename(f.module)) : f.file;
    const std::string key = name + '\n' + file;
    auto [it, added] = functions_.try_emplace(key, profile_.function_size() + 1);
    if (!added) return it->second;
    pprof::Function* fn = profile_.add_function();
    fn->set_id(it->second);
    fn->set_name(String(name));
    fn->set_system_name(String(name));
    fn->set_filename(String(file));
    return it->second;
  }

  const ProfileReport& report_;
  pprof::Profile profile_;
  absl::flat_hash_map<std::string, int64_t> strings_;
  absl::flat_hash_map<std::string, uint64_t> locations_;
  absl::flat_hash_map<std::string, uint64_t> functions_;
  absl::flat_hash_map<size_t, std::vector<uint64_t>> stack_locations_;
};

}  // namespace

std::string PprofProfile(const ProfileReport& r) {
  ProfileBuilder b(r);
  pprof::Profile& p = b.profile();
  const char* kTypes[4][2] = {{"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"},
                              {"inuse_space", "bytes"}};
  for (const auto& t : kTypes) {
    pprof::ValueType* v = p.add_sample_type();
    v->set_type(b.String(t[0]));
    v->set_unit(b.String(t[1]));
  }
  p.set_default_sample_type(b.String("inuse_space"));
  p.mutable_period_type()->set_type(b.String("space"));
  p.mutable_period_type()->set_unit(b.String("bytes"));
  p.set_period(1);
  p.set_time_nanos(r.start_unix_time_ns);
  p.set_duration_nanos(r.duration_ns);
  p.add_comment(b.String("cumemtrace: CUDA memory of " + r.path));
  for (const ProfileSample& s : r.samples) b.AddSample(s);
  return p.SerializeAsString();
}

}  // namespace cumemtrace::analyzer
