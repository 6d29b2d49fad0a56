// k6 soak: mixed short, long and invalid requests at a few virtual users, plus a burst past the queue.
//
//   k6 run -e BASE_URL=http://127.0.0.1:5000 -e DIR=/tmp/soak -e DURATION=10m -e VUS=3 benchmarks/k6/soak.js
//
// DIR holds short.wav, long.wav and the invalid bodies (ffconcat.txt, junk.bin, sdp.txt), written by
// benchmarks/soak.py. Scenario `mixed` (VUS users for DURATION): 60% short clips, 20% long clips, 20% invalid
// requests (demuxer tricks, junk, out-of-range parameters); every answer must be 200 (valid) or 4xx (invalid).
// Scenario `burst` (BURST requests at once, at BURST_AT): more than the queue holds; every answer must be 200 or
// 503 with Retry-After. Per-kind latencies are tagged `kind`.
import http from 'k6/http';
import { check } from 'k6';
import { Counter } from 'k6/metrics';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:5000';
const DIR = __ENV.DIR;
const shortClip = open(`${DIR}/short.wav`, 'b');
const longClip = open(`${DIR}/long.wav`, 'b');
const invalid = [
  { body: open(`${DIR}/ffconcat.txt`, 'b'), query: '' },
  { body: open(`${DIR}/junk.bin`, 'b'), query: '' },
  { body: open(`${DIR}/sdp.txt`, 'b'), query: '' },
  { body: shortClip, query: '?chunk_length_s=0.000001&vad_filter=false' },
  { body: shortClip, query: '?batch_size=' + '9'.repeat(5000) },
];
const serverErrors = new Counter('server_errors');
const refused = new Counter('refused');

export const options = {
  scenarios: {
    mixed: { executor: 'constant-vus', vus: Number(__ENV.VUS || 3), duration: __ENV.DURATION || '10m', exec: 'mixed' },
    burst: {
      executor: 'per-vu-iterations',
      vus: Number(__ENV.BURST || 20),
      iterations: 1,
      startTime: __ENV.BURST_AT || '5m',
      exec: 'burst',
      maxDuration: '10m',
    },
  },
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(95)', 'max'],
  thresholds: {
    checks: ['rate==1'],
    server_errors: ['count==0'],
    'http_req_duration{kind:short}': ['p(95)<600000'],
    'http_req_duration{kind:long}': ['p(95)<600000'],
    'http_req_duration{kind:invalid}': ['p(95)<600000'],
    'http_req_duration{kind:burst}': ['p(95)<600000'],
  },
};

function post(body, query, kind) {
  return http.post(`${BASE}/predict${query}`, body, {
    headers: { 'Content-Type': 'audio/wav' },
    timeout: '600s',
    tags: { kind },
  });
}

export function mixed() {
  const roll = Math.random();
  if (roll < 0.6 || roll >= 0.8) {
    const kind = roll < 0.6 ? 'short' : 'long';
    const res = post(kind === 'short' ? shortClip : longClip, '', kind);
    if (res.status >= 500) serverErrors.add(1);
    check(res, { 'valid audio: 200 with a transcript': (r) => r.status === 200 && typeof r.json().text === 'string' });
  } else {
    const bad = invalid[Math.floor(Math.random() * invalid.length)];
    const res = post(bad.body, bad.query, 'invalid');
    if (res.status >= 500) serverErrors.add(1);
    check(res, { 'invalid: 4xx with an error': (r) => r.status >= 400 && r.status < 500 && !!r.json().error });
  }
}

export function burst() {
  const res = post(shortClip, '', 'burst');
  if (res.status === 503) refused.add(1);
  else if (res.status >= 500) serverErrors.add(1);
  check(res, {
    'burst: 200, or 503 with Retry-After': (r) =>
      r.status === 200 || (r.status === 503 && !!r.headers['Retry-After']),
  });
}
