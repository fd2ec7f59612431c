// Redact: the reader finds which strings are file paths (Symbols.file, PythonFrames.file) and the program's tree;
// then the packets are copied, the header, modules, those strings and notices rewritten, everything else byte for
// byte.
#include "analyzer/tools/redact_command.h"

#include <memory>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analyzer/reader/trace_reader.h"
#include "analyzer/tools/packet_stream.h"
#include "analyzer/tools/path_redaction.h"
#include "proto/format.h"
#include "proto/trace.pb.h"

namespace cumemtrace::analyzer {
namespace {

namespace pb = ::cumemtrace::format;
namespace packet_field = ::cumemtrace::format::field::packet;

class Collector : public TraceVisitor {
 public:
  void OnHeader(const TraceHeader& h) override { header = h; }
  void OnSymbol(const SymbolInfo& s) override {
    if (s.file != 0) file_ids.insert(s.file);
  }
  void OnPythonFrame(const PythonFrameInfo& f) override {
    if (f.file != 0) {
      file_ids.insert(f.file);
      python_file_ids.insert(f.file);
    }
  }
  void OnString(uint32_t id, const std::string& value) override { strings.emplace_back(id, value); }

  TraceHeader header;
  absl::flat_hash_set<uint32_t> file_ids;
  absl::flat_hash_set<uint32_t> python_file_ids;
  std::vector<std::pair<uint32_t, std::string>> strings;
};

struct Counts {
  size_t modules = 0;
  size_t files = 0;
  size_t notices = 0;
  size_t dropped = 0;  // packets that may hold what is removed and did not parse
};

enum class Redaction { kCopy, kRewritten, kDrop };

// What becomes of a packet: copied unchanged, rewritten into `packet`, or left out. A packet of a kind that may hold
// what redaction removes but that does not parse (a damaged header, which the reader's copy of it stands in for) is
// left out: copied byte for byte it would keep the host name, command line and paths.
Redaction Rewrite(uint32_t field, absl::string_view bytes, const ProgramTree& tree,
                  const absl::flat_hash_set<uint32_t>& file_ids, pb::Packet* packet, Counts* counts) {
  if (field != packet_field::kHeader && field != packet_field::kModule && field != packet_field::kStrings &&
      field != packet_field::kNotice) {
    return Redaction::kCopy;
  }
  if (!packet->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    ++counts->dropped;
    return Redaction::kDrop;
  }
  switch (packet->data_case()) {
    case pb::Packet::kHeader: {
      pb::Header* h = packet->mutable_header();
      h->clear_hostname();
      std::vector<std::string> argv(h->argv().begin(), h->argv().end());
      h->clear_argv();
      for (std::string& arg : RedactArgv(argv, tree)) h->add_argv(std::move(arg));
      h->set_executable(RedactPath(h->executable(), tree));
      return Redaction::kRewritten;
    }
    case pb::Packet::kModule:
      packet->mutable_module()->set_path(RedactPath(packet->module().path(), tree));
      ++counts->modules;
      return Redaction::kRewritten;
    case pb::Packet::kStrings: {
      pb::Strings* s = packet->mutable_strings();
      for (int i = 0; i < s->value_size(); ++i) {
        if (file_ids.contains(s->first_id() + static_cast<uint32_t>(i))) {
          s->set_value(i, RedactPath(s->value(i), tree));
          ++counts->files;
        }
      }
      return Redaction::kRewritten;
    }
    case pb::Packet::kNotice:
      packet->mutable_notice()->set_message(RedactText(packet->notice().message(), tree));
      ++counts->notices;
      return Redaction::kRewritten;
    default:
      return Redaction::kCopy;
  }
}

}  // namespace

absl::StatusOr<std::string> Redact(const RedactOptions& options) {
  if (options.output.empty()) return absl::InvalidArgumentError("redact needs -o OUT.pb");
  if (absl::Status s = RefuseToReplace(options.output); !s.ok()) return s;
  Collector c;
  ReadStats stats;
  if (absl::Status s = ReadTrace(options.input, c, &stats); !s.ok()) return s;
  std::vector<std::string> python_files;
  for (const auto& [id, value] : c.strings) {
    if (c.python_file_ids.contains(id)) python_files.push_back(value);
  }
  const ProgramTree tree = FindProgramTree(c.header.executable, c.header.argv, python_files);

  Counts counts;
  pb::Packet packet;
  std::string rewritten;
  const auto copy = [&](uint32_t field, absl::string_view bytes, TraceFileWriter& out) {
    switch (Rewrite(field, bytes, tree, c.file_ids, &packet, &counts)) {
      case Redaction::kCopy:
        break;
      case Redaction::kRewritten:
        packet.SerializeToString(&rewritten);
        bytes = rewritten;
        break;
      case Redaction::kDrop:
        return absl::OkStatus();
    }
    return out.Write(bytes);
  };
  const auto nothing_more = [](TraceFileWriter&) { return absl::OkStatus(); };
  if (absl::Status s = CopyTrace(options.input, options.output, copy, nothing_more); !s.ok()) return s;
  return absl::StrCat("wrote ", options.output, ": host name removed; argv now: ",
                      absl::StrJoin(RedactArgv(c.header.argv, tree), " "), "\nprogram tree: ",
                      tree.dir.empty() ? "unknown (every absolute path reduced)" : tree.dir,
                      " (paths inside it are now relative to it)\nreduced: ", counts.modules, " module paths, ",
                      counts.files, " source and Python file names, ", counts.notices, " notices\n",
                      counts.dropped == 0 ? "" : absl::StrCat("left out: ", counts.dropped,
                                                              " damaged packets that may hold private data\n"));
}

}  // namespace cumemtrace::analyzer
