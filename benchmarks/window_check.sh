#!/usr/bin/env bash
# Does a shorter timing window keep the throughput benchmark's agreement with serial
# timing? (docs/PERFORMANCE.md, "What still bounds an 80 GiB card".) Three calls of the
# GPU machine that follow each other while it stays warm:
#
#   bash benchmarks/window_check.sh serial LIMIT_S     # the serial phase, protocol window
#   bash benchmarks/window_check.sh parallel           # parallel, the protocol's window
#   bash benchmarks/window_check.sh parallel WINDOW_S  # parallel, a WINDOW_S-second window
#   bash benchmarks/window_check.sh all SERIAL_LIMIT_S WINDOW_S   # the three in one call
#
# Each runs benchmarks/throughput.py on the 26 models of the issue 6 benchmark, inductor
# default, bf16, inference; the parallel phases with the headline chunks' workers (14,
# two cores kept for the timing; MODELS, WORKERS and TIMING_CPUS override these).
# Records live in $WINDOW_DIR (default /tmp/window) between the calls and are copied to
# $OUT after each; each parallel call leaves the report on all phases so far in
# $OUT/report.txt.
set -uo pipefail
OUT=${OUT:?set OUT to the folder whose files come back}
W=${WINDOW_DIR:-/tmp/window}
mkdir -p "$W" "$OUT"
trap 'cp -r "$W/." "$OUT/"' EXIT
# shellcheck source=benchmarks/gpu_env.sh
source "$(dirname "$0")/gpu_env.sh"
setup
# benchmarks/throughput.py runs as a script: its folder, not this one, leads sys.path.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
D=resnet18,resnet34,resnet50,resnet101,resnext50_32x4d,wide_resnet50_2,vit_small_patch16_224
D=$D,vit_base_patch16_224,deit_tiny_patch16_224,deit_small_patch16_224,convnext_tiny
D=$D,convnext_small,efficientnet_b0,efficientnet_b2,regnety_016,regnetx_032
D=$D,mobilenetv3_large_100,mobilenetv2_100,swin_tiny_patch4_window7_224,densenet121
D=$D,inception_v3,mixer_b16_224,levit_128,poolformer_s12,dla34,ghostnet_100
M=${MODELS:-$D}
nvidia-smi --query-gpu=name,uuid --format=csv,noheader > "$W/gpu.txt" 2>/dev/null
T=(python3 benchmarks/throughput.py --out "$W" --models "$M")
P=(--workers "${WORKERS:-14}" --timing-cpus "${TIMING_CPUS:-2}")
[ "${ALL_CELLS:-1}" = 1 ] && P+=(--all-cells)
case "${1:-}" in
serial)
  "${T[@]}" --phase serial --limit-s "${2:?usage: $0 serial LIMIT_S}" 2>&1 | tail -n 30 || exit 1
  ;;
parallel)
  # The protocol's window with no WINDOW_S; after it, the report on every phase so far.
  window=(${2:+--timing-s "$2"})
  "${T[@]}" --phase parallel "${P[@]}" "${window[@]}" 2>&1 | tail -n 8 || exit 1
  "${T[@]}" --phase report > "$W/report.txt" 2>&1 || { cat "$W/report.txt"; exit 1; }
  cat "$W/report.txt"
  ;;
all)
  # All three in one call, for a call's worth of device time: the parallel phases run
  # only the cells the serial phase got through (ALL_CELLS=0 unless set).
  [ $# -eq 3 ] || { echo "usage: $0 all SERIAL_LIMIT_S WINDOW_S" >&2; exit 2; }
  export ALL_CELLS=${ALL_CELLS:-0}
  bash "$0" serial "$2" && bash "$0" parallel && bash "$0" parallel "$3"
  exit
  ;;
*)
  echo "usage: $0 serial LIMIT_S | parallel [WINDOW_S] | all SERIAL_LIMIT_S WINDOW_S" >&2
  exit 2
  ;;
esac
