#!/usr/bin/env bash
# The main job on the offline default: set up, synthesise a two-speaker meeting, transcribe and diarize it,
# print who said what, when. Extra arguments go to the CLI (e.g. --format srt).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PYANNOTE_METRICS_ENABLED=false HF_HUB_OFFLINE=1
export ASR_MODEL=${ASR_MODEL:-models/whisper-base} ASSISTANT_MODEL=${ASSISTANT_MODEL:-models/whisper-base-draft}
export DIARIZATION_MODEL=${DIARIZATION_MODEL:-models/diarization}
sample=samples/meeting.wav
.venv/bin/python -c "from speakerscribe_dev.conversation import MEETING, synthesize; synthesize(MEETING, 'samples', 'meeting')"
echo "== transcribing $sample with $ASR_MODEL + $DIARIZATION_MODEL"
.venv/bin/python -m speakerscribe.cli "$sample" --return-timestamps word --group-by-speaker true "$@"
