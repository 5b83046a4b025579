//! Streamed replies: the server-sent events of OpenAI-compatible and Anthropic endpoints
//! decoded as they arrive, and the check that ends reading as soon as the delta's JSON
//! object is complete (a model that would run on — whitespace after a grammar-constrained
//! object, prose, a second object — is cut off there and stops generating).

// Only the wasm layer (src/wasm/) calls this; natively the tests do.
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use super::protocol::{usage, Completion};
use super::{Provider, Usage};
use crate::base::error::{Error, Result};
use crate::extract::parse::parse_reply;
use crate::json::Value;

/// How many closed top-level objects are tried as the delta before reading just goes on
/// to the end (each try parses the reply so far; a real reply has one or two objects).
pub(crate) const MAX_EARLY_CHECKS: u32 = 8;

/// Events still read after the delta is complete, so the finish reason and the usage the
/// endpoint sends right after the last token arrive; a model that runs on is cut off then.
pub(crate) const GRACE_EVENTS: u32 = 8;

/// Watches text as it grows for the end of a top-level JSON object: braces are counted
/// outside JSON strings, and strings are only tracked inside an object (an apostrophe in
/// prose opens nothing). A stray `}` in prose never takes the depth below zero.
#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectWatch {
    depth: u32,
    in_str: bool,
    escaped: bool,
}

impl ObjectWatch {
    /// Takes the next piece of text; `true` when a top-level object closed in it.
    pub(crate) fn feed(&mut self, piece: &str) -> bool {
        let mut closed = false;
        for &b in piece.as_bytes() {
            if self.in_str {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_str = false;
                }
                continue;
            }
            match b {
                b'{' => self.depth += 1,
                b'}' if self.depth > 0 => {
                    self.depth -= 1;
                    closed |= self.depth == 0;
                }
                b'"' if self.depth > 0 => self.in_str = true,
                _ => {}
            }
        }
        closed
    }
}

/// Whether `text` ends inside a `<think>` / `<thinking>` / `<reasoning>` block. (Forward
/// searches only: a reverse substring search would link a second searcher into the wasm.)
fn in_reasoning(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let last = |pat: &str| lower.match_indices(pat).last().map(|(i, _)| i);
    [("<think", "</think"), ("<reasoning", "</reasoning")]
        .iter()
        .any(|(open, close)| last(open).is_some_and(|o| last(close).map_or(true, |c| c < o)))
}

/// Decodes a server-sent-event body of one provider into a [`Completion`], chunk by chunk.
#[derive(Debug)]
pub(crate) struct StreamDecoder {
    provider: Provider,
    /// The unfinished line of the last chunk.
    line: Vec<u8>,
    /// The `data:` lines of the event being read.
    data: String,
    completion: Completion,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    /// Anthropic: the reply is a tool call's input (text blocks are then ignored).
    tool: bool,
    watch: ObjectWatch,
    checks: u32,
    /// The text already holds a complete delta.
    complete: bool,
    /// Events since it became complete.
    after: u32,
    /// The stream's end marker arrived (`[DONE]`, `message_stop`).
    ended: bool,
    /// An error the stream reported.
    error: Option<String>,
}

impl StreamDecoder {
    /// A decoder for `provider`'s events.
    pub(crate) fn new(provider: Provider) -> StreamDecoder {
        StreamDecoder {
            provider,
            line: Vec::new(),
            data: String::new(),
            completion: Completion::default(),
            prompt_tokens: None,
            completion_tokens: None,
            tool: false,
            watch: ObjectWatch::default(),
            checks: 0,
            complete: false,
            after: 0,
            ended: false,
            error: None,
        }
    }

    /// Takes the next bytes of the body; `true` when reading can stop: the stream ended or
    /// failed, or the delta is complete (and the grace events are read).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> bool {
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..i]);
            rest = &rest[i + 1..];
            let line = std::mem::take(&mut self.line);
            self.take_line(line.strip_suffix(b"\r").unwrap_or(&line));
            if self.stop() {
                return true;
            }
        }
        self.line.extend_from_slice(rest);
        false
    }

    fn stop(&self) -> bool {
        self.ended || self.error.is_some() || (self.complete && self.after > GRACE_EVENTS)
    }

    /// One line of the event stream: a field, a comment, or the blank line ending an event.
    fn take_line(&mut self, line: &[u8]) {
        if line.is_empty() {
            self.dispatch();
            return;
        }
        // Lines never split a character (chunks are cut at line ends first), so a line that
        // is not UTF-8 is garbage and carries nothing.
        let Ok(line) = std::str::from_utf8(line) else { return };
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        if field == "data" {
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
        }
        // `event:` repeats the payload's `type` (Anthropic); comments and `id:` carry nothing.
    }

    /// Handles the event whose `data:` lines were read.
    fn dispatch(&mut self) {
        let data = std::mem::take(&mut self.data);
        if data.is_empty() {
            return;
        }
        if self.complete {
            self.after += 1;
        }
        if data.trim() == "[DONE]" {
            self.ended = true;
            return;
        }
        // An event that is not JSON (a keep-alive of some proxy) carries nothing.
        let Ok(v) = Value::parse(&data) else { return };
        let text_of = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        if let Some(e) = v.get("error").filter(|e| !matches!(e, Value::Null)) {
            self.error = Some(text_of(e.get("message")).or_else(|| text_of(Some(e))).unwrap_or_else(|| data.clone()));
            return;
        }
        match self.provider {
            Provider::OpenAi => {
                if let Some(u) = usage(Provider::OpenAi, v.get("usage")) {
                    self.prompt_tokens = Some(u.prompt_tokens);
                    self.completion_tokens = Some(u.completion_tokens);
                }
                let Some(choice) = v.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else { return };
                if let Some(r) = text_of(choice.get("finish_reason")) {
                    self.completion.finish = Some(r);
                }
                let delta = choice.get("delta");
                if let Some(r) = text_of(delta.and_then(|d| d.get("refusal"))) {
                    self.completion.refusal.get_or_insert_with(String::new).push_str(&r);
                }
                if let Some(piece) = text_of(delta.and_then(|d| d.get("content"))) {
                    self.append(&piece);
                }
            }
            Provider::Anthropic => match v.get("type").and_then(Value::as_str).unwrap_or_default() {
                "message_start" => {
                    let u = v.get("message").and_then(|m| m.get("usage"));
                    self.prompt_tokens = u.and_then(|u| u.get("input_tokens")).and_then(Value::as_u64);
                }
                "content_block_start" => {
                    let block = v.get("content_block");
                    if block.and_then(|b| b.get("type")).and_then(Value::as_str) == Some("tool_use") && !self.tool {
                        // The forced tool's input is the reply; a text block before it is not.
                        self.tool = true;
                        self.completion.text.clear();
                        self.watch = ObjectWatch::default();
                    } else if let Some(t) = text_of(block.and_then(|b| b.get("text"))).filter(|_| !self.tool) {
                        self.append(&t);
                    }
                }
                "content_block_delta" => {
                    let delta = v.get("delta");
                    let piece = match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
                        Some("input_json_delta") if self.tool => text_of(delta.and_then(|d| d.get("partial_json"))),
                        Some("text_delta") if !self.tool => text_of(delta.and_then(|d| d.get("text"))),
                        _ => None,
                    };
                    if let Some(piece) = piece {
                        self.append(&piece);
                    }
                }
                "message_delta" => {
                    if let Some(r) = text_of(v.get("delta").and_then(|d| d.get("stop_reason"))) {
                        self.completion.finish = Some(r);
                    }
                    if let Some(n) = v.get("usage").and_then(|u| u.get("output_tokens")).and_then(Value::as_u64) {
                        self.completion_tokens = Some(n);
                    }
                }
                "message_stop" => self.ended = true,
                _ => {}
            },
        }
    }

    /// Adds reply text; checks whether the delta is complete when an object just closed.
    fn append(&mut self, piece: &str) {
        self.completion.text.push_str(piece);
        if !self.complete && self.watch.feed(piece) && self.checks < MAX_EARLY_CHECKS {
            self.checks += 1;
            let text = &self.completion.text;
            // Inside an unclosed reasoning block the parser prefers the *last* delta, which
            // may still be coming.
            self.complete = !in_reasoning(text) && parse_reply(text).is_ok();
        }
    }

    /// The error the stream reported, if it did (the last line may still be unread: call
    /// after the body ended).
    pub(crate) fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Whether the reply already holds a complete delta.
    #[cfg(test)]
    pub(crate) fn is_complete(&self) -> bool {
        self.complete
    }

    /// The completion, once the body ended or reading stopped. An error event is
    /// `LLM_NETWORK` (retried: a stream that broke off with `overloaded_error` is worth
    /// another try), its message cleaned by `mask`.
    pub(crate) fn finish(mut self, mask: impl Fn(&str) -> String) -> Result<Completion> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.take_line(&line);
        }
        self.dispatch();
        if let Some(e) = self.error {
            return Err(Error::LlmNetwork(mask(&format!("the endpoint's stream ended with an error: {e}"))));
        }
        if let (Some(prompt_tokens), Some(completion_tokens)) = (self.prompt_tokens, self.completion_tokens) {
            self.completion.usage = Some(Usage { prompt_tokens, completion_tokens });
        }
        Ok(self.completion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse(events: &[String]) -> String {
        events.iter().map(|e| format!("data: {e}\n\n")).collect()
    }

    fn openai_chunk(content: &str, finish: Option<&str>) -> String {
        let finish = finish.map_or("null".to_string(), |f| format!("\"{f}\""));
        format!(
            r#"{{"id":"c","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":{}}},"finish_reason":{finish}}}]}}"#,
            serde_json::to_string(content).unwrap()
        )
    }

    /// Feeds `body` in pieces of `step` bytes; returns the decoder and whether it asked to
    /// stop (and after how many bytes).
    fn run(provider: Provider, body: &str, step: usize) -> (StreamDecoder, Option<usize>) {
        let mut d = StreamDecoder::new(provider);
        for (i, chunk) in body.as_bytes().chunks(step).enumerate() {
            if d.feed(chunk) {
                return (d, Some((i + 1) * step));
            }
        }
        (d, None)
    }

    #[test]
    fn the_watch_sees_top_level_objects_close_outside_strings() {
        let mut w = ObjectWatch::default();
        assert!(!w.feed(r#"Here it is: it's {"a": "}", "b": {"c": "\"}"}"#));
        assert!(w.feed("}"));
        assert!(!w.feed(" } stray } braces"));
        assert!(w.feed(r#"{"x": 1}"#));
    }

    #[test]
    fn openai_events_give_text_finish_reason_and_usage_in_any_chunking() {
        let delta = r#"{"newFacts": [{"content": "Lives in Lisbon", "category": "context", "confidence": 0.9}]}"#;
        let mut events: Vec<String> = delta.as_bytes().chunks(7).map(|c| openai_chunk(std::str::from_utf8(c).unwrap(), None)).collect();
        events.push(openai_chunk("", Some("stop")));
        events.push(r#"{"id":"c","choices":[],"usage":{"prompt_tokens":812,"completion_tokens":31}}"#.into());
        let body = format!(": keep-alive\r\n\r\n{}data: [DONE]\n\n", sse(&events));
        for step in [1, 3, 64, body.len()] {
            let (d, stopped) = run(Provider::OpenAi, &body, step);
            assert!(stopped.is_some(), "[DONE] ends the stream");
            let c = d.finish(str::to_string).unwrap();
            assert_eq!(c.text, delta, "step {step}");
            assert_eq!(c.finish.as_deref(), Some("stop"));
            assert_eq!(c.usage, Some(Usage { prompt_tokens: 812, completion_tokens: 31 }));
        }
    }

    #[test]
    fn reading_stops_soon_after_the_delta_is_complete_and_a_decoy_object_does_not_stop_it() {
        // A grammar-constrained model that runs on with whitespace after the object.
        let mut events =
            vec![openai_chunk(r#"{"example": true} "#, None), openai_chunk(r#"{"newFacts": [{"content": "Lives in Lisbon"}]}"#, None)];
        events.extend((0..1000).map(|_| openai_chunk("\n ", None)));
        let body = sse(&events);
        let (d, stopped) = run(Provider::OpenAi, &body, 50);
        let stopped = stopped.expect("stops before the end");
        let per_event = body.len() / events.len();
        assert!(stopped < (2 + GRACE_EVENTS as usize + 2) * per_event + 50, "stopped after {stopped} of {} bytes", body.len());
        assert!(d.is_complete());
        let c = d.finish(str::to_string).unwrap();
        assert!(parse_reply(&c.text).is_ok() && c.usage.is_none());
        // An unclosed <think> holds back the stop: the parser prefers the last delta then.
        let mut think = vec![openai_chunk(r#"<think>draft: {"newFacts": [{"content": "draft"}]}"#, None)];
        think.extend((0..20).map(|_| openai_chunk(" hmm", None)));
        think.push(openai_chunk("\nno wait</think>", None));
        think.push(openai_chunk(r#"{"newFacts": [{"content": "Lives in Lisbon"}]}"#, None));
        think.push(openai_chunk("", Some("stop")));
        let think = sse(&think);
        let (d, _) = run(Provider::OpenAi, &think, 16);
        let text = d.finish(str::to_string).unwrap().text;
        assert_eq!(parse_reply(&text).unwrap().new_facts[0].content, "Lives in Lisbon");
    }

    #[test]
    fn anthropic_events_give_tool_input_stop_reason_and_usage() {
        let events = [
            r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":700,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Sure: "}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"memory_delta","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"newFacts\": [{\"content\""}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":": \"Plays the cello\"}]}"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}"#,
            r#"{"type":"message_stop"}"#,
        ];
        let body: String = events.iter().map(|e| format!("event: x\ndata: {e}\n\n")).collect();
        let (d, stopped) = run(Provider::Anthropic, &body, 9);
        assert!(stopped.is_some());
        let c = d.finish(str::to_string).unwrap();
        assert_eq!(c.text, r#"{"newFacts": [{"content": "Plays the cello"}]}"#);
        assert_eq!(c.finish.as_deref(), Some("tool_use"));
        assert_eq!(c.usage, Some(Usage { prompt_tokens: 700, completion_tokens: 42 }));
        // Text blocks without a tool, cut off by the limit.
        let text = [
            r#"{"type":"message_start","message":{"usage":{"input_tokens":5}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"{\"newFacts\": ["}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":1024}}"#,
        ];
        let (d, _) = run(Provider::Anthropic, &sse(&text.map(String::from)), 1000);
        let c = d.finish(str::to_string).unwrap();
        assert!(c.cut_off() && c.text == r#"{"newFacts": ["#);
    }

    #[test]
    fn an_error_event_is_a_network_error_with_secrets_masked() {
        let body = sse(&[r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded for key sk-secret-123"}}"#.into()]);
        let (d, stopped) = run(Provider::Anthropic, &body, 5);
        assert!(stopped.is_some());
        let e = d.finish(|s| s.replace("sk-secret-123", "***")).unwrap_err();
        assert_eq!(e.code(), "LLM_NETWORK");
        assert_eq!(e.message(), "the endpoint's stream ended with an error: Overloaded for key ***");
        // A body cut without a final blank line still yields its last event.
        let mut d = StreamDecoder::new(Provider::OpenAi);
        assert!(!d.feed(format!("data: {}", openai_chunk("{\"user\": null}", Some("stop"))).as_bytes()));
        assert_eq!(d.finish(str::to_string).unwrap().text, "{\"user\": null}");
    }
}
