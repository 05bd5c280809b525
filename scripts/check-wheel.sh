#!/usr/bin/env bash
# CI: the wheel as a user gets it. Build it from a clean copy of the sources, install it (not
# editable, without the `local` extra: the README's `pip install .` for remote providers) into a
# fresh venv, then `ragline --help`, and `ragline serve --sample` against the scripted remote model
# (tests/scripted_model.py, run from the checkout's .venv) answering through the API: one answer on
# /chat, one on /knowledge-chat over the sample with its references; then the server is stopped.
# A module the wheel leaves out fails here, although every editable-install test passes.
# PYTHON picks the interpreter of the fresh venv; RAGLINE_WHEELHOUSE where dependency wheels are kept.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
started=$SECONDS
phase() { echo "check-wheel: $1 ($((SECONDS - started)) s)"; }
fail() {
  echo "check-wheel: FAILED: $1" >&2
  for log in "$work"/*.log; do [ -s "$log" ] && { echo "--- $(basename "$log")" >&2; tail -40 "$log" >&2; }; done
  exit 1
}

# A clean copy: setuptools never prunes build/lib, so an old build/ in the checkout would carry a
# package the configuration leaves out into the wheel and hide the fault.
mkdir "$work/src"
(cd "$root" && tar -c --exclude=./.git --exclude=./.venv --exclude=./build --exclude=./dist --exclude='*.egg-info' \
  --exclude=__pycache__ --exclude=.pytest_cache --exclude=.ruff_cache --exclude=.mypy_cache --exclude=.hypothesis --exclude=./.ragline .) \
  | tar -x -C "$work/src"
"$root/.venv/bin/python" -m pip wheel --no-deps -q -w "$work/dist" "$work/src" >"$work/build.log" 2>&1 || fail "pip wheel"
wheel=$(ls "$work"/dist/ragline-*.whl)
phase "built $(basename "$wheel")"

# The dependencies come from a wheelhouse kept between runs: resolving ~100 packages against the
# index costs a minute or more even when pip's cache holds every file. When the wheel asks for one
# the wheelhouse lacks (a new or re-pinned dependency), it is refilled from the index, through pip's
# cache, and the install retried; either way only the base dependencies are installed, no extra.
# --no-compile: byte-compiling every dependency costs more than compiling what serve imports.
wheelhouse=${RAGLINE_WHEELHOUSE:-"$HOME/.cache/ragline/check-wheel"}
mkdir -p "$wheelhouse"
"$python" -m venv "$work/venv"
install() { "$work/venv/bin/pip" install -q --no-compile --no-index --find-links "$wheelhouse" "$wheel" >>"$work/install.log" 2>&1; }
if ! install; then
  phase "refilling the wheelhouse $wheelhouse"
  "$work/venv/bin/pip" wheel -q --find-links "$wheelhouse" -w "$wheelhouse" "$wheel" >>"$work/install.log" 2>&1 || fail "pip wheel (the dependencies)"
  rm -f "$wheelhouse"/ragline-*.whl
  install || fail "pip install $(basename "$wheel")"
fi
phase "installed into a fresh venv"

# From an empty directory: nothing of the checkout on sys.path, no .env read.
mkdir "$work/run"
cd "$work/run"
"$work/venv/bin/ragline" --help >"$work/help.log" 2>&1 || fail "ragline --help"
grep -q "serve" "$work/help.log" || fail "ragline --help does not list serve"

free_port() { "$root/.venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() {  # url, seconds, pid of the process that should answer it
  local deadline=$((SECONDS + $2))
  until curl -sf -o /dev/null "$1"; do
    kill -0 "$3" 2>/dev/null || return 1
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}
reply="the wheel answers"
model_port=$(free_port)
(cd "$root" && exec .venv/bin/python -m tests.scripted_model --port "$model_port" --reply "$reply") >"$work/model.log" 2>&1 &
pids+=($!)
base="http://127.0.0.1:$model_port/v1"
until grep -q "scripted model on" "$work/model.log"; do kill -0 "${pids[0]}" 2>/dev/null || fail "scripted model did not start"; sleep 0.1; done

# --sample: the bundled knowledge base (package data) is indexed through ingestion and the scripted
# embeddings before /health answers, so the knowledge answer below also runs retrieval and citations.
port=$(free_port)
env RAGLINE_DATA_DIR="$work/data" \
  RAGLINE_CHAT_MODEL=openai/scripted RAGLINE_CHAT_API_BASE="$base" RAGLINE_CHAT_API_KEY=scripted-key \
  RAGLINE_EMBEDDING_MODEL=openai/scripted-embed RAGLINE_EMBEDDING_API_BASE="$base" RAGLINE_EMBEDDING_API_KEY=scripted-key \
  "$work/venv/bin/ragline" serve --sample --port "$port" --log-level warning >"$work/serve.log" 2>&1 &
serve_pid=$!
pids+=("$serve_pid")
api="http://127.0.0.1:$port"
wait_for "$api/health" 180 "$serve_pid" || fail "ragline serve did not become healthy"
phase "ragline serve --sample healthy"

json_field() { "$work/venv/bin/python" -c "import json, sys; print($1)"; }  # an expression of `json.load(sys.stdin)`
# One answer on a route, in a new session: the answer a client shows (the `answer` events' deltas
# appended, a `replace` one starting over) must hold the scripted reply, with at least N references.
ask() {  # route, JSON body, N
  local session_id references answer
  session_id=$(curl -sf -X POST "$api/api/v1/sessions" -H 'content-type: application/json' -d '{}' | json_field 'json.load(sys.stdin)["id"]') \
    || fail "POST /api/v1/sessions"
  curl -sfN --max-time 60 -X POST "$api/api/v1/sessions/$session_id/$1" -H 'content-type: application/json' -d "$2" >"$work/$1.sse" \
    || fail "POST /api/v1/sessions/{id}/$1"
  read -r references answer < <("$work/venv/bin/python" - "$work/$1.sse" <<'PY'
import json, sys
text, references = "", 0
for line in open(sys.argv[1], encoding="utf-8"):
    if line.startswith("data:"):
        event = json.loads(line[5:])
        if event.get("response_type") == "answer" and event.get("content"):
            text = event["content"] if (event.get("data") or {}).get("replace") else text + event["content"]
        references += len(event.get("knowledge_references") or [])
print(references, text)
PY
)
  if [[ "$answer" != *"$reply"* || ${references:-0} -lt $3 ]]; then
    cp "$work/$1.sse" "$work/$1.log"
    fail "$1 answered '$answer' with ${references:-no} references, not '$reply' with at least $3"
  fi
  phase "$1 answered '$answer' ($references references)"
}
ask chat '{"query": "Does the installed wheel answer?"}' 0
kb_id=$(curl -sf "$api/api/v1/knowledge-bases" | json_field '[kb["id"] for kb in json.load(sys.stdin)["items"] if kb["name"] == "sample"][0]') \
  || fail "the sample knowledge base is not listed"
# The scripted embeddings are 8-dimensional word hashes that mean nothing, so the relevance gate
# passes a passage on the question's own terms alone: ask one whose terms its passage holds (the
# README's question). "How long does the battery last?" passed only while the hashes happened to favour
# the specs chunk, and was refused once chunk vectors carried the document's title.
ask knowledge-chat "{\"query\": \"How long does pairing the Aurora sensor take?\", \"knowledge_base_ids\": [\"$kb_id\"]}" 1

kill "$serve_pid"
for _ in $(seq 100); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$serve_pid" 2>/dev/null; then fail "ragline serve did not stop within 10 s"; fi
wait "$serve_pid" 2>/dev/null || true
phase "ragline serve stopped; the wheel works"
