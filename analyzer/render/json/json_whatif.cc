// Every name here is documented in docs/json.md; never rename one without bumping kJsonSchemaVersion.
#include "analyzer/render/json/json_whatif.h"

#include "analyzer/render/json/json_common.h"
#include "analyzer/render/json/json_writer.h"

namespace cumemtrace::analyzer {
namespace {

void ReplayOutcomeJson(JsonWriter& w, const char* key, const ReplayOutcome& o) {
  w.Key(key);
  if (!o.ran) {
    w.Null();
    return;
  }
  w.BeginObject();
  w.Member("oom", o.oom);
  w.Member("requests", o.requests);
  w.Member("reserved_peak", o.reserved_peak);
  w.Member("allocated_peak", o.allocated_peak);
  w.Member("recovered_requests", o.recovered);
  w.Member("headroom", o.headroom);
  w.Key("failure");
  if (!o.oom) {
    w.Null();
  } else {
    w.BeginObject();
    w.Member("seq", o.failed_seq);
    w.Member("size", o.failed_size);
    w.Member("stack_id", o.failed_stack);
    w.Member("reserved", o.reserved_at_failure);
    w.Member("allocated", o.allocated_at_failure);
    w.Member("largest_free_block", o.largest_free_at_failure);
    w.Member("outside", o.outside_at_failure);
    w.EndObject();
  }
  w.EndObject();
}

}  // namespace

std::string WhatIfJson(const WhatIfReport& r) {
  const WhatIf& x = r.replay;
  std::string out;
  JsonWriter w(&out, 2);
  w.BeginObject();
  w.Member("schema_version", kJsonSchemaVersion);
  w.Member("command", "whatif");
  w.Member("claim", WhatIfClaimName(r.claim));
  w.Key("oom");
  if (r.claimed()) {
    w.Bool(r.claim == WhatIfClaim::kOom);
  } else {
    w.Null();
  }
  w.Key("reserved_peak");
  if (r.claim == WhatIfClaim::kRunsThrough) {
    w.Uint(x.whatif.reserved_peak);
  } else {
    w.Null();
  }
  w.Key("free_at_failure");  // the card less reserved and outside memory when the replay failed
  if (r.claim == WhatIfClaim::kOom) {
    w.Uint(r.free_at_failure);
  } else {
    w.Null();
  }
  w.Member("device", x.device);
  w.Member("settings", x.settings);
  w.Member("recorded_settings", x.recorded_settings);
  w.Member("unsupported", x.unsupported);
  w.Key("notes");
  w.BeginArray();
  for (const std::string& note : x.notes) w.String(note);
  w.EndArray();
  w.Key("whatif_memory_cap");  // the per-process cap in the what-if replay (null: none)
  if (x.whatif_cap == 0) {
    w.Null();
  } else {
    w.Uint(x.whatif_cap);
  }
  w.Member("capacity_bytes", x.capacity);
  w.Member("recorded_capacity_bytes", x.recorded_capacity);
  w.Member("without_outside", x.without_outside);
  w.Member("outside_max", x.outside_max);
  w.Key("recorded");
  w.BeginObject();
  w.Member("requests", x.torch_requests);
  w.Member("oom", x.recorded_oom);
  w.Key("oom_seq");
  if (x.recorded_oom) {
    w.Uint(x.recorded_oom_seq);
  } else {
    w.Null();
  }
  w.Member("reserved_peak", x.recorded_reserved_peak);
  w.EndObject();
  w.Key("fidelity");
  w.BeginObject();
  w.Member("exact", x.fidelity.exact);
  w.Member("requests", x.fidelity.requests);
  w.Member("segments", x.fidelity.segments);
  w.Member("blocks", x.fidelity.blocks);
  w.Key("diverged_seq");
  if (x.fidelity.exact || !x.unsupported.empty()) {
    w.Null();
  } else {
    w.Uint(x.fidelity.diverged_seq);
  }
  w.Member("divergence", x.fidelity.divergence);
  w.EndObject();
  w.Key("memory_cap");
  if (x.fidelity.capped_refusals == 0) {
    w.Null();
  } else {
    w.BeginObject();
    w.Member("refusals", x.fidelity.capped_refusals);
    w.Member("low", x.fidelity.cap_low);
    w.Member("high", x.fidelity.cap_high);
    w.EndObject();
  }
  ReplayOutcomeJson(w, "capacity_check", x.capacity_check);
  w.Member("capacity_model_agrees", x.capacity_model_agrees);
  ReplayOutcomeJson(w, "replay", x.whatif);
  w.EndObject();
  out.push_back('\n');
  return out;
}

}  // namespace cumemtrace::analyzer
