// Turns the raw (mangled) symbol names the preload records into readable C++ names.
#ifndef CUMEMTRACE_ANALYZER_MODEL_STACKS_DEMANGLE_H_
#define CUMEMTRACE_ANALYZER_MODEL_STACKS_DEMANGLE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

// Returns the demangled form of an Itanium C++ ABI name ("_Z..."), or `name` unchanged when it is not one or does
// not demangle (C names such as "cudaMalloc" stay as they are).
std::string Demangle(absl::string_view name);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_MODEL_STACKS_DEMANGLE_H_
