"""The page at ``/ui`` in a real browser: Debian's headless Chromium driven by Selenium (no browser download)
against a real server on loopback with real weights (tiny.en + the offline diarizer) and ``API_TOKEN`` set. The
file flow with the festival meeting (timeline lanes and bars = the API's speaker entries, downloads byte-identical
to the API's answers, the API's errors shown in its words) and the live flow with Chromium's fake microphone playing
the same meeting (partials, finals with speaker labels, the summary). Screenshots go to .cache/ui-screenshots/."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import requests
from conftest import CACHE
from test_server import Server
from test_streaming import live_env, ws_connect

pytestmark = pytest.mark.slow

TOKEN = "ui-s3cret-token"
SHOTS = CACHE / "ui-screenshots"
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--autoplay-policy=no-user-gesture-required",
)  # fmt: skip


@pytest.fixture(scope="module")
def ui_server(real_models, tmp_path_factory):
    s = Server(live_env(real_models, API_TOKEN=TOKEN, MAX_STREAMS="2"), tmp_path_factory.mktemp("ui") / "server.log")
    s.wait_ready()
    yield s
    s.stop()


def chromium(tmp_path: Path, *extra: str, size=(1100, 1400)):
    """A fresh headless Chromium (its own profile and download folder) driven through Debian's chromedriver."""
    missing = [p for p in (CHROMIUM, DRIVER) if shutil.which(p) is None]
    assert not missing, f"{missing} missing: apt-get install chromium chromium-driver (scripts/setup.sh does)"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={size[0]},{size[1]}", *extra):
        options.add_argument(flag)
    (tmp_path / "downloads").mkdir(exist_ok=True)
    prefs = {"download.default_directory": str(tmp_path / "downloads"), "download.prompt_for_download": False}
    options.add_experimental_option("prefs", prefs)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(DRIVER))


def page_errors(driver) -> list[str]:
    """What the page logged as errors (a failed script, a refused CSP rule, a 404)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def wait(driver, condition, timeout: float, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.25).until(lambda d: condition(d))
    except Exception:
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOTS / f"failed-{what.replace(' ', '-')}.png"))
        raise AssertionError(f"{what} within {timeout} s; page errors: {page_errors(driver)}") from None


def text(driver, element_id: str) -> str:
    return driver.find_element("id", element_id).text


def api(server, fmt: str, path: Path, **fields) -> requests.Response:
    with open(path, "rb") as f:
        return requests.post(
            server.url + "/v1/audio/transcriptions",
            headers={"Authorization": f"Bearer {TOKEN}"},
            files={"file": (path.name, f, "audio/wav")},
            data={"response_format": fmt, **fields},
            timeout=600,
        )


def downloaded(folder: Path, name: str, timeout: float = 30) -> bytes:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (folder / name).is_file() and not list(folder.glob("*.crdownload")):
            return (folder / name).read_bytes()
        time.sleep(0.2)
    raise AssertionError(f"{name} was not downloaded; the folder has {sorted(p.name for p in folder.iterdir())}")


# ------------------------------------------------------------------------------------------- the routes
def test_page_is_public_and_strict_and_the_api_is_not(ui_server):
    r = requests.get(ui_server.url + "/ui", allow_redirects=False, timeout=10)
    assert r.status_code == 308 and r.headers["location"].endswith("/ui/")
    page = requests.get(ui_server.url + "/ui/", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"] and "<title>" in page.text
    for name, kind in (("app.js", "javascript"), ("pcm-worklet.js", "javascript"), ("style.css", "text/css")):
        r = requests.get(f"{ui_server.url}/ui/{name}", timeout=10)
        assert r.status_code == 200 and kind in r.headers["content-type"], name
    for path in ("/ui/../handler.py", "/ui/%2e%2e/handler.py", "/ui/nope.js"):
        assert requests.get(ui_server.url + path, timeout=10).status_code == 404, path
    for path in ("/", "/health"):  # the Endpoints contract keeps / for health
        assert requests.get(ui_server.url + path, timeout=10).text == "Ok"
    r = requests.post(ui_server.url + "/v1/audio/transcriptions", files={"file": ("a.wav", b"x")}, timeout=10)
    assert r.status_code == 401


def test_browser_websocket_token_goes_in_a_subprotocol(ui_server):
    """A browser cannot set headers on a WebSocket: the token comes as ``openai-insecure-api-key.<token>`` beside
    ``realtime``; the server picks ``realtime`` (a browser fails a connection whose server picks none)."""
    from websockets.exceptions import ConnectionClosed

    path = "/v1/realtime?intent=transcription"
    with ws_connect(ui_server, path, subprotocols=["realtime", f"openai-insecure-api-key.{TOKEN}"]) as ws:
        assert ws.subprotocol == "realtime" and json.loads(ws.recv())["type"] == "session.created"
    with ws_connect(ui_server, path, subprotocols=["realtime", "openai-insecure-api-key.wrong"]) as ws:
        refused = json.loads(ws.recv())
        assert refused["error"]["code"] == "unauthorized" and ws.subprotocol == "realtime"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd.code == 1008
    with ws_connect(ui_server, "/ws", subprotocols=[f"openai-insecure-api-key.{TOKEN}"]) as ws:
        assert json.loads(ws.recv())["type"] == "ready" and ws.subprotocol is None  # the token is never echoed


# ---------------------------------------------------------------------------------------- in the browser
def test_file_flow_timeline_downloads_and_errors(ui_server, meeting, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver = chromium(tmp_path)
    try:
        driver.get(ui_server.url + "/ui/")
        # every control has a name a screen reader can say
        unnamed = driver.execute_script(
            "return [...document.querySelectorAll('input, button')].filter(e => !(e.labels && e.labels.length)"
            " && !e.getAttribute('aria-label') && !e.textContent.trim()).map(e => e.outerHTML)"
        )
        assert unnamed == []
        driver.find_element(By.ID, "tab-file").send_keys(Keys.ARROW_RIGHT)  # the tabs answer the keyboard
        assert driver.find_element(By.ID, "panel-live").is_displayed()
        driver.find_element(By.ID, "tab-live").send_keys(Keys.ARROW_LEFT)
        form = {"num_speakers": "2", "max_speakers": "1"}
        driver.find_element(By.ID, "file").send_keys(str(meeting.wav))
        for name, value in form.items():
            driver.find_element(By.NAME, name).send_keys(value)
        driver.find_element(By.ID, "transcribe").click()  # no token yet: the API's 401, in its words
        expected = requests.post(ui_server.url + "/v1/audio/transcriptions", timeout=10).json()["error"]["message"]
        wait(driver, lambda d: text(d, "file-error") == expected, 30, "the 401 message shown")
        driver.find_element(By.ID, "token").send_keys(TOKEN)
        driver.find_element(By.ID, "transcribe").click()  # 2 speakers exactly but at most 1: the API refuses
        expected = api(ui_server, "diarized_json", meeting.wav, **form).json()["error"]["message"]
        wait(driver, lambda d: text(d, "file-error") == expected, 30, "the 400 message shown")
        refused = page_errors(driver)  # the browser logs the two refused requests, and nothing else went wrong
        assert len(refused) == 2 and "401" in refused[0] and "400" in refused[1], refused
        driver.find_element(By.NAME, "num_speakers").clear()
        driver.find_element(By.NAME, "max_speakers").clear()
        driver.find_element(By.NAME, "max_speakers").send_keys("3")
        driver.find_element(By.ID, "transcribe").click()
        wait(driver, lambda d: text(d, "file-status").startswith(("Uploading", "Transcribing")), 30, "progress")
        assert driver.find_element(By.ID, "file-progress").is_displayed()
        wait(driver, lambda d: d.find_element(By.ID, "result").is_displayed(), 600, "the transcript")
        assert text(driver, "file-error") == "" and not driver.find_element(By.ID, "file-progress").is_displayed()
        answer = api(ui_server, "diarized_json", meeting.wav, max_speakers="3")
        segments = [s for s in answer.json()["segments"] if s["text"]]
        lanes = driver.execute_script("return [...document.querySelectorAll('.lane')].map(l => l.dataset.speaker)")
        bars = driver.execute_script(
            "return [...document.querySelectorAll('.bar')].map(b => [b.dataset.speaker, +b.dataset.start, "
            "+b.dataset.end, b.offsetLeft, b.offsetWidth, b.parentElement.offsetWidth])"
        )
        assert lanes == ["SPEAKER_00", "SPEAKER_01"]
        assert sorted(b[:3] for b in bars) == sorted([s["speaker"], s["start"], s["end"]] for s in segments)
        duration = answer.json()["duration"]
        for _, start, end, left, width, lane in bars:  # drawn where they are in time
            assert abs(left - lane * start / duration) <= 2 and abs(width - lane * (end - start) / duration) <= 2
        lines = driver.find_elements(By.CSS_SELECTOR, "#transcript li")
        assert [line.find_element(By.CLASS_NAME, "who").text for line in lines] == [s["speaker"] for s in segments]
        assert "good morning" in lines[0].text.lower()
        bar = driver.find_elements(By.CSS_SELECTOR, ".lane[data-speaker=SPEAKER_01] .bar")[1]
        bar.click()  # plays that moment
        at = float(bar.get_attribute("data-start"))
        wait(driver, lambda d: abs(d.execute_script("return player.currentTime") - at) < 1.0, 20, "the seek")
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.execute_script("player.pause(); window.scrollTo(0, 0)")
        driver.save_screenshot(str(SHOTS / "ui-file.png"))
        # downloads in every format: the answer already fetched, and each other one fetched on demand; every one
        # exactly what the API answers
        folder = tmp_path / "downloads"
        driver.find_element(By.CSS_SELECTOR, "#downloads button[aria-label='Download diarized_json']").click()
        assert downloaded(folder, "meeting.diarized.json") == answer.content
        formats = {"verbose_json": "verbose.json", "json": "json", "text": "txt", "srt": "srt", "vtt": "vtt"}
        for response_format, ext in formats.items():
            driver.find_element(By.CSS_SELECTOR, f"#downloads button[aria-label='Download {response_format}']").click()
            got = downloaded(folder, f"meeting.{ext}", timeout=600)
            assert got == api(ui_server, response_format, meeting.wav, max_speakers="3").content, response_format
            assert got.strip(), response_format
        assert b"SPEAKER_01: " in (folder / "meeting.srt").read_bytes()
        # a phone's width: nothing sticks out sideways
        driver.set_window_size(390, 844)
        assert driver.execute_script("return document.documentElement.scrollWidth") <= 390
        assert page_errors(driver) == []
    finally:
        driver.quit()


def test_live_flow_with_a_fake_microphone(ui_server, meeting, tmp_path):
    import soundfile as sf
    from selenium.webdriver.common.by import By

    # Chromium loops the file: the meeting's first three turns, then silence, which costs the server only its VAD
    # (a busy machine must not fall minutes behind a microphone that never stops)
    samples, rate = sf.read(str(meeting.wav), dtype="int16")
    talk = samples[: int(meeting.turns[2].end * rate) + rate // 2]
    wav = tmp_path / "three-turns.wav"
    sf.write(str(wav), np.concatenate([talk, np.zeros(30 * rate, dtype=np.int16)]), rate, subtype="PCM_16")
    fake_mic = ("--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                f"--use-file-for-fake-audio-capture={wav}")  # fmt: skip
    driver = chromium(tmp_path, *fake_mic, size=(1000, 760))
    try:
        driver.get(ui_server.url + "/ui/")
        driver.find_element(By.ID, "token").send_keys(TOKEN)
        driver.find_element(By.ID, "tab-live").click()
        # every partial the page shows, seen as it is drawn
        driver.execute_script(
            "window.partialsSeen = [];"
            "new MutationObserver(() => document.querySelectorAll('#live-lines li.partial').forEach("
            "  li => li.textContent.trim() && partialsSeen.push(li.textContent.trim())))"
            ".observe(document.getElementById('live-lines'), {subtree: true, childList: true, characterData: true});"
        )
        driver.find_element(By.ID, "mic").click()
        wait(driver, lambda d: d.find_element(By.ID, "mic").get_attribute("aria-pressed") == "true", 30, "listening")

        def finals(d):
            return d.execute_script(
                "return [...document.querySelectorAll('#live-lines li.final')].map(l => [l.dataset.speaker,"
                " l.querySelector('.text').textContent])"
            )

        # stop as soon as both speakers have a final and a partial was shown: on a busy machine every second of
        # audio sent beyond that is work the server must finish before the summary
        def heard(d) -> bool:
            both = {s for s, _ in finals(d)} == {"SPEAKER_00", "SPEAKER_01"}
            return both and d.execute_script("return partialsSeen.length") > 0

        wait(driver, heard, 400, "partials and finals from both speakers")
        SHOTS.mkdir(parents=True, exist_ok=True)
        partial_on_screen = "return [...document.querySelectorAll('#live-lines li.partial')].some(l => l.textContent)"
        deadline = time.time() + 8  # the picture is best with a turn being spoken (grey) below the finals
        while time.time() < deadline and not driver.execute_script(partial_on_screen):
            time.sleep(0.1)
        driver.save_screenshot(str(SHOTS / "ui-live.png"))
        driver.find_element(By.ID, "mic").click()  # stop: the session is finished and summed up
        wait(driver, lambda d: d.find_element(By.ID, "live-summary").is_displayed(), 400, "the summary")
        got = finals(driver)
        assert got[0][0] == "SPEAKER_00" and "good morning" in got[0][1].lower(), got
        assert got[1][0] == "SPEAKER_01" and "happy to be here" in got[1][1].lower(), got
        assert "budget" in got[2][1].lower() and got[2][0] == "SPEAKER_00", got
        summary = text(driver, "summary-text")
        assert summary.startswith(f"{len(got)} turns, 2 speaker(s) (SPEAKER_00, SPEAKER_01)"), summary
        notes = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#live-lines li.event")]
        assert notes and notes[0].startswith("speech started at 0:0") and "speech stopped" in notes[1], notes
        assert text(driver, "live-error") == "" and page_errors(driver) == []
    finally:
        driver.quit()
