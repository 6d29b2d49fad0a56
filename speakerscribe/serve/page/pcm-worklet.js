// AudioWorklet: the microphone's float frames -> 100 ms blocks of pcm16 (little-endian) at 24 kHz, posted to the
// page. The AudioContext is asked for 24 kHz; if the browser runs it at another rate, frames are resampled here
// by linear interpolation (speech survives it; the server low-passes again when it resamples to 16 kHz).
const TARGET = 24000;
const BLOCK = TARGET / 10;

class Pcm16Processor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / TARGET; // input samples per output sample
    this.position = 0; // where the next output sample falls, in input samples from the held one
    this.held = 0; // the last input sample of the previous frame
    this.out = new Int16Array(BLOCK);
    this.filled = 0;
  }

  push(value) {
    const v = Math.max(-1, Math.min(1, value));
    this.out[this.filled++] = v < 0 ? v * 0x8000 : v * 0x7fff;
    if (this.filled === BLOCK) {
      this.port.postMessage(this.out.buffer, [this.out.buffer]);
      this.out = new Int16Array(BLOCK);
      this.filled = 0;
    }
  }

  process(inputs) {
    const input = inputs[0] && inputs[0][0];
    if (!input) return true;
    if (this.step === 1) {
      for (let i = 0; i < input.length; i++) this.push(input[i]);
      return true;
    }
    // samples: held (index -1), input[0..n-1]; interpolate at position - 1 + k*step
    while (this.position < input.length) {
      const i = Math.floor(this.position);
      const frac = this.position - i;
      const a = i === 0 ? this.held : input[i - 1];
      const b = input[i];
      this.push(a + (b - a) * frac);
      this.position += this.step;
    }
    this.position -= input.length;
    this.held = input[input.length - 1];
    return true;
  }
}

registerProcessor("pcm16", Pcm16Processor);
