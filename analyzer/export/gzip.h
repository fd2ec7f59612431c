// gzip (RFC 1952) in memory with zlib, for the pprof export (profile.proto files are gzipped on disk) and for the
// tests that read it back.
#ifndef CUMEMTRACE_ANALYZER_EXPORT_GZIP_H_
#define CUMEMTRACE_ANALYZER_EXPORT_GZIP_H_

#include <string>

#include "absl/status/statusor.h"

namespace cumemtrace::analyzer {

std::string Gzip(const std::string& bytes);
// Inflates a gzip member; InvalidArgument when `bytes` is not gzip.
absl::StatusOr<std::string> Gunzip(const std::string& bytes);

}  // namespace cumemtrace::analyzer

#endif  // CUMEMTRACE_ANALYZER_EXPORT_GZIP_H_
