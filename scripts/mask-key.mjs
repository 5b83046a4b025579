// Keeps the demo server's API key out of everything it sends to the browser: error texts,
// JSON answers (where the key may be escaped, e.g. `sk\u002d…`) and streamed answers, in
// which a model echoing the key spreads it over many server-sent events, a few characters
// each, so no single chunk contains it.
//
//   maskText(text, key)      plain text
//   maskBody(text, key)      a response body: JSON strings decoded and masked, else maskText
//   new StreamMask(key)      .push(chunk) / .end() for a text/event-stream of chat completions

const MASK = "***";

/** Whether `key` is worth masking (a very short one would mask ordinary words). */
const maskable = (key) => typeof key === "string" && key.length >= 6;

/** `text` with every occurrence of `key` replaced by `***`. */
export function maskText(text, key) {
  return maskable(key) ? text.split(key).join(MASK) : text;
}

/** Masks every string inside a parsed JSON value, in place; true if one changed. */
function maskStrings(value, key) {
  let changed = false;
  const visit = (v) => {
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        if (typeof v[i] === "string") {
          const m = maskText(v[i], key);
          if (m !== v[i]) ((v[i] = m), (changed = true));
        } else visit(v[i]);
      }
    } else if (v && typeof v === "object") {
      for (const k of Object.keys(v)) {
        if (typeof v[k] === "string") {
          const m = maskText(v[k], key);
          if (m !== v[k]) ((v[k] = m), (changed = true));
        } else visit(v[k]);
      }
    }
  };
  visit(value);
  return changed;
}

/** A whole response body: JSON is parsed and its strings masked (re-serialised only when
 * something was masked); anything else is masked as text. */
export function maskBody(text, key) {
  if (!maskable(key)) return text;
  try {
    const value = JSON.parse(text);
    return maskStrings(value, key) ? JSON.stringify(value) : maskText(text, key);
  } catch {
    return maskText(text, key);
  }
}

/** The fields of a streamed chat-completion delta whose text is sent in pieces. */
const PIECEWISE = ["content", "reasoning_content", "reasoning", "refusal"];

/**
 * Masks a `text/event-stream` of OpenAI chat-completion chunks as it passes. Per choice and
 * per piecewise field (content, reasoning, tool-call arguments), the text the browser has
 * not been sent yet is held back while it could still be the start of the key, so a key
 * split over events is masked as a whole; it is released with the choice's
 * `finish_reason`, or at the end of the stream. Every other string is masked per event.
 */
export class StreamMask {
  #key;
  #buffer = "";
  /** "choice/field" → text held back (a proper prefix of the key, so far). */
  #held = new Map();

  constructor(key) {
    this.#key = maskable(key) ? key : null;
  }

  /** Feeds a chunk of the stream; returns what may be sent now. */
  push(chunk) {
    if (!this.#key) return chunk;
    this.#buffer += chunk;
    let out = "";
    for (let m = /\r\n\r\n|\n\n|\r\r/.exec(this.#buffer); m; m = /\r\n\r\n|\n\n|\r\r/.exec(this.#buffer)) {
      const event = this.#buffer.slice(0, m.index);
      this.#buffer = this.#buffer.slice(m.index + m[0].length);
      out += this.#event(event) + m[0];
    }
    return out;
  }

  /** The end of the stream: an unfinished last event, then whatever is still held back. */
  end() {
    if (!this.#key) return "";
    const rest = this.#buffer ? `${this.#event(this.#buffer)}\n\n` : "";
    this.#buffer = "";
    return rest + this.#release();
  }

  /** Events carrying the held-back text of every choice and field (always the newest text
   * of its field, so it may follow anything sent before). */
  #release() {
    let out = "";
    for (const [slot, text] of this.#held) {
      const [choice, field] = slot.split("/");
      this.#held.delete(slot);
      if (!text) continue;
      const delta = field.startsWith("tool:")
        ? { tool_calls: [{ index: Number(field.slice(5)), function: { arguments: text } }] }
        : { [field]: text };
      out += `data: ${JSON.stringify({ choices: [{ index: Number(choice), delta }] })}\n\n`;
    }
    return out;
  }

  /** `text` joined to what `slot` held back, masked, minus a new tail that could begin the
   * key (nothing is held back when `last`). */
  #piece(slot, text, last) {
    const joined = maskText((this.#held.get(slot) ?? "") + text, this.#key);
    let keep = last ? 0 : Math.min(joined.length, this.#key.length - 1);
    while (keep > 0 && !this.#key.startsWith(joined.slice(joined.length - keep))) keep--;
    this.#held.set(slot, joined.slice(joined.length - keep));
    return joined.slice(0, joined.length - keep);
  }

  /** Masks one chat-completion chunk in place; true if it changed. */
  #chunk(chunk) {
    let changed = false;
    for (const [i, choice] of (Array.isArray(chunk?.choices) ? chunk.choices : []).entries()) {
      if (!choice || typeof choice !== "object") continue;
      const index = Number.isInteger(choice.index) ? choice.index : i;
      // The choice ends with this event: what it held back goes out in it.
      const last = choice.finish_reason != null;
      if (last && (!choice.delta || typeof choice.delta !== "object")) choice.delta = {};
      const delta = choice.delta;
      if (!delta || typeof delta !== "object") continue;
      const calls = Array.isArray(delta.tool_calls) ? delta.tool_calls : [];
      for (const field of PIECEWISE) {
        const slot = `${index}/${field}`;
        if (typeof delta[field] !== "string" && !(last && this.#held.get(slot))) continue;
        const text = typeof delta[field] === "string" ? delta[field] : "";
        const sent = this.#piece(slot, text, last);
        if (sent !== delta[field]) ((delta[field] = sent), (changed = true));
      }
      for (const [j, call] of calls.entries()) {
        if (typeof call?.function?.arguments !== "string") continue;
        const sent = this.#piece(
          `${index}/tool:${Number.isInteger(call.index) ? call.index : j}`,
          call.function.arguments,
          last,
        );
        if (sent !== call.function.arguments) ((call.function.arguments = sent), (changed = true));
      }
      if (last) {
        // Tool-call arguments held back from earlier events that this one does not continue.
        for (const [slot, text] of this.#held) {
          if (!slot.startsWith(`${index}/tool:`) || !text) continue;
          this.#held.delete(slot);
          delta.tool_calls = [
            ...(Array.isArray(delta.tool_calls) ? delta.tool_calls : []),
            { index: Number(slot.split(":")[1]), function: { arguments: text } },
          ];
          changed = true;
        }
      }
    }
    return maskStrings(chunk, this.#key) || changed;
  }

  #event(event) {
    let before = "";
    const lines = event.split(/\r\n|\n|\r/).map((line) => {
      if (!line.startsWith("data:")) return maskText(line, this.#key);
      const data = line.slice(5).trimStart();
      if (data === "[DONE]") {
        // Whatever is still held back is older than the end of the stream.
        before += this.#release();
        return line;
      }
      let chunk;
      try {
        chunk = JSON.parse(data);
      } catch {
        return maskText(line, this.#key);
      }
      return this.#chunk(chunk) ? `data: ${JSON.stringify(chunk)}` : line;
    });
    return before + lines.join("\n");
  }
}
