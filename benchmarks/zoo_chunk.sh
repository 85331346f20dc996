#!/usr/bin/env bash
# The first call of a zoo sweep chunk, whichever Hopper card the device tool lent:
#
#   bash benchmarks/zoo_chunk.sh CALL_S CHUNK_S
#
# On an H200, the headline column's chunk (label zoo-headline); on an H100, the next
# chunk of the H100's own sweep of the core set (label zoo-core-h100; data/runs/README.md,
# "zoo-core-h100"); on any other card, nothing (exit 3). It prints "LAND NAME", the name
# that `bash benchmarks/land_chunk.sh FILES_AT NAME` lands the chunk under, and starts it
# with `benchmarks/resident.sh start CALL_S CHUNK_S`; later calls are resident.sh's own
# `wait` and `end`. GPU_NAME stands in for nvidia-smi's name of the card; DRY_RUN=1
# prints the start command instead of running it.
set -u
[ $# -eq 2 ] || { echo "usage: $0 CALL_S CHUNK_S" >&2; exit 2; }
name=${GPU_NAME:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)}
case "$name" in
*H200*)
  echo "LAND headline ($name)"
  sweep="--models @headline --configs @headline --label zoo-headline"
  ;;
*H100*)
  echo "LAND core-h100 ($name)"
  sweep="--models @core --configs @core --label zoo-core-h100"
  ;;
*)
  echo "no sweep runs on this card (${name:-none found}): give it back" >&2
  exit 3
  ;;
esac
# shellcheck disable=SC2086 # $sweep is words, each an argument
set -- start "$1" "$2" -- $sweep --workers 14 --timing-cpus 2 --triage ladder
if [ -n "${DRY_RUN:-}" ]; then
  echo "resident.sh $*"
  exit 0
fi
exec bash "$(dirname "$0")/resident.sh" "$@"
