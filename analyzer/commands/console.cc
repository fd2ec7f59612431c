// Console: the only code in cumem-analyze that writes to stdout, stderr or an output file.
#include "analyzer/commands/console.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cumemtrace::analyzer {
namespace {

bool WriteAll(const std::string& bytes, std::FILE* f) {
  return std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
}

}  // namespace

std::string TraceWarning(const TraceInfo& info) {
  std::string out;
  if (info.stats.late_events != 0) {
    absl::StrAppend(&out, "warning: ", info.path, ": ", info.stats.late_events,
                    " events could not be put in order (up to ", info.stats.max_lateness,
                    " sequence numbers late); the report's numbers may be wrong\n");
  }
  if (info.stats.damaged_packets != 0) {
    absl::StrAppend(&out, "warning: ", info.stats.first_damage, "; skipped ", info.stats.damaged_packets,
                    " damaged packets (", info.stats.skipped_bytes,
                    " bytes): what they held is missing from the report\n");
  }
  if (info.stats.undecodable_batches != 0) {
    absl::StrAppend(&out, "warning: ", info.path, ": ", info.stats.undecodable_batches,
                    " compressed event batches could not be inflated (an earlier part of their zstd frame was "
                    "damaged): their events are missing from the report\n");
  }
  const NoticeInfo* write_failed = nullptr;
  for (const NoticeInfo& n : info.notices) {
    if (n.code == format::NoticeCode::kWriteFailed) write_failed = &n;
  }
  if (write_failed != nullptr) {
    absl::StrAppend(&out, "warning: ", info.path, " is incomplete: the traced process could not write it (",
                    write_failed->message, "); analyzed the ", info.stats.events, " events before that");
  } else if (info.stats.truncated) {
    absl::StrAppend(&out, "warning: ", info.path, " is cut off at byte ", info.stats.truncated_at,
                    " (the process was killed?); analyzed the ", info.stats.events, " events before it");
  } else if (!info.has_trailer) {
    absl::StrAppend(&out, "warning: ", info.path, " has no trailer: the process did not exit cleanly");
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int Console::Report(const std::string& text) {
  const bool ok = WriteAll(text, out_);
  if (std::fflush(out_) != 0 || !ok) {
    return Error(absl::StrCat("cannot write the report to stdout (", std::strerror(errno), ")"));
  }
  return kExitOk;
}

int Console::WriteOutput(const std::string& path, const std::string& bytes) {
  if (path.empty()) return Report(bytes);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Error(absl::StrCat("cannot write ", path));
  const bool ok = WriteAll(bytes, f);
  if (std::fclose(f) != 0 || !ok) return Error(absl::StrCat("cannot write all of ", path));
  return kExitOk;
}

int Console::Error(const absl::Status& status) { return Error(std::string(status.message())); }

int Console::Error(const std::string& message) {
  Note(absl::StrCat(kToolName, ": ", message, "\n"));
  return kExitError;
}

void Console::Warn(const TraceInfo& info) {
  const std::string warning = TraceWarning(info);
  if (!warning.empty()) Note(warning + "\n");
}

void Console::Note(const std::string& text) {
  WriteAll(text, err_);
  std::fflush(err_);
}

}  // namespace cumemtrace::analyzer
