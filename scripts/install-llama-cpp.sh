#!/usr/bin/env bash
# Install llama-cpp-python into a virtual environment from a wheel built WITHOUT AMX kernels.
#
# Why: llama.cpp's default build is GGML_NATIVE (-march=native). On a CPU that advertises AMX it
# compiles the AMX tile kernels and puts weights in the AMX buffer at load time; on some virtualized
# hosts the first `tilezero` then faults with SIGILL and the process dies at its first completion
# (docs/adr/0008-llama-cpp-without-amx.md). We build for x86-64-v3 (AVX, AVX2, FMA, F16C, BMI2)
# instead: no AMX and no AVX-512 instruction is compiled in, and the wheel runs on any AVX2 host.
#
# pip keys its wheel cache by the sdist, not by CMAKE_ARGS, so a cached native wheel would be reused
# silently: the wheel is built with --no-cache-dir into a directory whose name encodes the version
# and the build flavour, and a later run (a fresh clone on the same machine too) installs it from
# there. An environment that already has exactly that wheel installed is left alone.
#
# Usage: scripts/install-llama-cpp.sh PYTHON      (PYTHON: the environment's interpreter)
# Environment: LLAMA_CPP_PYTHON_VERSION (default below), XDG_CACHE_HOME.
set -euo pipefail

PY="${1:?usage: install-llama-cpp.sh PYTHON}"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { [[ "$cpu_flags" == *" $1 "* ]]; }

if [ "$(uname -m)" = x86_64 ] && has avx2 && has fma && has f16c && has bmi2; then
  flavour=x86-64-v3-noamx
  cmake_args="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  cmake_args+=" -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
else
  # No AVX2 (so no AMX either) or not x86: the native build is safe; key it by this CPU's flags.
  flavour="native-$(uname -m)-$(printf '%s' "$cpu_flags" | sha256sum | cut -c1-12)"
  cmake_args="-DGGML_NATIVE=ON"
fi

dir="${XDG_CACHE_HOME:-$HOME/.cache}/openab-voice/wheels/llama-cpp-python-${VERSION}-${flavour}"
wheel=$(ls "$dir"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
  echo "building llama-cpp-python $VERSION ($flavour; ~9 min on 2 cores) into $dir"
  tmp="$dir.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  CMAKE_ARGS="$cmake_args" "$PY" -m pip wheel -q --no-cache-dir --no-deps --wheel-dir "$tmp" \
    "llama-cpp-python==$VERSION"
  # Renamed into place last: an interrupted build never leaves a directory that looks complete.
  rm -rf "$dir" && mv "$tmp" "$dir"
  wheel=$(ls "$dir"/llama_cpp_python-"$VERSION"-*.whl | head -n1)
fi

# pip records where a wheel came from (PEP 610 direct_url.json): reinstall unless it was this file.
if ! "$PY" - "$wheel" <<'PYEOF'
import json, sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

try:
    origin = json.loads(distribution("llama_cpp_python").read_text("direct_url.json") or "{}")
except PackageNotFoundError:
    sys.exit(1)
sys.exit(0 if origin.get("url") == Path(sys.argv[1]).resolve().as_uri() else 1)
PYEOF
then
  "$PY" -m pip install -q --force-reinstall --no-deps "$wheel"
fi
echo "llama-cpp-python: $wheel"
