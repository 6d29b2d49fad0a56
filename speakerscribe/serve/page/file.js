// File tab: one file and its parameters -> POST /v1/audio/transcriptions (diarized_json) -> timeline, transcript,
// and downloads of every format the API renders, each fetched from the API itself (byte for byte its answer).
import { apiError, authHeaders, clock, element, lineContent, speakerClass } from "./common.js";

const API = "../v1/audio/transcriptions";
const FORMATS = [
  ["diarized_json", "diarized.json"], ["verbose_json", "verbose.json"], ["json", "json"],
  ["text", "txt"], ["srt", "srt"], ["vtt", "vtt"],
];
const $ = (id) => document.getElementById(id);

let request = null; // the last transcribed request: {file, fields}; downloads repeat it with another format
let fetched = new Map(); // format -> Blob, this request's answers

function setStatus(text, busy) {
  $("file-status").textContent = text;
  $("file-progress").hidden = !busy;
  if (busy) $("file-progress").removeAttribute("value");
}

function readDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(new Error(`could not read ${file.name}`));
    reader.readAsDataURL(file);
  });
}

// The form's parameters as the API's fields (only what the user set; the API checks every value).
async function formFields(form) {
  const fields = [];
  for (const name of ["num_speakers", "min_speakers", "max_speakers", "language"]) {
    const value = form.elements[name].value.trim();
    if (value) fields.push([name, value]);
  }
  if (form.elements.word_times.checked) {
    fields.push(["timestamp_granularities[]", "word"], ["timestamp_granularities[]", "segment"]);
  }
  for (const row of document.querySelectorAll(".known-row")) {
    const name = row.querySelector(".known-name").value.trim();
    const clip = row.querySelector(".known-clip").files[0];
    if (!name || !clip) throw new Error("each known speaker needs a name and a clip (or remove the row)");
    fields.push(["known_speaker_names[]", name], ["known_speaker_references[]", await readDataUrl(clip)]);
  }
  return fields;
}

function body(format) {
  const data = new FormData();
  data.append("file", request.file, request.file.name);
  data.append("response_format", format);
  for (const [name, value] of request.fields) data.append(name, value);
  return data;
}

// The first request goes by XMLHttpRequest: fetch cannot report upload progress.
function send(format, onUpload) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", API);
    for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v);
    xhr.responseType = "blob";
    xhr.upload.onprogress = (e) => e.lengthComputable && onUpload(e.loaded / e.total);
    xhr.upload.onload = () => onUpload(1);
    xhr.onload = () => resolve(new Response(xhr.response, { status: xhr.status, statusText: xhr.statusText }));
    xhr.onerror = () => reject(new Error("the server could not be reached"));
    xhr.send(body(format));
  });
}

async function transcribe(event) {
  event.preventDefault();
  const form = event.target;
  const file = $("file").files[0];
  $("file-error").textContent = "";
  if (!file) { $("file-error").textContent = "Choose an audio file first."; $("file").focus(); return; }
  const button = $("transcribe");
  button.disabled = true;
  const started = performance.now();
  let timer = null;
  try {
    request = { file, fields: await formFields(form) };
    fetched = new Map();
    const response = await send("diarized_json", (part) => {
      if (part < 1) { setStatus(`Uploading… ${Math.round(part * 100)} %`, true); return; }
      if (timer) return;
      timer = setInterval(() => setStatus(`Transcribing… ${Math.round((performance.now() - started) / 1000)} s`, true), 500);
      setStatus("Transcribing…", true);
    });
    if (!response.ok) throw new Error(await apiError(response));
    const blob = await response.blob();
    fetched.set("diarized_json", blob);
    show(JSON.parse(await blob.text()), file);
    setStatus(`Done in ${((performance.now() - started) / 1000).toFixed(1)} s.`, false);
  } catch (error) {
    setStatus("", false);
    $("file-error").textContent = error.message;
  } finally {
    clearInterval(timer);
    button.disabled = false;
  }
}

function play(at) {
  const player = $("player");
  player.currentTime = at;
  player.play().catch(() => {}); // autoplay may be refused; the position is set either way
}

function show(result, file) {
  const player = $("player");
  if (player.src) URL.revokeObjectURL(player.src);
  player.src = URL.createObjectURL(file);
  const segments = result.segments.filter((s) => s.text);
  const duration = result.duration || Math.max(1, ...segments.map((s) => s.end));
  const speakers = [...new Set(segments.map((s) => s.speaker || "unknown"))];
  const timeline = $("timeline");
  timeline.replaceChildren();
  for (const speaker of speakers) {
    const lane = element("div", { class: "lane", role: "group", "aria-label": `${speaker}'s turns` });
    lane.dataset.speaker = speaker;
    for (const s of segments.filter((x) => (x.speaker || "unknown") === speaker)) {
      const label = `${speaker} ${clock(s.start)} to ${clock(s.end)}: ${s.text}`;
      const bar = element("button", { class: `bar ${speakerClass(speaker)}`, title: label, "aria-label": label,
                                      onclick: () => play(s.start) });
      bar.style.left = `${(100 * s.start) / duration}%`;
      bar.style.width = `${(100 * (s.end - s.start)) / duration}%`;
      Object.assign(bar.dataset, { start: s.start, end: s.end, speaker });
      lane.append(bar);
    }
    timeline.append(element("span", { class: `lane-name ${speakerClass(speaker)}`, text: speaker }), lane);
  }
  $("transcript").replaceChildren(...segments.map((s) => {
    const line = element("li", { class: speakerClass(s.speaker), "data-start": s.start, "data-end": s.end },
      element("button", { type: "button", onclick: () => play(s.start) }, ...lineContent(s.start, s.end, s.speaker, s.text)));
    return line;
  }));
  showDownloads(file.name.replace(/\.[^.]+$/, "") || "transcript");
  $("result").hidden = false;
}

function showDownloads(stem) {
  const box = $("downloads");
  box.replaceChildren(...FORMATS.map(([format, ext]) => element("button", {
    type: "button", text: ext.toUpperCase(), "aria-label": `Download ${format}`,
    onclick: (e) => download(format, `${stem}.${ext}`, e.target),
  })));
}

async function download(format, name, button) {
  $("file-error").textContent = "";
  button.disabled = true;
  try {
    if (!fetched.has(format)) {
      setStatus(`Preparing ${name}…`, true);
      const response = await fetch(API, { method: "POST", headers: authHeaders(), body: body(format) });
      if (!response.ok) throw new Error(await apiError(response));
      fetched.set(format, await response.blob());
      setStatus(`${name} ready.`, false);
    }
    let link = document.querySelector(`#downloads a[data-format="${format}"]`);
    if (!link) {
      link = element("a", { download: name, text: name, "data-format": format });
      link.href = URL.createObjectURL(fetched.get(format));
      $("downloads").append(link);
    }
    link.click();
  } catch (error) {
    setStatus("", false);
    $("file-error").textContent = error.message;
  } finally {
    button.disabled = false;
  }
}

export function setupFile() {
  const drop = $("drop");
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    if (e.dataTransfer.files.length) $("file").files = e.dataTransfer.files;
  });
  $("add-known").addEventListener("click", () => {
    const row = $("known-row").content.firstElementChild.cloneNode(true);
    row.querySelector(".remove-known").addEventListener("click", () => row.remove());
    $("known-rows").append(row);
    row.querySelector(".known-name").focus();
  });
  $("file-form").addEventListener("submit", transcribe);
  // the turn being played is marked in the timeline and the transcript
  $("player").addEventListener("timeupdate", () => {
    const t = $("player").currentTime;
    for (const el of $("result").querySelectorAll("[data-start]")) {
      el.classList.toggle("playing", Number(el.dataset.start) <= t && t < Number(el.dataset.end));
    }
  });
}
