#!/usr/bin/env bash
# Checks what building and testing cudal1 needs. On Debian, as root, installs what is missing;
# otherwise prints the one apt-get line that would. Prints the PyTorch interpreter it chose on
# stdout (the Makefile passes it to CMake); everything else goes to stderr.
set -euo pipefail

missing=()
optional=()
need() {  # need PACKAGE TEST...
  local package=$1; shift
  if ! "$@" >/dev/null 2>&1; then missing+=("$package"); fi
}
# Optional: what `cudal1 optimize` and its tests need (without it `cudal1 eval` still builds),
# what HTML reports inline and their browser test opens them in (without it reports are
# written without charts and highlighting, and the browser test is skipped), and the Redis queue
# (without hiredis no `cudal1 worker`/`queue`/--queue; without redis-server their tests skip).
want() {  # want PACKAGE TEST...
  local package=$1; shift
  if ! "$@" >/dev/null 2>&1; then optional+=("$package"); fi
}

torch_python() {
  local candidate
  for candidate in "${CUDAL1_PYTHON:-}" "$(command -v python3 || true)" /usr/bin/python3; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    if "$candidate" -c 'import torch' >/dev/null 2>&1; then echo "$candidate"; return 0; fi
  done
  return 1
}

check_all() {
  missing=()
  optional=()
  want libcurl4-openssl-dev bash -c 'test -f /usr/include/curl/curl.h || ls /usr/include/*/curl/curl.h'
  want libsqlite3-dev test -f /usr/include/sqlite3.h
  want libcpp-httplib-dev test -f /usr/include/httplib.h
  want libjs-chart.js bash -c 'ls /usr/share/javascript/chart.js/*.js'
  want libjs-highlight.js test -d /usr/share/javascript/highlight.js/styles
  want chromium bash -c 'command -v chromium || command -v chromium-browser'
  want libhiredis-dev test -f /usr/include/hiredis/hiredis.h
  want redis-server command -v redis-server
  # Every worker process runs in a bubblewrap sandbox (docs/evaluation.md, "Security model").
  need bubblewrap command -v bwrap
  need cmake command -v cmake
  need g++ command -v g++
  need make command -v make
  need nlohmann-json3-dev test -f /usr/include/nlohmann/json.hpp
  need libcli11-dev test -f /usr/include/CLI/CLI.hpp
  need libfmt-dev test -f /usr/include/fmt/format.h
  need libspdlog-dev test -f /usr/include/spdlog/spdlog.h
  need libgtest-dev test -f /usr/include/gtest/gtest.h
  local python
  if python=$(torch_python); then
    need pybind11-dev bash -c "test -f /usr/include/pybind11/pybind11.h || '$python' -c 'import pybind11'"
    need python3-dev "$python" -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))'
    # PyTorch's C++ extensions (candidates using load_inline) are built with ninja, against
    # PyTorch's headers (Debian ships them apart from python3-torch).
    need ninja-build command -v ninja
    need libtorch-dev "$python" -c 'import os, torch.utils.cpp_extension as e; assert any(os.path.exists(os.path.join(p, "torch", "extension.h")) for p in e.include_paths())'
  else
    missing+=(python3-torch libtorch-dev python3-dev pybind11-dev ninja-build)
  fi
}

check_all
if [ $((${#missing[@]} + ${#optional[@]})) -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ -f /etc/debian_version ]; then
    echo "setup: installing ${missing[*]} ${optional[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    # A machine without a reachable package mirror keeps going with what it has.
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" "${optional[@]}"; } >&2; then
      echo "setup: apt-get could not install them" >&2
    fi
    check_all
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: missing ${missing[*]}" >&2
  echo "setup: install them with:  sudo apt-get install -y ${missing[*]} ${optional[*]}" >&2
  exit 1
fi
if [ ${#optional[@]} -gt 0 ]; then
  echo "setup: optional packages missing: ${optional[*]} (libcurl4-openssl-dev, libsqlite3-dev and" \
       "libcpp-httplib-dev: cudal1 optimize and its tests; libjs-chart.js, libjs-highlight.js: charts" \
       "and highlighting in HTML reports; chromium: the report browser test; libhiredis-dev, redis-server:" \
       "cudal1 worker, cudal1 queue, --queue and their tests); install with:" \
       " sudo apt-get install -y ${optional[*]}" >&2
fi
torch_python
