// The data an HTML report inlines: one compact JSON document (strings, frames and stacks each written once and
// referred to by index; timelines as bucketed arrays) that the page's script draws. Its size depends on buckets,
// snapshots and unique stacks kept, never on the number of events. docs/json.md ("html data") describes it.
//
// The segment/block map of PyTorch's caching allocator has a hook here (HtmlExtras::allocator_json): the allocator
// layer fills it with its own JSON when a trace has blocks, and the page draws it when present; absent otherwise.
#ifndef CUMEMTRACE_ANALYZER_EXPORT_HTML_DATA_H_
#define CUMEMTRACE_ANALYZER_EXPORT_HTML_DATA_H_

#include <string>

#include "analyzer/reports/page_report.h"

namespace cumemtrace::analyzer {

struct HtmlExtras {
  // The diagnosis, one sentence a line (render/text: DiagnosisText), shown first on the page.
  std::vector<std::string> diagnosis;
  // JSON value for the "allocator" member (segments and blocks per device over time), or "" when the trace has
  // none. Filled by the caching-allocator layer.
  std::string allocator_json;
};

std::string HtmlData(const PageReport& report, const HtmlExtras& extras = {});

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_EXPORT_HTML_DATA_H_
