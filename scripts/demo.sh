#!/usr/bin/env bash
# The main job on the offline default: set up, then scripts/demo-run.sh (synthesise a two-speaker meeting, transcribe
# and diarize it, print who said what, when). Extra arguments go to the CLI (e.g. --format srt).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== setting up: speech synthesiser, Python packages, offline models (the first run takes a few minutes)"
bash scripts/setup.sh
bash scripts/demo-run.sh "$@"
