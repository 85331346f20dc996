#!/usr/bin/env bash
# Why AOTInductor packages die at load on a machine: run it from the repository root on
# that machine (it needs gcc/g++ and torch with CUDA; PYTHON names the interpreter, else
# python3; about 2 minutes, the variants in parallel). Prints, in order:
#   1. the locale and which libstdc++ the torch process and g++ use;
#   2. the std::regex AOTInductor's wrapper runs at load (model_base.h,
#      parse_device_str) in a plain g++-built library called through ctypes: without
#      torch, after importing torch, with LC_ALL=C, with g++'s own libstdc++ preloaded;
#   3. the MLP of aoti_mlp.py four ways, and once more with that preload;
#   4. the C++ compilers the machine has, and the MLP built by each other one (CXX,
#      which Inductor's builder reads): a wrapper built by another compiler's headers;
# with the native stack (segv_bt.c, preloaded) of whatever crashes, named by addr2line.
set -u
python=${PYTHON:-python3}
here=$(dirname "$0")
tmp=$(mktemp -d)
gcc -shared -fPIC -O1 -o "$tmp/segv_bt.so" "$here/segv_bt.c" -ldl || { echo "cannot build segv_bt.so"; exit 1; }
g++ -shared -fPIC -O2 -std=c++17 -o "$tmp/regex_probe.so" "$here/regex_probe.cpp" || { echo "cannot build regex_probe.so"; exit 1; }
stdcxx=$(readlink -f "$(g++ -print-file-name=libstdc++.so.6)")

stack() {  # the SEGV_BT frames of a log, named
  grep "^frame" "$1" | head -25 | while read -r _ object offset symbol; do
    where=$([ -f "$object" ] && addr2line -f -C -e "$object" "$offset" 2>/dev/null | head -1)
    echo "    $(basename "$object") $offset $symbol | $where"
  done
}

probe() {  # name, preload, command...: run one variant, print its end and its stack
  local name=$1 preload=$2; shift 2
  LD_PRELOAD="$preload $tmp/segv_bt.so" timeout 280 "$@" > "$tmp/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc"
  grep -v "^frame\|Warning\|warnings.warn" "$tmp/$name.log" | tail -4 | sed 's/^/    /'
  stack "$tmp/$name.log"
}

echo "LANG=${LANG:-} LC_ALL=${LC_ALL:-} LC_CTYPE=${LC_CTYPE:-}"
echo "g++ $(g++ -dumpfullversion), its libstdc++: $stdcxx"
"$python" -c "import torch; print('torch', torch.__version__, 'process maps:', sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++' in l}))"

regex="import ctypes, sys
if sys.argv[1] == 'torch': import torch
print('regex_match(cuda:0) ->', ctypes.CDLL(sys.argv[2]).probe(b'cuda:0'))"
probe regex-alone "" "$python" -c "$regex" none "$tmp/regex_probe.so"
probe regex-after-torch "" "$python" -c "$regex" torch "$tmp/regex_probe.so"
LC_ALL=C probe regex-lc-all-c "" "$python" -c "$regex" torch "$tmp/regex_probe.so"
probe regex-preloaded "$stdcxx" "$python" -c "$regex" torch "$tmp/regex_probe.so"

for variant in plain cpu aot_load runner; do
  probe "aoti-$variant" "" "$python" "$here/aoti_mlp.py" "$variant" &
done
probe aoti-plain-preloaded "$stdcxx" "$python" "$here/aoti_mlp.py" plain &
wait

echo "C++ compilers here:"
compilers=$(compgen -c | grep -E '^(g\+\+|clang\+\+)(-[0-9]+)?$' | sort -u)
for cxx in $compilers; do
  echo "    $cxx: $("$cxx" --version | head -1), libstdc++ $(readlink -f "$("$cxx" -print-file-name=libstdc++.so.6)")"
done
for cxx in $compilers; do
  [ "$cxx" = g++ ] && continue
  CXX=$cxx probe "aoti-plain-$cxx" "" "$python" "$here/aoti_mlp.py" plain &
done
wait
rm -rf "$tmp"
