# shellcheck shell=bash
# scripts/gpu-steps.sh: the step helpers that scripts/gpu-check.sh and scripts/gpu-coverage.sh share; sourced by
# both, never run. They read what the sourcing script set before sourcing this file:
#   LOG           the log file (every line also goes to stdout);
#   WORK          the work directory: step outputs, and rc.txt ("STEP RC" lines);
#   START         $SECONDS when the script started; BUDGET, STEP_TIMEOUT: see step_limit;
#   STEP_TAIL     how many lines of a step's output run_step copies into the log;
#   JSON_LIMIT    the limit (s) run_json asks step_limit for;
#   STEP_TIMES    empty: run_step logs whole seconds; a file: run_step times the step to the hundredth, appends
#                 "STEP SECONDS" there and logs tenths.
# shellcheck disable=SC2154  # the variables above belong to the sourcing script
# shellcheck disable=SC2012  # ls on file names the scripts made

log() { printf '[%s +%3ds] %s\n' "$(date +%H:%M:%S)" "$((SECONDS - START))" "$*" | tee -a "$LOG"; }

# Seconds a step may still take: its own limit, cut to what is left of the budget.
step_limit() {
  local want=$1 left=$((BUDGET - (SECONDS - START)))
  [ "$want" -gt "$STEP_TIMEOUT" ] && want=$STEP_TIMEOUT
  [ "$left" -lt "$want" ] && want=$left
  echo "$want"
}

# skip_step NAME LIMIT: when less than 5 s are left, logs the skip, records rc 125 and returns 0.
skip_step() {
  [ "$2" -lt 5 ] || return 1
  log "step $1: SKIPPED (budget of ${BUDGET}s spent)"
  echo "$1 125" >>"$WORK/rc.txt"
}

# run_step NAME LIMIT OUTFILE CMD...: stdout and stderr to $WORK/OUTFILE, exit code to rc.txt (wall time to
# $STEP_TIMES when set), tail to the log.
run_step() {
  local name=$1 limit out=$3 rc t0=$SECONDS t1 took
  limit=$(step_limit "$2")
  shift 3
  skip_step "$name" "$limit" && return 125
  log "step $name (limit ${limit}s): $*"
  [ -z "$STEP_TIMES" ] || t0=$(date +%s.%N)
  timeout -k 10 "$limit" "$@" >"$WORK/$out" 2>&1
  rc=$?
  echo "$name $rc" >>"$WORK/rc.txt"
  if [ -n "$STEP_TIMES" ]; then
    t1=$(date +%s.%N)
    echo "$name $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" >>"$STEP_TIMES"
    took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  else
    took=$((SECONDS - t0))
  fi
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    log "step $name: TIMED OUT after ${limit}s (rc $rc)"
  else
    log "step $name: rc $rc in ${took}s"
  fi
  tail -n "$STEP_TAIL" "$WORK/$out" | sed 's/^/      | /' >>"$LOG"
  return "$rc"
}

# run_json NAME OUTFILE CMD...: like run_step, but only stdout goes to OUTFILE (stderr to OUTFILE.err) so that a
# warning cannot break the JSON.
run_json() {
  local name=$1 out=$2 rc t0=$SECONDS limit
  limit=$(step_limit "$JSON_LIMIT")
  shift 2
  skip_step "$name" "$limit" && return 125
  timeout -k 10 "$limit" "$@" >"$WORK/$out" 2>"$WORK/$out.err"
  rc=$?
  echo "$name $rc" >>"$WORK/rc.txt"
  log "step $name: rc $rc in $((SECONDS - t0))s, $(wc -c <"$WORK/$out") bytes: $*"
  if [ "$rc" != 0 ] || [ -s "$WORK/$out.err" ]; then
    tail -n 15 "$WORK/$out.err" | sed 's/^/      | /' >>"$LOG"
  fi
  return "$rc"
}

# The trace a run wrote: the output name carries %p, so a child process that exec'd with LD_PRELOAD inherited
# cannot overwrite it. Prefers trace.<pid>.pb when the pid is known, else the largest file; lists them all.
pick_trace() {
  local dir=$1 dest=$2 pid=${3:-} chosen=""
  log "traces in $dir: $(cd "$dir" 2>/dev/null && ls -l 2>/dev/null | tail -n +2 | awk '{print $9" ("$5" B)"}' | tr '\n' ' ')"
  if [ -n "$pid" ] && [ -f "$dir/trace.$pid.pb" ]; then
    chosen=$dir/trace.$pid.pb
  else
    chosen=$(ls -S "$dir"/* 2>/dev/null | head -n 1)
  fi
  if [ -n "$chosen" ] && [ -s "$chosen" ]; then
    cp "$chosen" "$dest"
    log "trace $(basename "$dest") <- $(basename "$chosen") ($(wc -c <"$dest") bytes)"
  else
    log "NO TRACE written in $dir"
  fi
}

# analyze_ready NAME: 0 when $WORK/NAME.pb and the analyzer ($ANALYZE) are there; else logs why not and returns 1.
analyze_ready() {
  if [ ! -s "$WORK/$1.pb" ]; then
    log "analyzer on $1: skipped, no trace"
    return 1
  fi
  if [ ! -x "$ANALYZE" ]; then
    log "analyzer on $1: skipped, $ANALYZE missing"
    return 1
  fi
}

# The git commit and how many files differ from it, as one log line.
log_git() {
  log "git: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git -C "$REPO" status --porcelain 2>/dev/null | wc -l) changed files"
}
