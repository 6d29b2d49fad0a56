#!/usr/bin/env bash
# The handler tests, the real-weight accuracy test, the int8 screen, the packed decoder and speech detection on the
# lowest versions requirements.txt allows (constraints-min.txt), in a virtual environment of their own (.venv-min).
# Needs the models and data that scripts/setup.sh prepares. Also checks that installing requirements.txt over those
# versions installs nothing (the Endpoints runtime does that install at every start: a range that pulled a newer
# torch would reinstall it).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-min
. scripts/venv.sh
ensure_venv "$VENV" constraints-min.txt
"$VENV/bin/python" -m pip list --disable-pip-version-check 2>/dev/null \
  | grep -Ei "^(torch|torchaudio|torchcodec|transformers|pyannote.audio) " | sed 's/^/   /'
echo "== pip install -r requirements.txt over them (dry run): nothing may be installed"
plan=$("$VENV/bin/python" -m pip install --disable-pip-version-check --dry-run -r requirements.txt 2>&1 \
  | grep -v "is ignored: it is neither a file nor a directory")
if grep -q "Would install" <<<"$plan"; then
  echo "$plan" | grep "Would install"
  echo "FAILED: requirements.txt would change the installed packages" >&2
  exit 1
fi
echo "   nothing to install"
export PYANNOTE_METRICS_ENABLED=false HF_HUB_OFFLINE=1
"$VENV/bin/python" -m pytest -p no:cacheprovider tests/test_handler.py tests/test_compat.py tests/test_greedy.py tests/test_steps.py \
  tests/test_real_speech.py tests/test_screened.py tests/test_packed.py tests/test_windows_and_vad.py "$@"
