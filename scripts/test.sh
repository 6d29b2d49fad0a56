#!/usr/bin/env bash
# Set up (as scripts/setup.sh) and run the whole test suite, slow real-weight tests included; then the handler and
# accuracy tests again on the lowest versions requirements.txt allows (scripts/test-min-versions.sh; skipped with
# SKIP_MIN_VERSIONS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYANNOTE_METRICS_ENABLED=false HF_HUB_OFFLINE=1
.venv/bin/python -m pytest "$@"
if [ "${SKIP_MIN_VERSIONS:-0}" != "1" ]; then
  bash scripts/test-min-versions.sh "$@"
fi
