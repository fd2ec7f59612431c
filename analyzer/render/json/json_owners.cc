// `owners` and `driver_memory` as JSON. Every name here is documented in docs/json.md; never rename one without
// bumping kJsonSchemaVersion.
#include "analyzer/render/json/json_owners.h"

namespace cumemtrace::analyzer {

void WriteOwnersJson(JsonWriter& w, const std::vector<OwnerUsage>& owners,
                     const std::vector<DriverMemory>& driver_memory) {
  w.Key("owners");
  w.BeginArray();
  for (const OwnerUsage& o : owners) {
    w.BeginObject();
    w.Member("device", o.device);
    w.Member("owner", o.name.slug);
    w.Member("display_name", o.name.display_name);
    w.Member("allocations", o.allocations);
    w.Member("bytes_allocated", o.bytes_allocated);
    w.Member("peak_bytes", o.peak_bytes);
    w.Member("bytes_at_device_peak", o.bytes_at_device_peak);
    w.Member("live_bytes_at_end", o.live_bytes_at_end);
    w.EndObject();
  }
  w.EndArray();
  w.Key("driver_memory");
  w.BeginArray();
  for (const DriverMemory& d : driver_memory) {
    w.BeginObject();
    w.Member("device", d.device);
    w.Member("samples", d.samples);
    w.Member("total_bytes", d.total_bytes);
    w.Member("used_min", d.used_min);
    w.Member("used_max", d.used_max);
    w.Member("traced_at_max", d.traced_at_max);
    w.Member("unexplained_at_max", d.unexplained_at_max);
    w.Member("unexplained_min", d.unexplained_min);
    w.Member("unexplained_max", d.unexplained_max);
    w.Member("unexplained_last", d.unexplained_last);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace cumemtrace::analyzer
