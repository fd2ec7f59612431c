// Command-line parsing for cumem-analyze. Pure: it must never touch files or print.
#include "analyzer/command_line.h"

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "analyzer/byte_size.h"
#include "analyzer/reports/check.h"

namespace cumemtrace::analyzer {
namespace {

struct Subcommand {
  const char* name;
  Command command;
};

constexpr Subcommand kSubcommands[] = {
    {"summary", Command::kSummary}, {"peak", Command::kPeak}, {"leaks", Command::kLeaks},
    {"pinned", Command::kPinned},   {"oom", Command::kOom},   {"events", Command::kEvents},
    {"ranks", Command::kRanks},     {"symbolize", Command::kSymbolize}, {"redact", Command::kRedact},
    {"check", Command::kCheck},     {"diff", Command::kDiff},   {"folded", Command::kFolded},
    {"html", Command::kHtml},       {"pprof", Command::kPprof}, {"perfetto", Command::kPerfetto},
    {"torch-snapshot", Command::kTorchSnapshot},
};

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
absl::Status ParseScopeFlag(absl::string_view name, absl::string_view value, CheckBounds* b) {
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

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  std::vector<std::string> positional;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      cl.command = Command::kHelp;
      return cl;
    }
    if (arg == "--version") {
      cl.command = Command::kVersion;
      return cl;
    }
    if (arg == "--json") {
      cl.json = true;
      continue;
    }
    // --top N, --top=N, --frames N, --frames=N
    absl::string_view name = arg;
    absl::string_view value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != absl::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name == "-o" || name == "--output" || name == "--debug-dir") {
      if (!has_value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(name, " needs a path"));
        value = args[++i];
      }
      if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(name, " needs a path"));
      if (name == "--debug-dir") {
        cl.debug_dirs.emplace_back(value);
      } else {
        cl.output = std::string(value);
      }
      continue;
    }
    if (name == "--group-by") {
      if (!has_value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError("--group-by needs user, stack, python or frame=REGEX");
        value = args[++i];
      }
      if (absl::Status s = ParseGroupBy(value, &cl.grouping); !s.ok()) return s;
      continue;
    }
    if (name == "--top" || name == "--frames") {
      if (!has_value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(name, " needs a number"));
        value = args[++i];
      }
      if (name == "--top") {
        if (absl::Status s = ParseCount(name, value, kMaxTop, &cl.top); !s.ok()) return s;
        cl.top_given = true;
      } else {
        size_t frames = 0;
        if (absl::Status s = ParseCount(name, value, kMaxFrames, &frames); !s.ok()) return s;
        cl.frames = frames;
      }
      continue;
    }
    if (name == "--phase" || name == "--window") {
      if (!has_value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
        value = args[++i];
      }
      if (absl::Status s = ParsePhaseFlag(name, value, &cl.phase_filter); !s.ok()) return s;
      continue;
    }
    if (name == "--no-oom") {
      cl.bounds.no_oom = true;
      continue;
    }
    if (name == "--leaks") {
      cl.leaks = true;
      continue;
    }
    if (name == "--max-peak" || name == "--max-leak" || name == "--device" || name == "--kind") {
      if (!has_value) {
        if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
        value = args[++i];
      }
      if (absl::Status s = ParseScopeFlag(name, value, &cl.bounds); !s.ok()) return s;
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown option ", arg));
  }

  // A first positional that names a subcommand is one (a trace file called "peak" is "./peak").
  size_t next = 0;
  if (!positional.empty()) {
    for (const Subcommand& s : kSubcommands) {
      if (positional[0] == s.name) {
        cl.command = s.command;
        cl.command_name = s.name;
        next = 1;
        break;
      }
    }
  }
  if (cl.command == Command::kRanks) {
    if (positional.size() == next) return absl::InvalidArgumentError("missing the trace files after 'ranks'");
    cl.traces.assign(positional.begin() + static_cast<std::ptrdiff_t>(next), positional.end());
    cl.trace = cl.traces.front();
    return cl;
  }
  if (cl.command == Command::kDiff) {
    if (positional.size() != next + 2) return absl::InvalidArgumentError("diff takes two traces: diff A.pb B.pb");
    cl.trace = positional[next];
    cl.second_trace = positional[next + 1];
    return cl;
  }
  if (positional.size() > next + 1) {
    if (next == 0) {
      return absl::InvalidArgumentError(absl::StrCat("unknown subcommand '", positional[0],
                                                     "' (one of: summary, peak, leaks, pinned, oom, events, "
                                                     "ranks, symbolize, redact, check, diff, folded, html, pprof, "
                                                     "perfetto, torch-snapshot)"));
    }
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", positional[next + 1], "'"));
  }
  if (positional.size() == next) {
    if (next == 0) return absl::InvalidArgumentError("missing the trace file");
    return absl::InvalidArgumentError(absl::StrCat("missing the trace file after '", positional[0], "'"));
  }
  cl.trace = positional[next];
  const bool writes_trace = cl.command == Command::kSymbolize || cl.command == Command::kRedact;
  const bool writes_file = cl.command == Command::kHtml || cl.command == Command::kPprof ||
                           cl.command == Command::kPerfetto || cl.command == Command::kFolded ||
                           cl.command == Command::kTorchSnapshot;
  if (!cl.output.empty() && !writes_trace && !writes_file) {
    return absl::InvalidArgumentError("-o is for symbolize, redact and the exports (reports go to stdout)");
  }
  if (cl.output.empty() && writes_file && cl.command != Command::kFolded) {
    return absl::InvalidArgumentError(absl::StrCat(cl.command_name, " needs -o OUT"));
  }
  if (cl.command == Command::kCheck && !cl.bounds.any()) {
    return absl::InvalidArgumentError("check needs at least one of --max-peak SIZE, --max-leak SIZE, --no-oom");
  }
  const bool scoped = cl.command == Command::kCheck || cl.command == Command::kFolded || cl.command == Command::kPprof;
  if ((cl.command != Command::kCheck && cl.bounds.any()) ||
      (!scoped && (cl.bounds.device.has_value() || cl.bounds.series.has_value()))) {
    return absl::InvalidArgumentError(
        "--max-peak, --max-leak and --no-oom are for check; --device and --kind for check, folded and pprof");
  }
  if (cl.leaks && cl.command != Command::kFolded && cl.command != Command::kPprof) {
    return absl::InvalidArgumentError("--leaks is for folded and pprof");
  }
  if (!cl.debug_dirs.empty() && cl.command != Command::kSymbolize) {
    return absl::InvalidArgumentError("--debug-dir is for symbolize");
  }
  if (cl.command == Command::kRedact && cl.output.empty()) {
    return absl::InvalidArgumentError("redact needs -o OUT.pb");
  }
  return cl;
}

std::string UsageText() {
  return R"(usage: cumem-analyze [subcommand] TRACE.pb [--json] [--top N] [--frames N] [--group-by HOW]
       cumem-analyze symbolize TRACE.pb [-o OUT.pb] [--debug-dir DIR]...
       cumem-analyze redact TRACE.pb -o OUT.pb
       cumem-analyze ranks TRACE.pb TRACE.pb... [--json]
       cumem-analyze check TRACE.pb [--max-peak SIZE] [--max-leak SIZE] [--no-oom] [--device N] [--kind K]
       cumem-analyze diff A.pb B.pb [--json] [--top N] [--group-by HOW]
       cumem-analyze folded|pprof TRACE.pb [-o OUT] [--leaks] [--device N|host] [--kind K]
       cumem-analyze perfetto|html TRACE.pb -o OUT
       cumem-analyze torch-snapshot TRACE.pb -o OUT.pickle [--json]

Reads a cumemtrace trace and says what held CUDA memory, when, and who allocated it.

subcommands:
  summary   (the default) process, devices, each device's and kind's peak with what was live then
            grouped by stack, leaks, failed allocations, pinned host memory spikes, tool health
  peak      the peaks, with more stacks and frames
  leaks     allocations still live at the end of the trace, by device, kind and group, with growth
  pinned    pinned host memory over time: peak, the windows where it rose most, and who caused them
  oom       every failed allocation: request, driver error, free memory, what was live then, who asked
  events    every event in sequence order (for debugging)
  ranks     the traces of the ranks of one job side by side: each device's peak, who held it, leaks,
            failed allocations, and the spread of device peaks across ranks
  symbolize writes a copy with names, files and lines from the binaries for pcs that lack them (a process
            that died before writing its symbols); modules are found by path when the build id matches, else
            as DIR/.build-id/xx/rest.debug or DIR/<file name> of each --debug-dir; default OUT: TRACE with
            .symbolized.pb
  check     a CI gate: exit 1 with a one-line reason when the peak (the device total, or --kind K: total,
            device, managed, pool, vmm_physical, pinned_host, registered_host) is over --max-peak, more than
            --max-leak is live at the end, or (--no-oom) an allocation failed; --device N (or host) scopes it;
            sizes as 8GiB, 512MiB, 1.5G, 2GB, 1000000; exit 0 within bounds, 2 bad usage or unreadable trace
  diff      two traces compared: peaks, live at the end, and the groups live at each peak and at the end
            matched by function, file and line (never addresses), largest growth or shrink first
  folded    stacks live at each peak (--leaks: at the end) as `root;...;leaf bytes` for flamegraph.pl,
            inferno or speedscope (stdout, or -o OUT)
  pprof     the same as a gzipped pprof profile (go tool pprof, speedscope): inuse_space/inuse_objects at
            the peak (or the end with --leaks) and alloc_space/alloc_objects over the whole trace
  perfetto  memory over time as a Perfetto trace (ui.perfetto.dev): a counter track per device and kind,
            an instant event per failed allocation
  html      one self-contained HTML page (no network): memory over time by owner, the peak and failed
            allocations marked, what was live at a selected moment as a flamegraph and a table, leaks,
            pinned spikes, owners, the driver's view and the tool's health
  torch-snapshot
            PyTorch's memory snapshot (the dictionary torch.cuda.memory._snapshot() returns) rebuilt from
            the trace's caching-allocator events, as a pickle for pytorch.org/memory_viz and
            python -m torch.cuda._memory_viz (--json: the same dictionary as JSON)
  redact    writes a copy to share: no host name, argv reduced to the program and its arguments, paths outside
            the program's own directory reduced to their name (or what follows site-packages/)

options:
  --json       one JSON object on stdout (docs/json.md describes it, schema_version 2)
  --top N      stack groups and entries per list (default 10)
  --frames N   frames per stack (default: a few in text, all in JSON)
  -o OUT.pb    symbolize, redact: the new trace (never replaces an existing file)
  --debug-dir DIR  symbolize: a folder of binaries or debug files (repeatable)
  --group-by HOW
               how stacks are grouped: user (the default) by their innermost frame of your own code
               (Python outside site-packages and the standard library, or your program's own native
               code); stack, one group per stack (stack ids stay stable: use it in scripts that
               resolve them); python, by the innermost Python frame, in or out of site-packages
               (a Trainer.train() run splits into attention, MLP, optimizer, ...); frame=REGEX, by
               the innermost frame whose function or file matches REGEX. A stack without such a frame is grouped by its innermost frame outside the CUDA
               runtime and libc, marked "no user frame".
  --phase NAME every report inside the NVTX range NAME only (torch.cuda.nvtx.range_push, nvtxRangePush...):
               peaks reached while it was open (counting what was live when it opened), failed allocations
               and leaks made inside it
  --window START_MS:END_MS
               the same for a time window, in ms after the trace's start (for programs without NVTX)
  --help       this text
  --version    the version, and the trace format versions it reads

exit status: 0 done (warnings about a cut-off trace go to stderr), 1 the trace could not be read,
2 bad usage. check: 0 within bounds, 1 a bound broken, 2 bad usage or a trace that could not be read.
)";
}

}  // namespace cumemtrace::analyzer
