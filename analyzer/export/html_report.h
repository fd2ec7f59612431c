// `cumem-analyze html`: one self-contained HTML file (page, style, script and data inline; a Content-Security-
// Policy that forbids every request) that opens from a bug report on any machine, offline. The page and script
// live in export/html/ and are embedded at build time; the data is html_data.h's document.
#ifndef CUMEMTRACE_ANALYZER_EXPORT_HTML_REPORT_H_
#define CUMEMTRACE_ANALYZER_EXPORT_HTML_REPORT_H_

#include <string>

namespace cumemtrace::analyzer {

// The page with `title` (plain text) and `data_json` (a JSON document) inlined.
std::string HtmlReport(const std::string& title, const std::string& data_json);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_EXPORT_HTML_REPORT_H_
