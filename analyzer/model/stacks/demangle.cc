// Demangling with the C++ runtime's abi::__cxa_demangle. Only names that start with "_Z" are passed to it (plain C
// names would otherwise demangle as types: "i" -> "int"), and only up to a length that keeps its recursion sane on
// hostile input: a name from a damaged trace must never crash the analyzer.
#include "analyzer/model/stacks/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace cumemtrace::analyzer {
namespace {

constexpr size_t kMaxDemangleLength = 16384;

}  // namespace

std::string Demangle(absl::string_view name) {
  if (name.size() < 3 || name.size() > kMaxDemangleLength || name.substr(0, 2) != "_Z") return std::string(name);
  const std::string mangled(name);  // __cxa_demangle needs a NUL-terminated string
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
  if (status != 0 || demangled == nullptr) return mangled;
  return std::string(demangled.get());
}

}  // namespace cumemtrace::analyzer
