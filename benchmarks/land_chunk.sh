#!/usr/bin/env bash
# After a GPU chunk: what benchmarks/resident.sh left under $OUT (runs.tgz, logs.tgz),
# fetched here into DIR, landed in this checkout, ready to commit:
#
#   bash benchmarks/land_chunk.sh DIR NAME
#
# copies each exported run folder that data/runs lacks into it (one it has is left as it
# is), keeps the chunk's log as docs/logs/zoo_sweep/NAME-<runs>.log (NAME: headline,
# core, core-h100, as benchmarks/zoo_chunk.sh prints it; <runs>: the first 8 characters
# of each run landed), and regenerates the reports that read data/runs (`make
# shipped-docs`, with this checkout's .venv where it has one). RUNS_DIR and LOGS_DIR move
# the two folders; SHIPPED_DOCS=0 skips the reports.
set -euo pipefail
dir=${1:?usage: $0 DIR NAME}
name=${2:?usage: $0 DIR NAME}
runs=${RUNS_DIR:-data/runs}
logs=${LOGS_DIR:-docs/logs/zoo_sweep}
[ -f "$dir/runs.tgz" ] || { echo "error: $dir has no runs.tgz (resident.sh packs one)" >&2; exit 2; }
[ -d "$runs" ] || { echo "error: no folder $runs here: run this in the project's root" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/runs"
tar xzf "$dir/runs.tgz" -C "$tmp/runs"
landed=()
for folder in "$tmp"/runs/*/; do
  [ -d "$folder" ] || continue
  run=$(basename "$folder")
  if [ -e "$runs/$run" ]; then
    echo "$runs/$run is there already: left as it is"
    continue
  fi
  cp -r "$folder" "$runs/$run"
  # Files fetched from the device machine come read-only.
  chmod -R u+w "$runs/$run"
  landed+=("$run")
  echo "landed $runs/$run"
done
if [ ${#landed[@]} -eq 0 ]; then
  echo "no new run to land"
  exit 0
fi
if [ -f "$dir/logs.tgz" ] && tar xzf "$dir/logs.tgz" -C "$tmp" resident.log 2>/dev/null; then
  tag=$name
  for run in "${landed[@]}"; do tag+="-${run:0:8}"; done
  mkdir -p "$logs"
  cp "$tmp/resident.log" "$logs/$tag.log"
  chmod u+w "$logs/$tag.log"
  echo "kept the chunk's log as $logs/$tag.log"
fi
if [ "${SHIPPED_DOCS:-1}" != 0 ]; then
  if [ -x .venv/bin/python ]; then
    PATH="$PWD/.venv/bin:$PATH" make shipped-docs
  else
    make shipped-docs
  fi
fi
