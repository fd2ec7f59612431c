#!/usr/bin/env bash
# check, diff and the exports on real GPU traces from examples/: each bound passes at the trace's exact value and
# fails one byte below (the values come from `peak --json` / `leaks --json`, not from this script), with exit codes
# 0/1/2 as documented; diff of a trace with itself changes nothing; folded, pprof and perfetto files are written.
# Usage: real_traces_test.sh CUMEM_ANALYZE EXAMPLES_DIR WORKDIR
set -euo pipefail
analyze=$1 examples=$2 work=$3
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect CODE command...
  local want=$1; shift
  set +e; out=$("$@" 2>&1); got=$?; set -e
  [ "$got" = "$want" ] || fail "exit $got, not $want: $* -> $out"
  echo "ok ($got): ${*:2} -> $(echo "$out" | head -1 | cut -c1-160)"
}
oom=$examples/story_oom_h200.pb
peak=$("$analyze" peak "$oom" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["device_totals"][0]["peak_bytes"])')
leak=$("$analyze" leaks "$oom" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["leak_summary"]["memory_bytes"])')
expect 0 "$analyze" check "$oom" --max-peak "$peak"
expect 1 "$analyze" check "$oom" --max-peak "$((peak - 1))"
expect 0 "$analyze" check "$oom" --max-leak "$leak"
expect 1 "$analyze" check "$oom" --max-leak "$((leak - 1))"
expect 1 "$analyze" check "$oom" --no-oom
expect 0 "$analyze" check "$examples/story_leak_h200.pb" --no-oom
expect 2 "$analyze" check "$oom"
expect 2 "$analyze" check "$work/missing.pb" --no-oom
out=$("$analyze" check "$oom" --no-oom || true)
[[ "$out" == *"story_oom.py"* ]] || fail "the --no-oom reason does not name the Python line: $out"

diff_json=$("$analyze" diff "$oom" "$oom" --json)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert not d["leak_groups"] and not d["peak_groups"], d' "$diff_json"
"$analyze" diff "$examples/story_leak_h200.pb" "$examples/leaky_h200.pb" --top 3 > "$work/diff.txt"
grep -q "live at the end by group, largest change first" "$work/diff.txt" || fail "diff text"

"$analyze" folded "$oom" -o "$work/oom.folded"
python3 - "$work/oom.folded" "$peak" <<'PY'
import re, sys
total = 0
for line in open(sys.argv[1]):
    m = re.match(r"^(.*) (\d+)$", line.rstrip("\n"))
    assert m, line
    assert m.group(1).startswith("device 0 total;"), line
    total += int(m.group(2))
assert total == int(sys.argv[2]), (total, sys.argv[2])
print("ok: folded stacks sum to the peak", total)
PY
"$analyze" pprof "$oom" -o "$work/oom.pb.gz"
gzip -t "$work/oom.pb.gz" || fail "pprof is not gzip"
"$analyze" perfetto "$oom" -o "$work/oom.perfetto-trace"
[ -s "$work/oom.perfetto-trace" ] || fail "empty perfetto trace"
echo PASS
