#!/usr/bin/env bash
# A chunk of a sweep that outlives the call that starts it, on a machine lent for short
# calls (the GPU machine's calls end after at most ten minutes, but the machine stays
# warm between calls that follow each other at once). The first call starts
# benchmarks/sweep_chunk.py detached; each later call waits on it; every call leaves
# what was recorded so far, exported, under $OUT:
#
#   bash benchmarks/resident.sh start CALL_S CHUNK_S -- <sweep_chunk's zoo-run arguments>
#   bash benchmarks/resident.sh wait CALL_S
#   bash benchmarks/resident.sh end CALL_S
#
# start runs a chunk of CHUNK_S seconds (sweep_chunk.py --seconds) and returns after
# about CALL_S; wait returns after about CALL_S, or when the chunk has ended; end sends
# the chunk SIGUSR1 (zoo-run's --wrap-up, 120 s by default) 180 s before CALL_S, SIGINT
# 45 s before as a backstop, and returns once it has ended. $OUT receives runs.tgz (every
# run the chunk's database holds that data/runs lacks, exported), logs.tgz (the
# chunk's log, and smi.csv: the card's used memory and each process's, read by nvidia-smi
# every SMI_S seconds, default 5, to set the memory margin against), resident.tail and
# ps.txt. The chunk's database and log live in
# $RESIDENT_DIR (default /tmp/resident), which must survive between the calls.
#
# benchmarks/gpu_env.sh makes duckdb, torchax and this checkout importable there.
set -u
T0=$(date +%s)
R=${RESIDENT_DIR:-/tmp/resident}
OUT=${OUT:?set OUT to the folder whose files come back}
mkdir -p "$R" "$OUT"
elapsed() { echo $(( $(date +%s) - T0 )); }

# shellcheck source=benchmarks/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"

# This chunk's processes, by its database (other chunks may run beside it).
chunk_pid() { pgrep -f "benchmarks/sweep_chunk.py --seconds [0-9.]+ --db $R/zoo.duckdb" | head -1; }
run_pid() { pgrep -f "runner.cli.run .*--db $R/zoo.duckdb" | head -1; }

pack() {
  # zoo-run opens its database per write, so a read-only connection gets in between
  # (Store retries a held lock).
  rm -rf "$R/export" && mkdir -p "$R/export"
  if [ -f "$R/zoo.duckdb" ]; then
    timeout 120 python3 - "$R/zoo.duckdb" "$R/export" <<'PY'
import sys
from pathlib import Path
from runner.store.db import Store
from runner.store.export import export_runs
db, out = Path(sys.argv[1]), Path(sys.argv[2])
shipped = {p.name for p in Path("data/runs").iterdir() if p.is_dir()}
with Store(db, lock_timeout_s=90).connection(read_only=True) as con:
    rows = con.execute(
        "SELECT run_id, (SELECT count(*) FROM results r WHERE r.run_id = u.run_id) "
        "FROM runs u ORDER BY started_at"
    ).fetchall()
new = [run_id for run_id, _ in rows if run_id not in shipped]
for run_id, count in rows:
    if run_id in new:
        print(f"run {run_id}: {count} rows")
if new:
    export_runs(db, out, run_ids=new)
PY
  fi
  tar czf "$OUT/runs.tgz" -C "$R/export" .
  tar czf "$OUT/logs.tgz" -C "$R" resident.log smi.csv 2>/dev/null
  tail -n 60 "$R/resident.log" > "$OUT/resident.tail" 2>/dev/null
  ps -eo pid,etimes,pcpu,rss,args --sort=-pcpu | head -25 > "$OUT/ps.txt"
  nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv >> "$OUT/ps.txt" 2>/dev/null
  echo "packed at $(elapsed) s"
}

wait_until() {  # until $1 seconds into this call, or until the chunk has ended
  while [ "$(elapsed)" -lt "$1" ] && [ -n "$(chunk_pid)" ]; do sleep 5; done
}

command=${1:-}
case "$command" in
start)
  [ $# -ge 4 ] && [ "$4" = "--" ] || { echo "usage: $0 start CALL_S CHUNK_S -- ARGS" >&2; exit 2; }
  call_s=$2 chunk_s=$3
  shift 4
  setup
  if [ -n "$(chunk_pid)" ]; then echo "a chunk is already running" >&2; exit 2; fi
  rm -f "$R/resident.log"
  setsid nohup python3 benchmarks/sweep_chunk.py --seconds "$chunk_s" --db "$R/zoo.duckdb" \
    --out "$R/final" -- "$@" > "$R/resident.log" 2>&1 < /dev/null &
  echo "started the chunk (pid $!) for $chunk_s s"
  setsid nohup bash "$0" sample > /dev/null 2>&1 < /dev/null &
  wait_until $(( call_s - 45 ))
  pack
  ;;
wait)
  call_s=${2:?usage: $0 wait CALL_S}
  setup
  wait_until $(( call_s - 45 ))
  pack
  ;;
end)
  call_s=${2:?usage: $0 end CALL_S}
  setup
  wait_until $(( call_s - 180 ))
  pid=$(chunk_pid)
  if [ -n "$pid" ]; then kill -USR1 "$pid" && echo "SIGUSR1 to the chunk at $(elapsed) s"; fi
  wait_until $(( call_s - 45 ))
  pid=$(run_pid)
  if [ -n "$pid" ]; then kill -INT "$pid" && echo "SIGINT to zoo-run $pid at $(elapsed) s"; fi
  wait_until $(( call_s - 25 ))
  pack
  ;;
sample)
  # Lines "UTC time,gpu,MiB used" and "UTC time,pid,MiB used" while the chunk runs.
  rm -f "$R/smi.csv"
  while [ -n "$(chunk_pid)" ]; do
    t=$(date -u +%Y-%m-%dT%H:%M:%S.%3N)
    timeout 10 nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | sed "s/^/$t,gpu,/"
    timeout 10 nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits \
      | tr -d ' ' | sed "s/^/$t,/"
    sleep "${SMI_S:-5}"
  done >> "$R/smi.csv" 2>/dev/null
  exit 0
  ;;
*)
  echo "usage: $0 start CALL_S CHUNK_S -- ARGS | wait CALL_S | end CALL_S" >&2
  exit 2
  ;;
esac
echo "--- resident.log, its end"
tail -n 25 "$R/resident.log" 2>/dev/null
