// What both tabs share: the token (page memory only), speaker colours, times, the API's error words.

let token = "";
export function setToken(value) { token = value.trim(); }
export function authHeaders() { return token ? { Authorization: `Bearer ${token}` } : {}; }
export function currentToken() { return token; }

// one colour class per speaker, in order of appearance (the same speaker keeps its colour)
const colours = new Map();
export function speakerClass(speaker) {
  const key = speaker || "unknown";
  if (!colours.has(key)) colours.set(key, colours.size % 8);
  return `spk-${colours.get(key)}`;
}

export function clock(seconds) {
  const s = Math.max(0, seconds);
  const m = Math.floor(s / 60);
  return `${m}:${(s - m * 60).toFixed(1).padStart(4, "0")}`;
}

// The API's own message: OpenAI's {error: {message}}, the Endpoints {error: "..."}, else the status line.
export async function apiError(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    const message = typeof body.error === "string" ? body.error : body.error && body.error.message;
    if (message) return message;
  } catch (_) { /* not JSON: fall through */ }
  return `${response.status} ${response.statusText}${text ? ": " + text.slice(0, 300) : ""}`;
}

export function element(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "text") el.textContent = value;
    else el.setAttribute(key, value);
  }
  el.append(...children);
  return el;
}

// One transcript line: "0:01.5  SPEAKER_00  text"
export function lineContent(start, end, speaker, text) {
  return [
    element("span", { class: "when", text: `${clock(start)}–${clock(end)}` }),
    element("span", { class: "who", text: speaker || "?" }),
    element("span", { class: "text", text: text.trim() }),
  ];
}
