#!/usr/bin/env bash
# Which library of a torch process an AOTInductor package binds its C++ standard
# library symbols to, and whether loading g++'s libstdc++ into the process's global
# scope from Python (instead of LD_PRELOAD) is enough for the package to load and run.
# Run it from the repository root on the machine whose packages crash at load
# (PYTHON names the interpreter, else python3; about a minute). Prints:
#   1. every library the package's .so took a std:: symbol from, with counts and an
#      example symbol (LD_DEBUG=bindings of the MLP of aoti_mlp.py, crash or not);
#   2. which of the process's mapped libraries define that example symbol themselves;
#   3. the MLP (VARIANT=cpu: packaged for CPU) with g++'s libstdc++ opened RTLD_GLOBAL before importing torch, and after.
set -u
python=${PYTHON:-python3}
here=$(dirname "$0")
tmp=$(mktemp -d)
stdcxx=$(readlink -f "$(g++ -print-file-name=libstdc++.so.6)")
echo "g++ $(g++ -dumpfullversion), its libstdc++: $stdcxx"

LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/ld" timeout 280 "$python" "$here/aoti_mlp.py" "${VARIANT:-plain}" \
  > "$tmp/bindings.log" 2>&1
echo "== the MLP under LD_DEBUG=bindings: exit $? ($(tail -1 "$tmp/bindings.log"))"
# Lines read: "PID: binding file SRC [0] to DST [0]: normal symbol `NAME' [VERSION]".
cat "$tmp"/ld.* | grep "binding file" | grep -E "symbol \`_Z(NS|NK|S|N9__gnu_cxx|NSt|St)" \
  | awk '$4 != $7 && $7 !~ /libstdc\+\+/' > "$tmp/std"
echo "std:: bindings of one library to another that is not libstdc++ (count, file -> library):"
awk '{n[$4" -> "$7]++} END {for (k in n) print n[k], k}' "$tmp/std" | sort -rn | head -12 \
  | sed 's/^/    /'
echo "the package's (files under /tmp), by symbol:"
awk '$4 ~ /^\/tmp\// {gsub(/[`\x27]/, "", $11); print $7, $11}' "$tmp/std" | sort -u \
  | while read -r lib symbol; do echo "    $(echo "$symbol" | c++filt) <- $lib"; done | head -20
example=$(awk '$4 ~ /^\/tmp\// {gsub(/[`\x27]/, "", $11); print $11}' "$tmp/std" | head -1)
echo "example symbol: ${example:-none}"
if [ -n "$example" ]; then
  "$python" -c "import torch; print('\n'.join(sorted({l.split()[-1] for l in open('/proc/self/maps') if '.so' in l})))" \
    > "$tmp/maps"
  echo "mapped libraries of an imported torch that define it:"
  while read -r lib; do
    nm -D --defined-only "$lib" 2>/dev/null | grep -q " $example" && echo "    $lib"
  done < "$tmp/maps"
fi

for when in before after; do
  code="import ctypes, os, runpy, sys
if sys.argv[1] == 'after': import torch
ctypes.CDLL(sys.argv[2], mode=os.RTLD_GLOBAL)
sys.argv = [sys.argv[3], sys.argv[4]]
runpy.run_path(sys.argv[0], run_name='__main__')"
  timeout 280 "$python" -c "$code" "$when" "$stdcxx" "$here/aoti_mlp.py" "${VARIANT:-plain}" > "$tmp/$when.log" 2>&1
  echo "== libstdc++ RTLD_GLOBAL $when importing torch: exit $?"
  grep -v "Warning\|warnings.warn" "$tmp/$when.log" | tail -3 | sed 's/^/    /'
done
rm -rf "$tmp"
