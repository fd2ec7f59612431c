// ParseByteSize: a number (integer or decimal) and an optional unit, case-insensitive.
#include "analyzer/byte_size.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {
namespace {

struct Unit {
  const char* name;
  double factor;
};

constexpr Unit kUnits[] = {
    {"", 1},           {"b", 1},
    {"k", 1024.0},     {"kib", 1024.0},     {"kb", 1e3},
    {"m", 1048576.0},  {"mib", 1048576.0},  {"mb", 1e6},
    {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},
    {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12},
};

}  // namespace

absl::Status ParseByteSize(absl::string_view flag, absl::string_view text, uint64_t* bytes) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " takes a size such as 8GiB, 512MiB or 1000000, not '", text, "'"));
  };
  size_t split = 0;
  while (split < text.size() && (absl::ascii_isdigit(text[split]) || text[split] == '.')) ++split;
  const absl::string_view number = text.substr(0, split);
  const std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text.substr(split)));
  if (number.empty()) return bad();
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    uint64_t whole = 0;
    if (number.find('.') == absl::string_view::npos && u.factor == 1) {
      if (!absl::SimpleAtoi(number, &whole)) return bad();
      *bytes = whole;
      return absl::OkStatus();
    }
    double value = 0;
    if (!absl::SimpleAtod(number, &value) || !std::isfinite(value)) return bad();
    const double b = std::round(value * u.factor);
    if (b < 0 || b >= 18446744073709551615.0) return bad();
    *bytes = static_cast<uint64_t>(b);
    return absl::OkStatus();
  }
  return bad();
}

}  // namespace cumemtrace::analyzer
