#!/usr/bin/env bash
# Opens the HTML report of a trace in headless Chromium and checks, from the page's own self-check element
# (report.js writes it after drawing): the script ran without errors, the chart was drawn with the trace's data
# (the largest value drawn for each device total equals the peak `cumem-analyze peak --json` reports), every
# one-click moment (each peak, each failed allocation: "#selftest" presses them) drew a flamegraph, no request
# left the page (no resource entries, no CSP violation, and no src=/href= in the file), and no console message.
# Usage: html_report_test.sh CUMEM_ANALYZE TRACE WORKDIR [MAX_LOAD_MS]
# Exit 77 (CTest: skipped) without chromium.
set -euo pipefail
analyze=$1 trace=$2 work=$3 max_load_ms=${4:-}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "SKIP: no chromium (scripts/setup.sh installs Debian's chromium package)"
  exit 77
fi
mkdir -p "$work"
html="$work/$(basename "$trace" .pb).html"
start=$(date +%s.%N)
"$analyze" html "$trace" -o "$html" 2>"$work/analyze.err" || { cat "$work/analyze.err"; exit 1; }
end=$(date +%s.%N)
echo "html written in $(python3 -c "print(round($end - $start, 2))") s: $(stat -c %s "$html") bytes"

# Nothing in the file may point outside it.
if grep -Eq '<(script|link|img|iframe)[^>]* (src|href)=' "$html"; then
  echo "FAIL: the report references an external resource"; exit 1
fi

# A profile of its own, no network at all (every host resolves to nothing), logging to stderr for console lines.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
start=$(date +%s.%N)
timeout 180 "$browser" --headless --no-sandbox --disable-gpu --user-data-dir="$profile" \
  --host-resolver-rules="MAP * ~NOTFOUND" --enable-logging=stderr --v=0 \
  --dump-dom "file://$(realpath "$html")#selftest" >"$work/dom.html" 2>"$work/chromium.err"
end=$(date +%s.%N)
echo "chromium opened and dumped it in $(python3 -c "print(round($end - $start, 2))") s"

python3 - "$work/dom.html" "$work/chromium.err" "$analyze" "$trace" "$max_load_ms" "$html" <<'PY'
import json, re, subprocess, sys
dom, err, analyze, trace, max_load, html = sys.argv[1:7]
text = open(dom, encoding="utf-8", errors="replace").read()
m = re.search(r'<div id="cumem-selfcheck"([^>]*)>', text)
if not m:
    sys.exit("FAIL: no self-check element in the DOM")
attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', m.group(1)))
print("self-check:", attrs)
fail = []
if attrs.get("status") != "ok":
    fail.append(f"status {attrs.get('status')}: errors [{attrs.get('errors')}] blocked [{attrs.get('blocked')}]")
if attrs.get("resources") != "0":
    fail.append(f"{attrs.get('resources')} resources requested")
if int(attrs.get("points", "0")) <= 0:
    fail.append("nothing drawn")
drawn = dict(kv.split("=") for kv in attrs.get("series-max", "").split(",") if kv)
report = json.loads(subprocess.run([analyze, "peak", trace, "--json"], capture_output=True, check=True).stdout)
for d in report["device_totals"]:
    key = f"{d['device']}/total"
    if key not in drawn:
        fail.append(f"device {d['device']} total not drawn")
    elif int(drawn[key]) != d["peak_bytes"]:
        fail.append(f"device {d['device']} drawn max {drawn[key]} != peak {d['peak_bytes']}")
quick = [q.split(":") for q in attrs.get("quick", "").split(",") if q]
ooms = json.loads(subprocess.run([analyze, "oom", trace, "--json"], capture_output=True, check=True).stdout)
want_ooms = min(len(ooms["ooms"]), 50)
if sum(1 for k, _ in quick if k == "oom") != want_ooms:
    fail.append(f"{want_ooms} OOM buttons expected: {quick}")
if not any(k == "peak" for k, _ in quick) and report["device_totals"]:
    fail.append("no peak button")
for k, boxes in quick:
    if int(boxes) <= 0:
        fail.append(f"{k} drew nothing")
# The page opens with the diagnosis the text summary opens with (the lines between the process block and the peak
# table), sentence for sentence; the page's model keeps one group per stack, so the summary grouped so.
summary = subprocess.run([analyze, trace, "--group-by", "stack"], capture_output=True, check=True,
                         text=True).stdout.splitlines()
first = summary.index("") + 1
want = [l for l in summary[first:summary.index("", first)]]
d = re.search(r'<div id="diagnosis">(.*?)</div>', text, re.S)
got = [re.sub(r"<[^>]+>", "", p) for p in re.findall(r"<p>(.*?)</p>", d.group(1))] if d else []
unescape = lambda s: s.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("&quot;", '"')
if [unescape(g) for g in got] != want:
    fail.append(f"diagnosis on the page {got} != the summary's {want}")
# Every outermost NVTX range of the trace is a band on the timeline (as drawn for the first series).
ranges = [r for r in report.get("phase_ranges") or [] if "/" not in r.get("path", r.get("name", ""))]
if int(attrs.get("phase-bands", "-1")) != min(len(ranges), 200):
    fail.append(f"{attrs.get('phase-bands')} phase bands drawn, {len(ranges)} outermost ranges in the trace")
# With PyTorch's blocks and an OOM, the block map draws every block of the (at most 60) segments it shows.
page = json.loads(re.search(r'<script type="application/json" id="cumem-data">(.*?)</script>',
                            open(html, encoding="utf-8").read(), re.S).group(1))
segments = (page.get("allocator") or {}).get("segments") or []
want_blocks = sum(len(s["blocks"]) for s in segments[:60])
if int(attrs.get("map-blocks", "-1")) != want_blocks:
    fail.append(f"{attrs.get('map-blocks')} blocks drawn in the block map, {want_blocks} in the page's data")
console = [l for l in open(err, errors="replace") if ":CONSOLE" in l]
if console:
    fail.append("console: " + " | ".join(console))
if max_load and float(attrs.get("load-ms", "1e9")) > float(max_load):
    fail.append(f"load {attrs.get('load-ms')} ms over {max_load} ms")
print(f"page load (navigation start to drawn): {attrs.get('load-ms')} ms, render {attrs.get('render-ms')} ms")
if fail:
    sys.exit("FAIL: " + "; ".join(fail))
print("PASS")
PY
