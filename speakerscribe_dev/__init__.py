"""Development tooling, not part of the runtime package: synthetic conversations (festival voices), the AMI
excerpts with their references, accuracy evaluation, random test models, and generated hostile request bodies.
Tests, benchmarks and the set-up scripts use it; a deployment needs only :mod:`speakerscribe` (model preparation
included: :mod:`speakerscribe.models`)."""
