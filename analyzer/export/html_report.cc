// HtmlReport: fills the page template's three slots. The data must not end (or comment out) the <script> element,
// so every '<' in it, which JSON only has inside strings, becomes "\u003c" (the same string to a JSON parser); the
// title is HTML-escaped.
#include "analyzer/export/html_report.h"

#include "absl/strings/str_replace.h"
#include <string_view>

#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

extern const char kHtmlPage[];
extern const char kHtmlScript[];

namespace {

std::string EscapeHtml(absl::string_view s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

}  // namespace

std::string HtmlReport(const std::string& title, const std::string& data_json) {
  const std::string_view page = kHtmlPage;
  std::string out;
  out.reserve(page.size() + data_json.size() + 65536);
  const size_t title_at = page.find("@@TITLE@@");
  const size_t data_at = page.find("@@DATA@@");
  const size_t js_at = page.find("@@JS@@");
  out.append(page.substr(0, title_at));
  out.append(EscapeHtml(title));
  out.append(page.substr(title_at + 9, data_at - title_at - 9));
  out.append(absl::StrReplaceAll(data_json, {{"<", "\\u003c"}}));
  out.append(page.substr(data_at + 8, js_at - data_at - 8));
  out.append(kHtmlScript);
  out.append(page.substr(js_at + 6));
  return out;
}

}  // namespace cumemtrace::analyzer
