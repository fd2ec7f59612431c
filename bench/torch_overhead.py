#!/usr/bin/env python3
"""What tracing PyTorch's tensors costs a training step, side by side with PyTorch's own memory history, on the GPU
machine (issue 8's benchmark; results go to docs/performance.md).

Runs tests/gpu/workloads/gpt2_overhead.py (GPT-2 built from a config, AdamW, median ms per step over the timed
steps) in every mode below, the modes interleaved round by round so that drift on the machine hits all of them:

  plain      untraced
  history    torch.cuda.memory._record_memory_history(stacks="python")
  cumem      LD_PRELOAD=libcumemtrace.so: block events with native + Python stacks (the default settings)
  ...        the cumem variants named with --variants (see VARIANTS): other stack depths, no Python frames, no stacks,
             or another build of the preload, to say where cumemtrace's time goes

in two model configurations: "issue" (6 layers x 512, batch 16 x 256: the step issue 8 names, bound by the GPU, so
host-side costs mostly hide behind it) and "cpu" (6 layers x 128, batch 2 x 64: the same allocations per step but
tiny kernels, so the step is bound by the CPU and every host-side microsecond shows). For traced runs it also reads
the trace's trailer: ns per trace row spent in the preload (recorder_time_ns / events), rows, allocator entries and
file bytes per allocator entry.

Usage (on the GPU machine, from the repository root, the bundle from scripts/gpu-bundle.sh carried):
  python3 bench/torch_overhead.py --build gpu-build --out DIR [--rounds 2] [--steps 60] [--configs issue,cpu]
      [--variants depth32,nopython] [--old-preload PATH]
Writes DIR/torch_overhead.json (every run) and DIR/torch_overhead.md (medians over rounds, and the ratios).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOAD = os.path.join(ROOT, "tests", "gpu", "workloads", "gpt2_overhead.py")
CONFIGS = {
    "issue": ["--layers", "6", "--embd", "512", "--batch", "16", "--seq", "256"],
    "cpu": ["--layers", "6", "--embd", "128", "--batch", "2", "--seq", "64"],
}
# cumemtrace variants: extra environment for the preload (None: the build's own preload with its defaults).
VARIANTS = {
    "depth32": {"CUMEMTRACE_STACK_DEPTH": "32"},
    "depth16": {"CUMEMTRACE_STACK_DEPTH": "16"},
    "nopython": {"CUMEMTRACE_PYTHON": "0"},
    "nostacks": {"CUMEMTRACE_STACK_DEPTH": "0"},
    "old": {},  # --old-preload: another build of the preload, default settings
}


def run(mode, config, args, work, env_extra, preload):
    truth = os.path.join(work, "truth.json")
    trace = os.path.join(work, "trace.pb")
    for path in (truth, trace):
        if os.path.exists(path):
            os.remove(path)
    env = dict(os.environ)
    cmd = [sys.executable, WORKLOAD, truth, "--steps", str(args.steps)] + CONFIGS[config]
    if mode == "history":
        cmd.append("--history")
    if preload:
        env.update({"LD_PRELOAD": preload, "CUMEMTRACE_OUTPUT": trace})
        env.update(env_extra)
    started = time.time()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    result = {"mode": mode, "config": config, "exit": done.returncode, "wall_s": round(time.time() - started, 1)}
    if done.returncode != 0:
        result["stderr"] = done.stderr[-2000:]
        return result
    with open(truth) as f:
        result["workload"] = json.load(f)  # its own "mode" says only whether PyTorch's history was on
    result["median_ms"] = result["workload"]["median_ms"]
    if preload:
        result["trace_bytes"] = os.path.getsize(trace)
        summary = subprocess.run([args.analyzer, "summary", trace, "--json"], capture_output=True, text=True)
        health = json.loads(summary.stdout).get("health", {}) if summary.returncode == 0 else {}
        rows = health.get("events") or 0
        entries = health.get("allocator_events") or 0
        result.update({
            "rows": rows, "allocator_entries": entries,
            "recorder_ns_per_row": (health.get("recorder_time_ns") or 0) / max(rows, 1),
            "bytes_per_entry": result["trace_bytes"] / max(entries, 1),
            "bytes_per_row": result["trace_bytes"] / max(rows, 1),
        })
    return result


def table(results, configs, modes):
    lines = []
    for config in configs:
        runs = [r for r in results if r["config"] == config and r.get("exit") == 0]
        plain = [r["median_ms"] for r in runs if r["mode"] == "plain"]
        if not plain:
            continue
        base = statistics.median(plain)
        lines.append(f"\n### {config}: {' '.join(CONFIGS[config])}\n")
        lines.append("| mode | ms per step (median of rounds) | rounds | vs untraced | preload ns per row | "
                     "B per allocator entry |")
        lines.append("|---|---|---|---|---|---|")
        overhead = {}
        for mode in modes:
            ms = [r["median_ms"] for r in runs if r["mode"] == mode]
            if not ms:
                continue
            m = statistics.median(ms)
            overhead[mode] = m / base - 1
            ns = [r["recorder_ns_per_row"] for r in runs if r["mode"] == mode and "recorder_ns_per_row" in r]
            bpe = [r["bytes_per_entry"] for r in runs if r["mode"] == mode and "bytes_per_entry" in r]
            lines.append(f"| {mode} | {m:.2f} | {', '.join(f'{x:.2f}' for x in ms)} | "
                         f"{100 * overhead[mode]:+.1f} % | {statistics.median(ns):.0f} | "
                         f"{statistics.median(bpe):.2f} |" if ns else
                         f"| {mode} | {m:.2f} | {', '.join(f'{x:.2f}' for x in ms)} | {100 * overhead[mode]:+.1f} % | | |")
        if "history" in overhead and "cumem" in overhead and overhead["history"] > 0:
            lines.append(f"\ncumemtrace's overhead / history's: {overhead['cumem'] / overhead['history']:.2f}")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="gpu-build")
    p.add_argument("--out", required=True)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--configs", default="issue,cpu")
    p.add_argument("--variants", default="")
    p.add_argument("--old-preload", default="")
    p.add_argument("--timeout", type=int, default=240)
    p.add_argument("--budget", type=int, default=0, help="stop starting rounds after this many seconds (0: none)")
    args = p.parse_args()
    args.analyzer = os.path.join(args.build, "analyzer", "cumem-analyze")
    preload = os.path.abspath(os.path.join(args.build, "preload", "libcumemtrace.so"))
    configs = [c for c in args.configs.split(",") if c]
    variants = [v for v in args.variants.split(",") if v]
    modes = ["plain", "history", "cumem"] + variants
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    results = []
    started = time.time()
    for round_number in range(args.rounds):
        if args.budget and round_number > 0 and time.time() - started > args.budget:
            break
        for config in configs:
            for mode in modes:
                if mode in ("plain", "history"):
                    r = run(mode, config, args, work, {}, None)
                elif mode == "cumem":
                    r = run(mode, config, args, work, {}, preload)
                elif mode == "old":
                    r = run(mode, config, args, work, {}, os.path.abspath(args.old_preload))
                else:
                    r = run(mode, config, args, work, VARIANTS[mode], preload)
                r["round"] = round_number
                results.append(r)
                print(json.dumps({k: v for k, v in r.items() if k != "stderr"}), flush=True)
                if r.get("exit") != 0:
                    print(r.get("stderr", ""), file=sys.stderr, flush=True)
    with open(os.path.join(args.out, "torch_overhead.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = table(results, configs, modes)
    with open(os.path.join(args.out, "torch_overhead.md"), "w") as f:
        f.write(md)
    print(md)
    return 0 if all(r.get("exit") == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
