// UTF-8 checks and repair for every writer whose format wants UTF-8 (JSON, pickle's BINUNICODE, pprof's proto3 string
// table). Names and paths in a trace are bytes (the traced process owes us no UTF-8: a Latin-1 file name, a thread
// name cut inside a character); a proto3 `string` holding invalid UTF-8 makes strict readers (Go's protobuf, so
// `go tool pprof`) reject the whole file, and libprotobuf log an error on serializing it.
#ifndef CUMEMTRACE_ANALYZER_RENDER_UTF8_H_
#define CUMEMTRACE_ANALYZER_RENDER_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace cumemtrace::analyzer {

// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 when the bytes there are not one (a stray continuation
// byte, a truncated, overlong or surrogate sequence, a code point above U+10FFFF).
size_t Utf8SequenceLength(absl::string_view s, size_t i);

// `s` with every byte that does not start a valid sequence replaced by U+FFFD; `s` itself when it is valid.
std::string ValidUtf8(absl::string_view s);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_RENDER_UTF8_H_
