// Live tab: microphone -> AudioWorklet (pcm16, 24 kHz) -> /v1/realtime?intent=transcription (OpenAI's Realtime
// protocol). A browser cannot set headers on a WebSocket: the token goes as the subprotocol
// "openai-insecure-api-key.<token>" beside "realtime", as OpenAI's browser clients send it.
import { clock, currentToken, element, lineContent, speakerClass } from "./common.js";

const RATE = 24000;
const $ = (id) => document.getElementById(id);
let live = null; // {socket, context, stream, node, finishing}
let partials = new Map(); // item_id -> <li> being spoken

function status(text) { $("live-status").textContent = text; }

function websocketUrl() {
  const url = new URL("../v1/realtime?intent=transcription", location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.href;
}

function partialLine(id) {
  if (!partials.has(id)) {
    const li = element("li", { class: "partial" }, element("span", { class: "text" }));
    li.dataset.item = id;
    partials.set(id, li);
    $("live-lines").append(li);
  }
  return partials.get(id);
}

function note(text) { $("live-lines").append(element("li", { class: "event", text })); }

function onEvent(event) {
  switch (event.type) {
    case "input_audio_buffer.speech_started":
      note(`speech started at ${clock(event.audio_start_ms / 1000)}`);
      status("Listening: someone is speaking…");
      break;
    case "input_audio_buffer.speech_stopped":
      note(`speech stopped at ${clock(event.audio_end_ms / 1000)}`);
      status("Listening.");
      break;
    case "conversation.item.input_audio_transcription.delta": {
      const text = partialLine(event.item_id).querySelector(".text");
      text.textContent += event.delta;
      break;
    }
    case "conversation.item.input_audio_transcription.completed": {
      const li = partialLine(event.item_id);
      partials.delete(event.item_id);
      if (!event.transcript.trim()) { li.remove(); break; }
      li.className = `final ${speakerClass(event.speaker)}`;
      li.dataset.speaker = event.speaker || "";
      li.replaceChildren(...lineContent(event.start, event.end, event.speaker, event.transcript));
      break;
    }
    case "transcription.summary": summary(event); break;
    case "error": $("live-error").textContent = event.error.message; break;
    default: break;
  }
}

function summary(event) {
  const speakers = new Set(event.segments.map((s) => s.speaker).filter(Boolean));
  $("summary-text").textContent = `${event.segments.length} turns, ${speakers.size} speaker(s) `
    + `(${[...speakers].join(", ") || "none"}), ${clock(event.duration)} of audio; `
    + (event.rediarized ? "speakers re-diarized over the whole session." : "live speaker labels.");
  $("live-summary").hidden = false;
}

async function start() {
  $("live-error").textContent = "";
  $("live-summary").hidden = true;
  $("live-lines").replaceChildren(); // one session on screen at a time: the summary speaks of these lines
  partials = new Map();
  const token = currentToken();
  if (token && !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(token)) {
    $("live-error").textContent = "This token has characters a WebSocket subprotocol cannot carry.";
    return;
  }
  const button = $("mic");
  button.disabled = true;
  try {
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
    });
    const context = new AudioContext({ sampleRate: RATE });
    await context.audioWorklet.addModule("pcm-worklet.js");
    const node = new AudioWorkletNode(context, "pcm16");
    const protocols = ["realtime", ...(token ? [`openai-insecure-api-key.${token}`] : [])];
    const socket = new WebSocket(websocketUrl(), protocols);
    live = { socket, context, stream, node, finishing: false };
    socket.onopen = () => {
      socket.send(JSON.stringify({ type: "session.update", session: {
        type: "transcription", audio: { input: { format: { type: "audio/pcm", rate: RATE } } } } }));
      node.port.onmessage = (e) => {
        if (socket.readyState === WebSocket.OPEN && !live.finishing) {
          socket.send(JSON.stringify({ type: "input_audio_buffer.append", audio: base64(e.data) }));
        }
      };
      context.createMediaStreamSource(stream).connect(node);
      status("Listening.");
      button.textContent = "Stop";
      button.setAttribute("aria-pressed", "true");
      button.disabled = false;
    };
    socket.onmessage = (e) => onEvent(JSON.parse(e.data));
    socket.onclose = (e) => {
      if (e.code !== 1000 && e.reason) $("live-error").textContent ||= e.reason;
      if (e.code === 1006 && !$("live-error").textContent) $("live-error").textContent = "The connection failed.";
      stopAudio();
      status("Not listening.");
    };
  } catch (error) {
    $("live-error").textContent = error.message || String(error);
    stopAudio();
  }
}

function stopAudio() {
  if (live) {
    live.stream.getTracks().forEach((t) => t.stop());
    live.context.close().catch(() => {});
    live = null;
  }
  const button = $("mic");
  button.textContent = "Start the microphone";
  button.setAttribute("aria-pressed", "false");
  button.disabled = false;
}

function finish() {
  if (!live) return;
  live.finishing = true;
  live.stream.getTracks().forEach((t) => t.stop());
  if (live.socket.readyState === WebSocket.OPEN) live.socket.send(JSON.stringify({ type: "session.finish" }));
  status("Finishing the session…");
  $("mic").disabled = true;
}

function base64(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export function setupLive() {
  $("mic").addEventListener("click", () => (live ? finish() : start()));
}
