# Sourced by the GPU-machine scripts (resident.sh, window_check.sh): make duckdb, torchax
# and this checkout importable there. Where duckdb or torchax do not import and .whl/
# holds wheels (../shared/GPU.md: the GPU machine lacks both), they are installed into
# /tmp/site and put on PYTHONPATH, and this checkout is installed (editable) when
# `runner` does not import from it.
setup() {
  if compgen -G ".whl/*.whl" > /dev/null && ! python3 -c 'import duckdb, torchax' 2>/dev/null; then
    if [ ! -d /tmp/site/duckdb ]; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 3
    fi
    export PYTHONPATH=/tmp/site
  fi
  here=$(python3 -c 'import os, runner; print(os.path.dirname(os.path.dirname(runner.__file__)))' 2>/dev/null)
  if [ "$here" != "$PWD" ]; then
    python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > /dev/null || exit 3
  fi
  export PYTHONUNBUFFERED=1
}
