#!/usr/bin/env python3
"""What tracing PyTorch's tensors costs a training step, side by side with PyTorch's own memory history, on the GPU
machine (issue 8's benchmark; results go to docs/performance.md).

Runs tests/gpu/workloads/gpt2_overhead.py (GPT-2 built from a config, AdamW) once per mode below, all processes at
once, each as a server that runs steps on request; the driver then gives every mode a turn of --steps steps, turn
after turn in a rotating order, so that the machine's drift (step times on the shared GPU machine varied widely
between one-mode-per-process runs minutes apart) falls on every mode alike; short turns (a few steps) pair the
modes closely in time, but each process then waits for all the others between its turns and starts every turn with
cold caches, which costs a tracer's tables more than a run that never pauses would (in turns of 3 steps the preload
took 965 ns per row, in turns of 30 steps 575: docs/performance.md, "A step bound by the CPU"). The first turn is a
warm-up. With --cpus every process is pinned to the same CPUs (only one
runs at a time), so that no mode gains or loses by the cores the scheduler happens to give it. Reported: the median
ms per step over all counted steps, the ratio to untraced turn by turn (median, min-max), and each traced mode's
overhead as a fraction of the history's from the turns' paired differences, with a bootstrap interval. Identical
processes differ by ~3 % of the step for their whole life (docs/performance.md's A/A test: neither their hash seed
nor their layout is the cause), so the interval narrows only with more processes: --waves runs groups of --replicas
processes per mode one after another, and the bootstrap resamples processes within their wave (docs/performance.md:
88 processes per mode put the ratio's interval at 0.35-0.50).

  plain      untraced
  history    torch.cuda.memory._record_memory_history(stacks="python")
  cumem      LD_PRELOAD=libcumemtrace.so: block events with native + Python stacks (the default settings)
  ...        the cumem variants named with --variants (see VARIANTS): other stack depths, no Python frames, no stacks,
             or another build of the preload, to say where cumemtrace's time goes

in two model configurations: "issue" (6 layers x 512, batch 16 x 256: the step issue 8 names, bound by the GPU, so
host-side costs mostly hide behind it) and "cpu" (6 layers x 128, batch 2 x 64: the same allocations per step but
tiny kernels, so the step is bound by the CPU and every host-side microsecond shows). For traced runs it also reads
the trace's trailer: ns per trace row spent in the preload (recorder_time_ns / events) and its parts (what the call
is, reading Python frames, unwinding, waiting for the lock, composing the stack, appending the row), the writer's time
apart, rows, allocator entries and file bytes per allocator entry.

Usage (on the GPU machine, from the repository root, the bundle from scripts/gpu-bundle.sh carried):
  python3 bench/torch_overhead.py --build gpu-build --out DIR [--turns 30] [--steps 10] [--configs issue,cpu]
      [--variants depth16,nopython,nostacks,old] [--old-preload PATH] [--replicas 4] [--waves 4] [--cpus 2-5]
      [--slow-disk-ms 50]   (every write(2) of a trace delayed: the writer shim from the bundle's fakes/)
Writes DIR/torch_overhead.json (every mode) and DIR/torch_overhead.md (the tables, with each traced mode's overhead
as a fraction of the history's and its bootstrap interval over turns).
  python3 bench/torch_overhead.py --table-from DIR/torch_overhead.json   (the tables again, anywhere)
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOAD = os.path.join(ROOT, "tests", "gpu", "workloads", "gpt2_overhead.py")
CONFIGS = {
    "issue": ["--layers", "6", "--embd", "512", "--batch", "16", "--seq", "256"],
    "cpu": ["--layers", "6", "--embd", "128", "--batch", "2", "--seq", "64"],
}
# cumemtrace variants: extra environment for the preload ("old": --old-preload, another build, its defaults).
VARIANTS = {
    "depth16": {"CUMEMTRACE_TORCH_STACK_DEPTH": "16"},  # the default, named against an --old-preload that had 32
    "torchdepth32": {"CUMEMTRACE_TORCH_STACK_DEPTH": "32"},
    "torchdepth64": {"CUMEMTRACE_TORCH_STACK_DEPTH": "64"},
    "nopython": {"CUMEMTRACE_PYTHON": "0"},
    "nostacks": {"CUMEMTRACE_STACK_DEPTH": "0"},
    "nosamples": {"CUMEMTRACE_SAMPLE_MS": "0"},  # no driver memory samples (cuMemGetInfo every 100 ms by default)
    # Native frames of threads without Python frames (the autograd engine's) cut to 16, as before they got 64.
    "enginedepth16": {"CUMEMTRACE_STACK_DEPTH": "16"},
    "old": {},  # --old-preload: another build of the preload, default settings
}
# The trailer's recorder_<part>_ns, in the order an event goes through them (prologue and append: 0 before 2026-11-28)
RECORDER_PARTS = ("prologue", "python", "unwind", "lock_wait", "stack", "append")


def cpu_list(text):
    """'2-5,8' -> {2, 3, 4, 5, 8}"""
    cpus = set()
    for item in filter(None, text.split(",")):
        first, _, last = item.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def start(mode, replica, config, args, work, preload_for, wave=0):
    """Starts one process of a mode as a server (it warms up, then runs steps on request)."""
    folder = os.path.join(work, f"{config}-{mode}-{replica}")
    os.makedirs(folder, exist_ok=True)
    truth = os.path.join(folder, "truth.json")
    trace = os.path.join(folder, "trace.pb")
    for path in (truth, trace):
        if os.path.exists(path):
            os.remove(path)
    env = dict(os.environ)
    cmd = [sys.executable, WORKLOAD, truth, "--serve"] + CONFIGS[config]
    if mode == "history":
        cmd.append("--history")
    preload = preload_for(mode)
    if preload:
        if args.slow_disk_ms > 0:  # the shim first: its write() is the one the preload calls
            preload = f"{os.path.abspath(args.slow_write_lib)}:{preload}"
            env["SLOW_WRITE_MS"] = str(args.slow_disk_ms)
        env.update({"LD_PRELOAD": preload, "CUMEMTRACE_OUTPUT": trace})
        env.update(VARIANTS.get(mode, {}))
    if args.hash_seed is not None:
        env["PYTHONHASHSEED"] = str(args.hash_seed)

    def before_exec():
        if args.cpus:
            os.sched_setaffinity(0, args.cpus)
        if args.no_aslr:  # personality(ADDR_NO_RANDOMIZE): every process of a mode gets the same layout
            import ctypes
            ctypes.CDLL(None, use_errno=True).personality(0x0040000)
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=before_exec,
                            stderr=open(os.path.join(folder, "stderr.txt"), "w"), text=True)
    return {"mode": mode, "replica": replica, "wave": wave, "config": config, "proc": proc, "truth": truth,
            "trace": trace if preload else None,
            "times": [], "round_medians": [], "round_cpu_medians": [], "ok": True}


def ask(w, line):
    """Sends one request line; returns the reply line ('' when the process died)."""
    if not w["ok"]:
        return ""
    try:
        w["proc"].stdin.write(line + "\n")
        w["proc"].stdin.flush()
        reply = w["proc"].stdout.readline()
    except (BrokenPipeError, OSError):
        reply = ""
    if not reply:
        w["ok"] = False
    return reply


def finish(w, args):
    """Ends the server and reads its truth and, for traced modes, the trailer of its trace."""
    ask(w, "end")
    try:
        w["proc"].wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        w["proc"].kill()
    result = {"mode": w["mode"], "replica": w["replica"], "wave": w["wave"], "config": w["config"],
              "exit": w["proc"].returncode,
              "steps": len(w["times"]), "round_medians_ms": w["round_medians"],
              "round_cpu_medians_ms": w["round_cpu_medians"]}
    if w["times"]:
        result["median_ms"] = statistics.median(w["times"])
        result["times_ms"] = w["times"]
    if w["proc"].returncode != 0 or not os.path.exists(w["truth"]):
        return result
    with open(w["truth"]) as f:
        result["workload"] = json.load(f)  # its own "mode" says only whether PyTorch's history was on
    if w["trace"] and os.path.exists(w["trace"]):
        result["trace_bytes"] = os.path.getsize(w["trace"])
        summary = subprocess.run([args.analyzer, "summary", w["trace"], "--json"], capture_output=True, text=True)
        health = json.loads(summary.stdout).get("health", {}) if summary.returncode == 0 else {}
        rows = health.get("events") or 0
        entries = health.get("allocator_events") or 0
        result.update({
            "rows": rows, "allocator_entries": entries,
            "recorder_ns_per_row": (health.get("recorder_time_ns") or 0) / max(rows, 1),
            "recorder_parts_ns_per_row": {part: (health.get(f"recorder_{part}_ns") or 0) / max(rows, 1)
                                          for part in RECORDER_PARTS},
            # Encoding and writing the trace (added with the output queue; 0 from an older preload): off the
            # recording path unless a thread of the program had to write (stalled_seals, start, exit, a failure).
            "writer_ns_per_row": (health.get("writer_time_ns") or 0) / max(rows, 1),
            "stalled_seals": health.get("stalled_seals") or 0,
            "bytes_per_entry": result["trace_bytes"] / max(entries, 1),
            "bytes_per_row": result["trace_bytes"] / max(rows, 1),
        })
    return result


def merge_replicas(results, config):
    """The processes of each mode of `config` (its --replicas) as one: every step, the turns (each the mean of the
    processes' turn medians, so turn t still pairs the modes), the processes' own turn lists for the bootstrap, the
    processes' medians, and the trace figures' medians over the traced processes (a mean would let one process's
    total, clocked on 1 event in 16, swing the row)."""
    by_mode = {}
    for r in results:
        if r["config"] != config or r.get("exit") != 0 or "median_ms" not in r:
            continue
        by_mode.setdefault(r["mode"], []).append(r)
    merged = {}
    for mode, runs in by_mode.items():
        times = [t for r in runs for t in r.get("times_ms", [])]
        m = {"mode": mode, "replicas": len(runs), "steps": sum(r["steps"] for r in runs),
             "median_ms": statistics.median(times) if times else statistics.median(r["median_ms"] for r in runs),
             "replica_medians_ms": [r["median_ms"] for r in runs], "replica_turns": {},
             "replica_waves": [r.get("wave", 0) for r in runs], "times_by_wave": {}}
        for r in runs:
            m["times_by_wave"].setdefault(r.get("wave", 0), []).extend(r.get("times_ms", []))
        for key in ("round_medians_ms", "round_cpu_medians_ms"):
            lists = [r.get(key) or [] for r in runs]
            n = min(len(x) for x in lists)
            m["replica_turns"][key] = [x[:n] for x in lists]
            m[key] = [statistics.fmean(x[i] for x in lists) for i in range(n)]
        traced = [r for r in runs if "recorder_ns_per_row" in r]
        if traced:
            for key in ("recorder_ns_per_row", "writer_ns_per_row", "bytes_per_entry", "bytes_per_row"):
                m[key] = statistics.median(r.get(key, 0) for r in traced)
            m["stalled_seals"] = sum(r.get("stalled_seals", 0) for r in traced)
            if all("recorder_parts_ns_per_row" in r for r in traced):
                m["recorder_parts_ns_per_row"] = {
                    # .get: results written before a part existed (--table-from) count it as 0
                    part: statistics.median(r["recorder_parts_ns_per_row"].get(part, 0.0) for r in traced)
                    for part in RECORDER_PARTS}
        merged[mode] = m
    return merged


def processes_in(merged, waves):
    """Indexes of a merged mode's processes (merge_replicas) that ran in one of `waves`."""
    return [i for i, w in enumerate(merged["replica_waves"]) if w in waves]


def bootstrap_over_turns(by_mode, compared, statistic, key="round_medians_ms", resamplings=2000, seed=1):
    """A statistic of the modes `compared` over the turns, with a 95 % bootstrap interval that resamples the turns
    and, per mode, its processes (within their wave): identical untraced processes on the GPU machine differ by a few
    percent of the step for their whole life (docs/performance.md's A/A test), a bias no number of turns of one
    process averages out. statistic(value, turns): value(m, t) is mode m's step time in turn t (the mean of its
    picked processes' turn medians). key: the turns' wall times, or (round_cpu_medians_ms) the CPU time of the
    process's threads. Returns (estimate, low, high, turns, processes per mode), or None."""
    # Only the waves that ran every mode compared (a variant may have run in fewer of them): each mode then has the
    # same processes per wave, and a wave's drift cancels in the differences.
    common = set.intersection(*(set(by_mode[m]["replica_waves"]) for m in compared))
    kept = {m: processes_in(by_mode[m], common) for m in compared}
    reps = {m: [by_mode[m]["replica_turns"][key][i] for i in kept[m]] for m in compared}
    waves_of = {m: [by_mode[m]["replica_waves"][i] for i in kept[m]] for m in compared}
    if any(not runs for runs in reps.values()):
        return None
    n = min(len(x) for runs in reps.values() for x in runs)
    if n < 2:
        return None

    def estimate(turns, picks):
        def value(m, t):
            return statistics.fmean(reps[m][r][t] for r in picks[m])
        return statistic(value, turns)

    everything = {m: range(len(runs)) for m, runs in reps.items()}
    # Processes are resampled within their wave: a wave's processes ran over the same minutes, and a whole wave can
    # be slower or faster in every mode alike, so each resampling keeps every mode's count per wave.
    strata = {}
    for m in reps:
        waves = waves_of[m]
        strata[m] = [[i for i, w in enumerate(waves) if w == wave] for wave in sorted(set(waves))]
    rng = random.Random(seed)
    draws = []
    for _ in range(resamplings):
        turns = [rng.randrange(n) for _ in range(n)]
        picks = {m: [rng.choice(group) for group in groups for _ in group] for m, groups in strata.items()}
        draws.append(estimate(turns, picks))
    draws = sorted(d for d in draws if d == d)  # a resampling without a defined value (NaN) is left out
    if not draws:
        return None
    return (estimate(range(n), everything), draws[int(0.025 * len(draws))], draws[int(0.975 * len(draws)) - 1], n,
            min(len(runs) for runs in reps.values()))


def overhead_ratio_interval(by_mode, mode, key="round_medians_ms", resamplings=2000, seed=1):
    """mode's overhead / the history's, from the turns' paired differences: in each turn (the modes back to back) a
    mode's step time minus untraced's; the ratio is the median of mode's differences over the median of the
    history's (bootstrap_over_turns gives the interval)."""
    def ratio(value, turns):
        d = {m: [value(m, t) - value("plain", t) for t in turns] for m in ("history", mode)}
        history = statistics.median(d["history"])
        return statistics.median(d[mode]) / history if history > 0 else float("nan")
    return bootstrap_over_turns(by_mode, ("plain", "history", mode), ratio, key, resamplings, seed)


def difference_interval(by_mode, mode, baseline, key="round_medians_ms", resamplings=2000, seed=1):
    """mode's step time minus baseline's, as a share of the untraced step, per turn (the modes back to back), the
    median over the turns: two builds or settings of the preload compared in one run (e.g. --variants old against
    cumem), with the same bootstrap."""
    def difference(value, turns):
        return statistics.median((value(mode, t) - value(baseline, t)) / value("plain", t) for t in turns)
    return bootstrap_over_turns(by_mode, ("plain", baseline, mode), difference, key, resamplings, seed)


def table(results, configs, modes):
    lines = []
    for config in configs:
        by_mode = merge_replicas(results, config)
        if "plain" not in by_mode:
            continue
        plain = by_mode["plain"]
        lines.append(f"\n### {config}: {' '.join(CONFIGS[config])}\n")
        lines.append("| mode | ms per step (median of all steps) | steps | processes: their medians | vs untraced | "
                     "per-turn ratio to untraced (median, min-max) | preload ns per row (median of processes) | "
                     "B per allocator entry | B per row |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        overhead = {}
        for mode in modes:
            r = by_mode.get(mode)
            if r is None:
                continue
            # Against the untraced processes of the same waves (a variant may have run in fewer of them).
            waves = set(r["replica_waves"])
            plain_times = [t for w, ts in plain["times_by_wave"].items() if w in waves for t in ts]
            same = processes_in(plain, waves)
            if not plain_times or not same:
                continue
            plain_turns = plain["replica_turns"]["round_medians_ms"]
            plain_means = [statistics.fmean(plain_turns[i][t] for i in same)
                           for t in range(min(len(plain_turns[i]) for i in same))]
            overhead[mode] = r["median_ms"] / statistics.median(plain_times) - 1
            ratios = [m / p for m, p in zip(r["round_medians_ms"], plain_means)]
            spread = (f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})" if ratios else "")
            extra = (f"{r['recorder_ns_per_row']:.0f} | {r['bytes_per_entry']:.2f} | {r['bytes_per_row']:.2f}"
                     if "recorder_ns_per_row" in r else " | | ")
            processes = f"{r['replicas']}: " + ", ".join(f"{x:.2f}" for x in r["replica_medians_ms"])
            lines.append(f"| {mode} | {r['median_ms']:.2f} | {r['steps']} | {processes} | "
                         f"{100 * overhead[mode]:+.1f} % | {spread} | {extra} |")
        lines.append("")
        for mode in modes:
            r = by_mode.get(mode)
            if r is not None and r["replicas"] >= 2:
                medians = r["replica_medians_ms"]
                centre = statistics.median(medians)
                lines.append(f"- {mode}: its {r['replicas']} processes' medians spread "
                             f"{100 * (max(medians) - min(medians)) / centre:.1f} % of their median, standard "
                             f"deviation {100 * statistics.stdev(medians) / centre:.1f} %")
        if "history" in overhead and "cumem" in overhead and overhead["history"] > 0:
            lines.append(f"\ncumemtrace's overhead / history's (medians of all steps): "
                         f"{overhead['cumem'] / overhead['history']:.2f}\n")
            for mode in modes:
                if mode in ("plain", "history") or mode not in by_mode:
                    continue
                for key, what in (("round_medians_ms", "step time"), ("round_cpu_medians_ms", "CPU time")):
                    interval = overhead_ratio_interval(by_mode, mode, key)
                    if interval is not None:
                        lines.append(f"- {mode}'s overhead / history's in {what}, from the {interval[3]} turns' paired "
                                     f"differences: {interval[0]:.2f}, 95 % bootstrap interval "
                                     f"{interval[1]:.2f}-{interval[2]:.2f} (turns and, per mode, its "
                                     f"{interval[4]} processes resampled)")
            # A difference of step times as a share of the untraced step, per turn: each mode's overhead itself (the
            # issue's target is stated so), then each other build or setting against cumem.
            def share_line(what, interval):
                return (f"- {what}, per turn, as a share of the untraced step: {100 * interval[0]:+.2f} %, 95 % "
                        f"bootstrap interval {100 * interval[1]:+.2f} % to {100 * interval[2]:+.2f} % "
                        f"({interval[3]} turns, {interval[4]} processes per mode resampled)")
            for mode in modes:
                if mode == "plain" or mode not in by_mode:
                    continue
                interval = difference_interval(by_mode, mode, "plain")
                if interval is not None:
                    lines.append(share_line(f"{mode}'s overhead over untraced", interval))
            for mode in modes:
                if mode in ("plain", "history", "cumem") or mode not in by_mode:
                    continue
                interval = difference_interval(by_mode, mode, "cumem")
                if interval is not None:
                    lines.append(share_line(f"{mode} minus cumem", interval))
        parted = [m for m in modes if "recorder_parts_ns_per_row" in by_mode.get(m, {})]
        if parted:
            lines.append("\nWhere the preload's time goes, ns per trace row, medians of the processes (trailer; the "
                         "parts are estimated on other events than the total, and each holds one clock read). In "
                         "short processes read the parts and their sum: the total also holds each thread's first "
                         "events, clocked one by one with the process's one-time costs, which vary between "
                         "processes that start together:\n")
            lines.append("| mode | all | before the stack (the call, its device, a memory sample) | Python frames | "
                         "unwinding | lock wait | stack (Python ids, splicing; interning before the output queue) | "
                         "appending (number, row, sealing) | the parts' sum | rest | writer: interning, encoding, "
                         "writing (the flush thread, but for stalls; 0 before the output queue) | stalled seals (all "
                         "processes) |")
            lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
            for mode in parted:
                r = by_mode[mode]
                parts = [r["recorder_parts_ns_per_row"][part] for part in RECORDER_PARTS]
                cells = " | ".join(f"{v:.0f}" for v in parts)
                lines.append(f"| {mode} | {r['recorder_ns_per_row']:.0f} | {cells} | {sum(parts):.0f} | "
                             f"{r['recorder_ns_per_row'] - sum(parts):.0f} | {r.get('writer_ns_per_row', 0):.0f} | "
                             f"{r.get('stalled_seals', 0)} |")
    return "\n".join(lines) + "\n"


def run_wave(config, wave, modes, args, work, preload_for):
    """One wave: --replicas processes per mode, started together, given their turns, ended; returns their
    results. Waves run one after another, so that more processes than the machine holds at once can be counted."""
    workers = [start(mode, wave * args.replicas + replica, config, args, work, preload_for, wave)
               for replica in range(args.replicas) for mode in modes]
    for w in workers:
        if w["proc"].stdout.readline().strip() != "ready":
            w["ok"] = False
    for turn in range(args.turns):
        # Every process once per turn, in an order that rotates: drift on the machine falls on all alike.
        for k in range(len(workers)):
            w = workers[(k + turn) % len(workers)]
            reply = ask(w, f"run {args.steps}")
            if reply and turn > 0:
                reply = json.loads(reply)
                w["times"].extend(reply["times_ms"])
                w["round_medians"].append(statistics.median(reply["times_ms"]))
                w["round_cpu_medians"].append(statistics.median(reply["cpu_ms"]))
    results = []
    for w in workers:
        r = finish(w, args)
        results.append(r)
        print(json.dumps({k: v for k, v in r.items()
                          if k not in ("round_medians_ms", "round_cpu_medians_ms", "times_ms", "workload")}),
              flush=True)
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="gpu-build")
    p.add_argument("--out", help="folder for the results (required unless --table-from)")
    p.add_argument("--turns", type=int, default=30, help="turns per mode (the first is a warm-up, not counted)")
    p.add_argument("--steps", type=int, default=10, help="steps per turn")
    p.add_argument("--configs", default="issue,cpu")
    p.add_argument("--variants", default="")
    p.add_argument("--old-preload", default="")
    p.add_argument("--slow-disk-ms", type=int, default=0,
                   help="a slow disk: every write(2) of a trace first sleeps this long (tests/e2e/programs/"
                        "slow_write.cc, preloaded before the preload)")
    p.add_argument("--slow-write-lib", default="gpu-build/fakes/libe2e_slow_write.so")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--replicas", type=int, default=1, help="processes per mode (their differences are noise too)")
    p.add_argument("--waves", type=int, default=1,
                   help="run the --replicas processes per mode this many times, one wave after another: processes "
                        "differ by ~3 %% of the step (docs/performance.md), so the ratio's interval narrows only with "
                        "more of them")
    p.add_argument("--cpus", type=cpu_list, default=set(), help="pin every mode's process to these CPUs, e.g. 2-5")
    p.add_argument("--modes", default="plain,history,cumem",
                   help="the modes to run before the --variants (an A/A test of the noise: plain alone)")
    p.add_argument("--hash-seed", type=int, default=None,
                   help="PYTHONHASHSEED for every process (the same dict layouts in every mode)")
    p.add_argument("--no-aslr", action="store_true",
                   help="no address-space randomization: every process of a mode gets one layout (a diagnosis of "
                        "the noise between processes, not a fair comparison of modes: the preload moves the layout)")
    p.add_argument("--table-from", default="", help="only print the tables of an earlier run's torch_overhead.json")
    args = p.parse_args()
    if args.table_from:
        with open(args.table_from) as f:
            results = json.load(f)
        configs = list(dict.fromkeys(r["config"] for r in results))
        print(table(results, configs, list(dict.fromkeys(r["mode"] for r in results))))
        return 0
    if not args.out:
        p.error("--out is required")
    args.analyzer = os.path.join(args.build, "analyzer", "cumem-analyze")
    preload = os.path.abspath(os.path.join(args.build, "preload", "libcumemtrace.so"))

    def preload_for(mode):
        if mode in ("plain", "history"):
            return None
        return os.path.abspath(args.old_preload) if mode == "old" else preload

    configs = [c for c in args.configs.split(",") if c]
    modes = [m for m in args.modes.split(",") if m] + [v for v in args.variants.split(",") if v]
    work = os.path.join(args.out, "work")
    results = []
    for config in configs:
        for wave in range(args.waves):
            results += run_wave(config, wave, modes, args, work, preload_for)
    with open(os.path.join(args.out, "torch_overhead.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = table(results, configs, modes)
    with open(os.path.join(args.out, "torch_overhead.md"), "w") as f:
        f.write(md)
    print(md)
    return 0 if all(r.get("exit") == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
