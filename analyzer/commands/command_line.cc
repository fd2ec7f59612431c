// Command-line parsing for cumem-analyze. Pure: it must never touch files or print.
#include "analyzer/commands/command_line.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "analyzer/byte_size.h"
#include "analyzer/commands/command.h"
#include "analyzer/commands/console.h"
#include "analyzer/commands/registry.h"
#include "analyzer/reports/check.h"

namespace cumemtrace::analyzer {
namespace {

absl::Status ParseCount(absl::string_view flag, absl::string_view value, size_t max, size_t* out) {
  uint64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " takes a number from 0 to ", max, ", not '", value, "'"));
  }
  *out = static_cast<size_t>(n);
  return absl::OkStatus();
}

// --phase NAME, --window START_MS:END_MS (one of them, once).
absl::Status ParsePhaseFlag(absl::string_view name, absl::string_view value, PhaseFilter* filter) {
  if (filter->active()) return absl::InvalidArgumentError("give one --phase or --window");
  if (name == "--phase") {
    if (value.empty()) return absl::InvalidArgumentError("--phase needs the name of an NVTX range");
    filter->phase = std::string(value);
    return absl::OkStatus();
  }
  const size_t colon = value.find(':');
  int64_t start = 0, end = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(value.substr(0, colon), &start) ||
      !absl::SimpleAtoi(value.substr(colon + 1), &end) || start < 0 || end <= start) {
    return absl::InvalidArgumentError(
        absl::StrCat("--window takes START_MS:END_MS (ms after the trace's start, START < END), not '", value, "'"));
  }
  filter->has_window = true;
  filter->window_start_ms = start;
  filter->window_end_ms = end;
  return absl::OkStatus();
}

absl::Status ParseGroupBy(absl::string_view value, GroupingOptions* out) {
  if (value == "user") {
    *out = GroupingOptions{GroupBy::kUser, ""};
  } else if (value == "stack") {
    *out = GroupingOptions{GroupBy::kStack, ""};
  } else if (value == "python") {
    *out = GroupingOptions{GroupBy::kPython, ""};
  } else if (absl::StartsWith(value, "frame=")) {
    GroupingOptions g{GroupBy::kFrame, std::string(value.substr(6))};
    if (absl::Status s = CheckFrameRegex(g.frame_regex); !s.ok()) return s;
    *out = std::move(g);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--group-by takes user, stack, python or frame=REGEX, not '", value, "'"));
  }
  return absl::OkStatus();
}

// check's bounds and the --device/--kind scope that check and the exports share.
absl::Status ParseBoundOrScope(absl::string_view name, absl::string_view value, CheckBounds* b) {
  if (name == "--device") {
    int32_t device = 0;
    if (value == "host") {
      device = -1;
    } else if (!absl::SimpleAtoi(value, &device) || device < -1) {
      return absl::InvalidArgumentError(absl::StrCat("--device takes a device ordinal or host, not '", value, "'"));
    }
    b->device = device;
    return absl::OkStatus();
  }
  if (name == "--kind") {
    std::optional<int> series = SeriesByName(std::string(value));
    if (!series.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kind takes total, device, managed, pool, vmm_physical, pinned_host or registered_host, "
                       "not '", value, "'"));
    }
    b->series = series;
    return absl::OkStatus();
  }
  uint64_t bytes = 0;
  if (absl::Status s = ParseByteSize(name, value, &bytes); !s.ok()) return s;
  (name == "--max-peak" ? b->max_peak : b->max_leak) = bytes;
  return absl::OkStatus();
}

// A flag that takes a value: its bit and what the error says when the value is missing.
struct ValueFlag {
  const char* name;
  Flag flag;
  const char* missing;
};

constexpr ValueFlag kValueFlags[] = {
    {"-o", kFlagOutput, "-o needs a path"},
    {"--output", kFlagOutput, "--output needs a path"},
    {"--debug-dir", kFlagDebugDir, "--debug-dir needs a path"},
    {"--group-by", kFlagGroupBy, "--group-by needs user, stack, python or frame=REGEX"},
    {"--top", kFlagTop, "--top needs a number"},
    {"--frames", kFlagFrames, "--frames needs a number"},
    {"--phase", kFlagPhase, "--phase needs a value"},
    {"--window", kFlagPhase, "--window needs a value"},
    {"--max-peak", kFlagBounds, "--max-peak needs a value"},
    {"--max-leak", kFlagBounds, "--max-leak needs a value"},
    {"--device", kFlagScope, "--device needs a value"},
    {"--kind", kFlagScope, "--kind needs a value"},
    {"--set", kFlagWhatIf, "--set needs KEY:VALUE (a PYTORCH_CUDA_ALLOC_CONF setting)"},
    {"--capacity", kFlagWhatIf, "--capacity needs a size"},
};

// Stores one flag's value in `cl`.
absl::Status SetValue(absl::string_view name, absl::string_view value, CommandLine* cl) {
  if (name == "-o" || name == "--output" || name == "--debug-dir") {
    if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(name, " needs a path"));
    if (name == "--debug-dir") {
      cl->debug_dirs.emplace_back(value);
    } else {
      cl->output = std::string(value);
    }
    return absl::OkStatus();
  }
  if (name == "--group-by") return ParseGroupBy(value, &cl->grouping);
  if (name == "--top") {
    cl->top_given = true;
    return ParseCount(name, value, kMaxTop, &cl->top);
  }
  if (name == "--frames") {
    size_t frames = 0;
    if (absl::Status s = ParseCount(name, value, kMaxFrames, &frames); !s.ok()) return s;
    cl->frames = frames;
    return absl::OkStatus();
  }
  if (name == "--phase" || name == "--window") return ParsePhaseFlag(name, value, &cl->phase_filter);
  if (name == "--set") {
    if (value.find(':') == absl::string_view::npos || value.front() == ':' || value.back() == ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("--set takes KEY:VALUE, a PYTORCH_CUDA_ALLOC_CONF setting such as max_split_size_mb:512, "
                       "not '", value, "'"));
    }
    cl->settings.emplace_back(value);
    return absl::OkStatus();
  }
  if (name == "--capacity") {
    uint64_t bytes = 0;
    if (absl::Status s = ParseByteSize(name, value, &bytes); !s.ok()) return s;
    if (bytes == 0) return absl::InvalidArgumentError("--capacity takes the memory of a card, more than 0 bytes");
    cl->capacity = bytes;
    return absl::OkStatus();
  }
  return ParseBoundOrScope(name, value, &cl->bounds);
}

// The flags of `args` (in any position) into `cl`; the operands into `positional`. Records, per flag bit, the
// first spelling given, for the error when the command does not take it.
absl::Status ParseFlags(const std::vector<std::string>& args, CommandLine* cl, std::vector<std::string>* positional,
                        std::vector<std::pair<Flag, std::string>>* given) {
  bool flags_done = false;
  uint32_t seen = 0;  // Flag bits given so far
  auto note = [&](Flag flag, absl::string_view spelling) {
    if ((seen & flag) == 0) given->emplace_back(flag, std::string(spelling));
    seen |= flag;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      positional->push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg == "--json") {
      note(kFlagJson, arg);
      cl->json = true;
      continue;
    }
    if (arg == "--no-oom") {
      note(kFlagBounds, arg);
      cl->bounds.no_oom = true;
      continue;
    }
    if (arg == "--without-outside") {
      note(kFlagWhatIf, arg);
      cl->without_outside = true;
      continue;
    }
    if (arg == "--leaks") {
      note(kFlagLeaks, arg);
      cl->leaks = true;
      continue;
    }
    // --top N or --top=N, and so on.
    absl::string_view name = arg;
    absl::string_view value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != absl::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const ValueFlag* spec = nullptr;
    for (const ValueFlag& f : kValueFlags) {
      if (name == f.name) spec = &f;
    }
    if (spec == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown option ", arg));
    if (!has_value) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(spec->missing);
      value = args[++i];
    }
    note(spec->flag, name);
    if (absl::Status s = SetValue(name, value, cl); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

// The command named by the first argument that is not a flag, if it names one.
const CommandSpec* NamedCommand(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg.size() >= 2 && arg[0] == '-') continue;
    return FindCommand(arg);
  }
  return nullptr;
}

std::string CommandNames() {
  std::vector<std::string> names;
  for (const CommandSpec* c : Commands()) names.emplace_back(c->name);
  return absl::StrJoin(names, ", ");
}

absl::Status CheckOperands(const CommandSpec& command, const std::vector<std::string>& positional, size_t next,
                           CommandLine* cl) {
  const size_t n = positional.size() - next;
  switch (command.operands) {
    case Operands::kManyTraces:
      if (n == 0) return absl::InvalidArgumentError(absl::StrCat("missing the trace files after '", command.name, "'"));
      break;
    case Operands::kTwoTraces:
      if (n != 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(command.name, " takes two traces: ", command.name, " A.pb B.pb"));
      }
      break;
    case Operands::kOneTrace:
      if (n > 1) {
        if (next == 0 && absl::EndsWith(positional[0], ".pb")) {
          // `cumem-analyze run.*.pb` with the traces of several processes.
          return absl::InvalidArgumentError(absl::StrCat(
              "one trace at a time, not ", n, " (the traces of a job's ranks side by side: ", kToolName,
              " ranks A.pb B.pb ...)"));
        }
        if (next == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("unknown subcommand '", positional[0], "' (one of: ", CommandNames(), ")"));
        }
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", positional[next + 1], "'"));
      }
      if (n == 0) {
        if (next == 0) return absl::InvalidArgumentError("missing the trace file");
        return absl::InvalidArgumentError(absl::StrCat("missing the trace file after '", positional[0], "'"));
      }
      break;
  }
  cl->traces.assign(positional.begin() + static_cast<std::ptrdiff_t>(next), positional.end());
  cl->trace = cl->traces[0];
  if (cl->traces.size() > 1) cl->second_trace = cl->traces[1];
  return absl::OkStatus();
}

}  // namespace

const std::vector<FlagHelp>& FlagHelps() {
  static const std::vector<FlagHelp> kHelps = {
      {kFlagJson, "--json", "one JSON object on stdout (docs/json.md describes it)"},
      {kFlagTop, "--top N", "stack groups and entries per list (default 10)"},
      {kFlagFrames, "--frames N", "frames per stack (default: a few in text, all in JSON)"},
      {kFlagGroupBy, "--group-by HOW",
       "how stacks are grouped: user (the default) by their innermost frame of your own code (Python outside\n"
       "site-packages and the standard library, or your program's own native code); stack, one group per stack\n"
       "(stack ids stay stable: use it in scripts that resolve them); python, by the innermost Python frame, in\n"
       "or out of site-packages (a Trainer.train() run splits into attention, MLP, optimizer, ...); frame=REGEX,\n"
       "by the innermost frame whose function or file matches REGEX. A stack without such a frame is grouped by\n"
       "its innermost frame outside the CUDA runtime and libc, marked \"no user frame\"."},
      {kFlagPhase, "--phase NAME | --window START_MS:END_MS",
       "only inside the NVTX range NAME (torch.cuda.nvtx.range_push, nvtxRangePush...), or the time window in\n"
       "ms after the trace's start (for programs without NVTX): peaks reached while it was open (counting what\n"
       "was live when it opened), failed allocations and leaks made inside it"},
      {kFlagOutput, "-o OUT", "the file to write (a new trace is never written over an existing file)"},
      {kFlagDebugDir, "--debug-dir DIR", "a folder of binaries or debug files (repeatable)"},
      {kFlagLeaks, "--leaks", "what was live at the end instead of what was live at the peak"},
      {kFlagBounds, "--max-peak SIZE | --max-leak SIZE | --no-oom",
       "the bounds: the peak (the device total, or --kind K) over SIZE, more than SIZE live at the end, any\n"
       "failed allocation; sizes as 8GiB, 512MiB, 1.5G, 2GB, 1000000"},
      {kFlagScope, "--device N|host | --kind K",
       "only this device, and only this kind: total, device, managed, pool, vmm_physical, pinned_host,\n"
       "registered_host"},
      {kFlagWhatIf, "--set KEY:VALUE | --capacity SIZE | --without-outside",
       "replay under a PYTORCH_CUDA_ALLOC_CONF setting (repeatable; over the recorded ones), on a card of\n"
       "SIZE (8GiB, 24GB...), or with nothing outside PyTorch on the device (no other process, none of this\n"
       "process's other memory); combinable"},
  };
  return kHelps;
}

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  if (WantsHelp(args)) {
    cl.help = true;
    cl.command = NamedCommand(args);
    return cl;
  }
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "--version") {
      cl.version = true;
      return cl;
    }
  }
  std::vector<std::string> positional;
  std::vector<std::pair<Flag, std::string>> given;
  if (absl::Status s = ParseFlags(args, &cl, &positional, &given); !s.ok()) return s;

  // A first operand that names a subcommand is one (a trace file called "peak" is "./peak").
  size_t next = 0;
  cl.command = positional.empty() ? nullptr : FindCommand(positional[0]);
  if (cl.command != nullptr) {
    next = 1;
  } else {
    cl.command = DefaultCommand();
  }
  const CommandSpec& command = *cl.command;
  if (absl::Status s = CheckOperands(command, positional, next, &cl); !s.ok()) return s;
  for (const auto& [flag, spelling] : given) {
    if ((command.flags & flag) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(spelling, " is not an option of ", command.name,
                                                     " (its options: ", kToolName, " ", command.name, " --help)"));
    }
  }
  if (command.output == OutputFile::kRequired && cl.output.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(command.name, " needs -o OUT"));
  }
  if ((command.flags & kFlagBounds) != 0 && !cl.bounds.any()) {
    return absl::InvalidArgumentError(
        absl::StrCat(command.name, " needs at least one of --max-peak SIZE, --max-leak SIZE, --no-oom"));
  }
  return cl;
}

}  // namespace cumemtrace::analyzer
