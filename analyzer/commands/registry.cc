// The subcommand table and the --help text made from it.
#include "analyzer/commands/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace cumemtrace::analyzer {

// Defined each in its own file of this folder.
extern const CommandSpec kSummaryCommand;
extern const CommandSpec kPeakCommand;
extern const CommandSpec kLeaksCommand;
extern const CommandSpec kPinnedCommand;
extern const CommandSpec kOomCommand;
extern const CommandSpec kEventsCommand;
extern const CommandSpec kRanksCommand;
extern const CommandSpec kSymbolizeCommand;
extern const CommandSpec kRedactCommand;
extern const CommandSpec kCheckCommand;
extern const CommandSpec kDiffCommand;
extern const CommandSpec kFoldedCommand;
extern const CommandSpec kHtmlCommand;
extern const CommandSpec kPprofCommand;
extern const CommandSpec kPerfettoCommand;
extern const CommandSpec kTorchSnapshotCommand;
extern const CommandSpec kWhatIfCommand;

namespace {

// Indents every line of `text` by `indent` spaces.
std::string Indented(const std::string& text, int indent) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  return absl::StrCat(pad, absl::StrReplaceAll(text, {{"\n", "\n" + pad}}), "\n");
}

// The commands that take `flag`, as "peak, leaks and oom".
std::string TakenBy(Flag flag) {
  std::vector<std::string> names;
  for (const CommandSpec* c : Commands()) {
    if ((c->flags & flag) != 0) names.emplace_back(c->name);
  }
  if (names.size() == Commands().size()) return "every command";
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : (i + 1 == names.size() ? " and " : ", "), names[i]);
  }
  return out;
}

constexpr char kExitStatusHelp[] =
    "exit status (every command): 0 done (warnings about a cut-off or damaged trace go to stderr);\n"
    "1 a finding: check found a bound broken; 2 bad usage, a trace that could not be read or an output\n"
    "that could not be written (one line on stderr says which, and nothing is written to stdout or -o).\n";

}  // namespace

const std::vector<const CommandSpec*>& Commands() {
  static const std::vector<const CommandSpec*> kCommands = {
      &kSummaryCommand, &kPeakCommand,   &kLeaksCommand,    &kPinnedCommand, &kOomCommand,
      &kWhatIfCommand,  &kEventsCommand,  &kRanksCommand,  &kSymbolizeCommand, &kRedactCommand, &kCheckCommand,
      &kDiffCommand,    &kFoldedCommand, &kHtmlCommand,     &kPprofCommand,  &kPerfettoCommand,
      &kTorchSnapshotCommand,
  };
  return kCommands;
}

const CommandSpec* FindCommand(std::string_view name) {
  for (const CommandSpec* c : Commands()) {
    if (name == c->name) return c;
  }
  return nullptr;
}

const CommandSpec* DefaultCommand() { return &kSummaryCommand; }

std::string ToolHelp() {
  std::string out =
      "usage: cumem-analyze [subcommand] TRACE.pb [options]   (the subcommand defaults to summary)\n"
      "       cumem-analyze SUBCOMMAND --help                  (its options in full)\n"
      "\n"
      "Reads a cumemtrace trace and says what held CUDA memory, when, and who allocated it.\n"
      "\n"
      "subcommands:\n";
  for (const CommandSpec* c : Commands()) {
    absl::StrAppend(&out, "  ", c->name, " ", c->synopsis, "\n", Indented(c->help, 6));
  }
  absl::StrAppend(&out, "\noptions:\n");
  for (const FlagHelp& f : FlagHelps()) {
    absl::StrAppend(&out, "  ", f.names, "   (", TakenBy(f.flag), ")\n", Indented(f.help, 6));
  }
  absl::StrAppend(&out, "  --help   this text; after a subcommand, that subcommand's\n",
                  "  --version   the version, and the trace format versions it reads\n\n", kExitStatusHelp);
  return out;
}

std::string CommandHelp(const CommandSpec& command) {
  std::string out = absl::StrCat("usage: cumem-analyze ", command.name, " ", command.synopsis, "\n\n",
                                 Indented(command.help, 2));
  bool any = false;
  for (const FlagHelp& f : FlagHelps()) {
    if ((command.flags & f.flag) == 0) continue;
    if (!any) absl::StrAppend(&out, "\noptions:\n");
    any = true;
    absl::StrAppend(&out, "  ", f.names, "\n", Indented(f.help, 6));
  }
  absl::StrAppend(&out, "\n", kExitStatusHelp);
  return out;
}

}  // namespace cumemtrace::analyzer
