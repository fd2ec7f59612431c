// The diff report (reports/diff_report.h) as text for people and as JSON (docs/json.md, "diff").
#ifndef CUMEMTRACE_ANALYZER_RENDER_DIFF_RENDER_H_
#define CUMEMTRACE_ANALYZER_RENDER_DIFF_RENDER_H_

#include <string>

#include "analyzer/reports/diff_report.h"

namespace cumemtrace::analyzer {

struct DiffHeading {
  std::string a_path;
  std::string b_path;
  std::string group_by;
  size_t frames = 8;
};

std::string DiffText(const DiffHeading& heading, const DiffReport& report);
std::string DiffJson(const DiffHeading& heading, const DiffReport& report);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_DIFF_RENDER_H_
