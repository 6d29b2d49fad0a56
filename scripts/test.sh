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
# The container image test (tests/test_image.py: a real podman build, then the container run as Endpoints runs it)
# spends most of its 8-14 minutes on pip and disk, so a whole-suite run starts it beside the rest of the suite (its own
# cache folder and no pytest cache, so the two never write the same file) and prints its log afterwards. Runs that
# name tests (any argument that is not an option) run just those, in one pytest.
whole_suite=1
for arg in "$@"; do [[ "$arg" == -* ]] || whole_suite=0; done
min_pid=""
# .venv-min (scripts/test-min-versions.sh, after the suite) is four minutes of pip, mostly download and disk: build it
# beside the suite when the disk has room for it and the image test together (about 5 + 8 GB, with margin), else after.
free_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "$whole_suite" = 1 ] && [ "${SKIP_MIN_VERSIONS:-0}" != "1" ] && [ "${free_kb:-0}" -gt $((20 * 1024 * 1024)) ]; then
  # Its log is printed afterwards; if it fails, test-min-versions.sh tries again and says why.
  min_log=$(mktemp)
  (. scripts/venv.sh && ensure_venv .venv-min constraints-min.txt) >"$min_log" 2>&1 &
  min_pid=$!
fi
if [ "$whole_suite" = 1 ]; then
  image_log=$(mktemp)
  SPEAKERSCRIBE_CACHE="$PWD/.cache/image-test" .venv/bin/python -m pytest -p no:cacheprovider tests/test_image.py "$@" \
    >"$image_log" 2>&1 &
  image_pid=$!
  suite_status=0
  .venv/bin/python -m pytest --ignore=tests/test_image.py "$@" || suite_status=$?
  image_status=0
  wait "$image_pid" || image_status=$?
  echo "== tests/test_image.py (ran beside the suite)"
  cat "$image_log"
  rm -f "$image_log"
  if [ "$suite_status" != 0 ] || [ "$image_status" != 0 ]; then
    echo "FAILED: the suite exited $suite_status, the image test $image_status" >&2
    exit 1
  fi
else
  .venv/bin/python -m pytest "$@"
fi
if [ "${SKIP_MIN_VERSIONS:-0}" != "1" ]; then
  if [ -n "$min_pid" ]; then
    wait "$min_pid" || echo "building .venv-min beside the suite failed; test-min-versions.sh tries again" >&2
    echo "== .venv-min (built beside the suite)"
    cat "$min_log"
    rm -f "$min_log"
  fi
  bash scripts/test-min-versions.sh "$@"
fi
