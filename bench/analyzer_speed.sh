#!/usr/bin/env bash
# Times `cumem-analyze summary` (or another command) on one trace, for one or more builds of the analyzer, the builds
# taking turns so that a shared machine's drift falls on each alike. Prints, per build, the fastest and the median
# wall time of REPS runs, the largest peak RSS and rows per second at the fastest; fails if two builds' reports
# differ.
#
#   bench/analyzer_speed.sh TRACE.pb ANALYZER [ANALYZER ...]      # env: REPS (7), COMMAND (summary)
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 TRACE.pb ANALYZER [ANALYZER ...]" >&2
  exit 2
fi
trace=$1
shift
[[ -f $trace ]] || { echo "$0: no trace at $trace" >&2; exit 2; }
reps=${REPS:-7}
command=${COMMAND:-summary}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rows=$("$1" summary --json "$trace" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["health"]["events_read"])')

for i in $(seq "$reps"); do
  n=0
  for analyzer in "$@"; do
    /usr/bin/time -f "%e %M" -o "$work/time.$n.$i" "$analyzer" "$command" "$trace" >"$work/out.$n" 2>/dev/null
    n=$((n + 1))
  done
done

n=0
for analyzer in "$@"; do
  if ! cmp -s "$work/out.0" "$work/out.$n"; then
    echo "the reports of $1 and $analyzer differ" >&2
    exit 1
  fi
  cat "$work"/time.$n.* | python3 -c '
import statistics, sys
name, rows = sys.argv[1], int(sys.argv[2])
runs = [line.split() for line in sys.stdin if line.strip()]
wall = sorted(float(r[0]) for r in runs)
rss = max(int(r[1]) for r in runs)
print(f"{name}: fastest {wall[0]:.2f} s, median {statistics.median(wall):.2f} s of {len(wall)}, "
      f"peak RSS {rss / 1024:.1f} MB, {rows / wall[0] / 1e6:.1f} M rows/s at the fastest")
' "$analyzer" "$rows"
  n=$((n + 1))
done
