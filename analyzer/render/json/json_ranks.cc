// The ranks report as JSON. Every name here is documented in docs/json.md; never rename one without bumping
// kJsonSchemaVersion.
#include "analyzer/render/json/json_ranks.h"

#include "analyzer/render/json/json_common.h"
#include "analyzer/render/json/json_writer.h"

namespace cumemtrace::analyzer {
namespace {

// -1 (absent) as null.
void OptionalInt(JsonWriter& w, const char* key, int32_t value) {
  w.Key(key);
  if (value < 0) {
    w.Null();
  } else {
    w.Int(value);
  }
}

}  // namespace

std::string RanksJson(const RanksReport& r) {
  std::string out;
  JsonWriter w(&out, 2);
  w.BeginObject();
  w.Member("schema_version", kJsonSchemaVersion);
  w.Member("command", "ranks");
  w.Key("ranks");
  w.BeginArray();
  for (const RankEntry& e : r.entries) {
    w.BeginObject();
    w.Member("path", e.path);
    OptionalInt(w, "rank", e.rank);
    OptionalInt(w, "local_rank", e.local_rank);
    OptionalInt(w, "world_size", e.world_size);
    w.Member("hostname", e.hostname);
    w.Member("pid", e.pid);
    w.Member("events", e.events);
    w.Member("failed_allocations", e.failed_allocations);
    w.Member("leaked_bytes", e.leaked_bytes);
    w.Key("devices");
    w.BeginArray();
    for (const RankDevice& d : e.devices) {
      w.BeginObject();
      w.Member("device", d.device);
      w.Member("peak_bytes", d.peak_bytes);
      w.Member("peak_time_ns", d.peak_time_ns);
      w.Key("owners_at_peak");
      w.BeginArray();
      for (const RankOwnerBytes& o : d.owners_at_peak) {
        w.BeginObject();
        w.Member("owner", o.owner);
        w.Member("bytes", o.bytes);
        w.EndObject();
      }
      w.EndArray();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("spread");
  w.BeginObject();
  const RanksSpread& s = r.spread;
  w.Key("device_peak_max");
  if (s.any) {
    w.Uint(s.device_peak_max);
  } else {
    w.Null();
  }
  w.Key("device_peak_min");
  if (s.any) {
    w.Uint(s.device_peak_min);
  } else {
    w.Null();
  }
  w.Key("max_over_min");
  if (s.max_over_min.has_value()) {
    w.Double(*s.max_over_min);
  } else {
    w.Null();
  }
  w.EndObject();
  w.EndObject();
  out.push_back('\n');
  return out;
}

}  // namespace cumemtrace::analyzer
