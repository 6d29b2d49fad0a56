// k6 load script for the speakerscribe server (Endpoints contract: POST /predict with base64 JSON).
//
//   k6 run -e BASE_URL=http://127.0.0.1:5000 -e AUDIO=samples/meeting.wav \
//          -e PARAMS='{"assisted": true}' -e VUS=1 -e ITERATIONS=10 benchmarks/k6/transcribe.js
//
// Environment: BASE_URL, AUDIO (file path, read once), PARAMS (JSON object of request parameters),
// VUS and ITERATIONS (per-VU iterations, shared-iterations executor), TOKEN (bearer token, optional).
import http from 'k6/http';
import { check } from 'k6';
import encoding from 'k6/encoding';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:5000';
const audio = open(__ENV.AUDIO, 'b');
const body = JSON.stringify({
  inputs: encoding.b64encode(audio),
  parameters: JSON.parse(__ENV.PARAMS || '{}'),
});
const headers = { 'Content-Type': 'application/json' };
if (__ENV.TOKEN) {
  headers.Authorization = `Bearer ${__ENV.TOKEN}`;
}

export const options = {
  scenarios: {
    transcribe: {
      executor: 'shared-iterations',
      vus: Number(__ENV.VUS || 1),
      iterations: Number(__ENV.ITERATIONS || 1),
      maxDuration: __ENV.MAX_DURATION || '20m',
    },
  },
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(95)', 'max'],
  thresholds: { checks: ['rate==1'] },
};

export default function () {
  const res = http.post(`${BASE}/predict`, body, { headers, timeout: '600s' });
  check(res, {
    'status is 200': (r) => r.status === 200,
    'has the original keys': (r) => {
      const j = r.json();
      return typeof j.text === 'string' && Array.isArray(j.chunks) && Array.isArray(j.speakers);
    },
  });
}
