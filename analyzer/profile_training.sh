#!/usr/bin/env bash
# The training run of cumem-analyze's profile-guided build (analyzer/profile_guided.cmake): the instrumented analyzer
# reads every example trace with the commands whose speed matters, and GCC's counters land in PROFILE_DIR.
#   analyzer/profile_training.sh INSTRUMENTED_ANALYZER PROFILE_DIR EXAMPLES_DIR STAMP
# A command that fails on an example (bad input is part of the examples' point) still leaves its counters; only an
# analyzer that cannot run at all fails the build.
set -euo pipefail
analyzer=$1 profile_dir=$2 examples=$3 stamp=$4
rm -rf "$profile_dir"
mkdir -p "$profile_dir"
"$analyzer" --help >/dev/null
for trace in "$examples"/*.pb; do
  for command in summary peak leaks oom; do
    "$analyzer" "$command" "$trace" >/dev/null 2>&1 || true
  done
done
ls "$profile_dir"/*.gcda >/dev/null  # the run wrote its counters
touch "$stamp"
