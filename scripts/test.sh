#!/usr/bin/env bash
# Set up (as scripts/setup.sh) and run the whole test suite, slow real-weight tests included; then the handler and
# accuracy tests again on the lowest versions requirements.txt allows (scripts/test-min-versions.sh; skipped with
# SKIP_MIN_VERSIONS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
# two virtual environments (CI pins and the minimum versions), models and data take about 16 GB: say so up front
# rather than failing half-way through an install with "No space left on device"
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "${free_kb:-0}" -lt $((20 * 1024 * 1024)) ]; then
  echo "warning: only $((free_kb / 1024)) MB free on $(df -P . | awk 'NR==2 {print $6}'); the set-up needs about 16 GB" >&2
fi
bash scripts/setup.sh
export PYANNOTE_METRICS_ENABLED=false HF_HUB_OFFLINE=1
.venv/bin/python -m pytest "$@"
if [ "${SKIP_MIN_VERSIONS:-0}" != "1" ]; then
  bash scripts/test-min-versions.sh "$@"
fi
