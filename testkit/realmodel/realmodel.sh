#!/usr/bin/env bash
# Real model servers for agentd's tests: llama.cpp's llama-server and Ollama,
# built from ordinary packages on a fresh Debian machine, with a tiny generated
# model (real Qwen2.5 tokenizer and chat template, hand-wired weights: its words
# are gibberish, so tests assert on structure only). See README.md here.
#
#   realmodel.sh build                     # idempotent, cached in $REALMODEL_CACHE
#   realmodel.sh llama PORT CTX LOGFILE    # start llama-server on 127.0.0.1:PORT, print its PID
#   realmodel.sh ollama PORT LOGFILE       # start ollama serve on 127.0.0.1:PORT, print its PID
#
# Sources: llama.cpp v0.4.0 (commit 80fb11a) is the git bundle that the npm
# package node-llama-cpp ships (`npm pack` fetches only that tarball; no
# install scripts run); Ollama is its own Go module (`go install`). The build
# downloads nothing else: the web UI download and HTTPS are switched off.
# Measured on 2 cores from empty caches: llama-server ~11 min, Ollama ~7 min.
set -euo pipefail
NLC_VERSION=3.21.1   # its bundle is llama.cpp v0.4.0 (80fb11a)
OLLAMA_VERSION=v0.17.4
CACHE=${REALMODEL_CACHE:-/var/cache/agentd-realmodel}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

build() {
  mkdir -p "$CACHE" && cd "$CACHE"
  local pkgs=()
  command -v cmake >/dev/null || pkgs+=(cmake)
  command -v g++ >/dev/null || pkgs+=(g++)
  command -v git >/dev/null || pkgs+=(git)
  /usr/bin/python3 -c 'import numpy' 2>/dev/null || pkgs+=(python3-numpy)
  if [ ${#pkgs[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  fi
  if [ ! -d src/.git ]; then
    rm -rf pkg src && mkdir pkg
    (cd pkg && npm pack --silent "node-llama-cpp@$NLC_VERSION" >/dev/null &&
       tar xzf "node-llama-cpp-$NLC_VERSION.tgz" package/llama/gitRelease.bundle)
    git -c advice.detachedHead=false clone -q pkg/package/llama/gitRelease.bundle src
    rm -rf pkg
  fi
  if [ ! -x bin/llama-server ]; then
    # -march=native (GGML_NATIVE) is right: CI builds on the machine it runs on.
    cmake -S src -B src/build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
      -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >/dev/null
    cmake --build src/build --target llama-server -j"$(nproc)" >/dev/null
    install -D src/build/bin/llama-server bin/llama-server
    rm -rf src/build
  fi
  if [ ! -f models/tiny-wired.gguf ]; then
    mkdir -p models
    PYTHONPATH=src/gguf-py /usr/bin/python3 "$HERE/make_tiny_gguf.py" src models/tiny-wired.gguf.tmp >/dev/null
    mv models/tiny-wired.gguf.tmp models/tiny-wired.gguf
  fi
  if [ ! -x bin/ollama ]; then
    # The module zip has no llama/llama.cpp/vendor (Go drops vendor dirs from
    # zips): its four header-only libraries come from the llama.cpp tree above.
    # Without -march=native cgo builds a plain SSE2 ggml, 10-20x slower. On a
    # CPU with AMX (Sapphire Rapids and later) -march=native turns on ggml's
    # AMX buffer type, whose code is in a folder the Go build does not
    # compile, and the link fails (undefined ggml_backend_amx_buffer_type):
    # AMX stays off, AVX-512 and the rest stay on.
    local cflags="-O3 -march=native -mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    CGO_ENABLED=1 CGO_CPPFLAGS="-I$CACHE/src/vendor" CGO_CFLAGS="$cflags" CGO_CXXFLAGS="$cflags" \
    GOBIN="$CACHE/bin" GOFLAGS=-buildvcs=false \
      go install -ldflags="-X=github.com/ollama/ollama/version.Version=${OLLAMA_VERSION#v}" \
        "github.com/ollama/ollama@$OLLAMA_VERSION"
  fi
  ollama_env
  local want
  want=$(cat models/tiny-wired.gguf "$HERE/Modelfile" | sha256sum)
  if [ "$(cat "$OLLAMA_MODELS/.tiny-wired.agentd.sha" 2>/dev/null)" != "$want" ]; then
    local tmp port pid
    tmp=$(mktemp -d)
    cp models/tiny-wired.gguf "$tmp/" && cp "$HERE/Modelfile" "$tmp/Modelfile"
    port=$((20000 + RANDOM % 20000))
    OLLAMA_HOST=127.0.0.1:$port bin/ollama serve >"$tmp/serve.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/api/version" && break; sleep 0.2; done
    (cd "$tmp" && OLLAMA_HOST=127.0.0.1:$port "$CACHE/bin/ollama" create tiny-wired -f Modelfile >/dev/null)
    kill "$pid"; wait "$pid" 2>/dev/null || true
    echo "$want" >"$OLLAMA_MODELS/.tiny-wired.agentd.sha"
    rm -rf "$tmp"
  fi
}

# ollama_env: a private model store and HOME (ollama writes ~/.ollama keys).
ollama_env() {
  export HOME="$CACHE/ollama-home" OLLAMA_MODELS="$CACHE/ollama-models"
  mkdir -p "$HOME" "$OLLAMA_MODELS"
}

# wait_up PID URL NAME: print PID once URL answers 200, or fail.
wait_up() {
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$2")" = 200 ] && { echo "$1"; return 0; }
    kill -0 "$1" 2>/dev/null || break
    sleep 0.2
  done
  echo "$3 did not come up on $2" >&2
  kill "$1" 2>/dev/null || true
  return 1
}

case "${1:-}" in
build) build ;;
llama)
  # One thread each (and num_thread 1 in the Modelfile): with two, ggml's
  # threads wait for each other at every step, and on a 2-core machine with
  # anything else running a 40-turn chat took 398 s against 114 s with one.
  # Quiet, the whole real-server step was faster with one: 1,085 s against
  # 1,370 s (BENCHMARKS.md, "One thread per real server").
  "$CACHE/bin/llama-server" -m "$CACHE/models/tiny-wired.gguf" --host 127.0.0.1 --port "$2" \
    -c "$3" -np 1 -t 1 --jinja --alias tiny-wired --no-webui >"$4" 2>&1 &
  wait_up $! "http://127.0.0.1:$2/health" llama-server ;;
ollama)
  ollama_env
  OLLAMA_HOST=127.0.0.1:$2 OLLAMA_NUM_PARALLEL=1 OLLAMA_MAX_LOADED_MODELS=1 OLLAMA_KEEP_ALIVE=30m \
    "$CACHE/bin/ollama" serve >"$3" 2>&1 &
  wait_up $! "http://127.0.0.1:$2/api/version" ollama ;;
*) echo "usage: $0 build | llama PORT CTX LOG | ollama PORT LOG" >&2; exit 2 ;;
esac
