#!/usr/bin/env bash
# The demo after set-up (scripts/demo.sh runs scripts/setup.sh, then this; tests/test_quiet_output.py runs this as
# it is): one line per step, a progress bar on a terminal, then the transcript. Extra arguments go to the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYANNOTE_METRICS_ENABLED=false HF_HUB_OFFLINE=1
export ASR_MODEL=${ASR_MODEL:-models/whisper-base} ASSISTANT_MODEL=${ASSISTANT_MODEL:-models/whisper-base-draft}
export DIARIZATION_MODEL=${DIARIZATION_MODEL:-models/diarization}
sample=samples/meeting.wav
echo "== writing a two-speaker meeting to $sample (festival voices)"
.venv/bin/python -c "from speakerscribe_dev.conversation import MEETING, synthesize; synthesize(MEETING, 'samples', 'meeting')"
echo "== transcribing $sample with $ASR_MODEL (draft: $ASSISTANT_MODEL) + $DIARIZATION_MODEL"
.venv/bin/python -m speakerscribe.cli "$sample" --return-timestamps word --group-by-speaker true "$@"
