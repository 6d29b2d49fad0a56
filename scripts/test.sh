#!/usr/bin/env bash
# Set up (as scripts/setup.sh) and run the whole test suite, slow real-weight tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYANNOTE_METRICS_ENABLED=false HF_HUB_OFFLINE=1
.venv/bin/python -m pytest "$@"
