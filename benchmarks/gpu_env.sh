# Sourced by the GPU-machine scripts (resident.sh, window_check.sh): make duckdb, torchax
# and this checkout importable there. Where duckdb or torchax do not import and .whl/
# holds wheels (../shared/GPU.md: the GPU machine lacks both), they are installed into
# /tmp/site and put on PYTHONPATH, and this checkout is installed (editable) when
# `runner` does not import from it outside it, or its console scripts are not on PATH.
setup() {
  if compgen -G ".whl/*.whl" > /dev/null && ! python3 -c 'import duckdb, torchax' 2>/dev/null; then
    if [ ! -d /tmp/site/duckdb ]; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 3
    fi
    export PYTHONPATH=/tmp/site
  fi
  # From the checkout's root `runner` imports from the working directory whether or not
  # it is installed, so the console scripts (zoo-run, zoo-export, ...) are the sign: a
  # call on 2026-12-07 found no `zoo-run` after this setup.
  here=$(cd / && python3 -c 'import os, runner; print(os.path.dirname(os.path.dirname(runner.__file__)))' 2>/dev/null)
  if [ "$here" != "$PWD" ] || ! command -v zoo-run > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > /dev/null || exit 3
  fi
  export PYTHONUNBUFFERED=1
}
