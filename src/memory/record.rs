//! The stored value of the document slot: the memory document plus what must be committed
//! atomically with it.
//!
//! ```text
//! {"record":1,"memory":{…DeerFlow memory.json…},"threads":{"t1":{"tail":["9f86d081884c7d65",…],"at":1773484200000}}}
//! ```
//!
//! * `memory` is the document `get()`, `export()` and `import()` deal with; it never carries
//!   anything of this envelope, so exports stay DeerFlow's format.
//! * `threads` holds one **watermark** per thread: how far its conversation was extracted.
//!   Messages carry no ids, so the watermark is the hashes of the last few processed
//!   messages ([`TAIL`]); the next extraction sends what follows them. It is written by the
//!   extraction's own commit, so it never runs ahead of what memory holds. The
//!   [`MAX_THREADS`] most recently extracted threads are kept.
//! * `history` is what each commit changed ([`crate::memory::history`]), `forgotten` the forget
//!   tombstones ([`crate::memory::forget`]); both are left out while empty.
//! * Any other top-level key is kept as it was, for what later versions store beside the
//!   document in the same commit.
//!
//! A stored value without the `record` key is a plain `memory.json` (every store written
//! before this envelope existed, or by hand) and reads as a record with no watermarks.

use crate::base::ids::IdSource;
use crate::base::time::Millis;
use crate::json::{Map, ObjectWriter, ToJson, Value};
use crate::memory::document::Document;
use crate::memory::forget::Tombstones;
use crate::memory::history::History;
use crate::memory::message::{ChatMessage, Speaker};

/// The envelope version written.
pub const RECORD_VERSION: u64 = 1;
/// Watermarks kept: the most recently extracted threads.
pub const MAX_THREADS: usize = 1000;
/// Processed messages whose hashes make a watermark.
pub const TAIL: usize = 4;

/// How far one thread's conversation has been extracted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    /// The thread id.
    pub thread: String,
    /// Hashes ([`message_hash`]) of the last processed messages, oldest first (at most
    /// [`TAIL`]; fewer when fewer were processed).
    pub tail: Vec<u64>,
    /// When it last advanced (epoch ms), for keeping the most recent [`MAX_THREADS`].
    pub at: Millis,
}

/// The watermarks of all threads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Threads {
    list: Vec<Watermark>,
}

/// The document slot's value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Record {
    /// The memory document.
    pub doc: Document,
    /// Per-thread watermarks.
    pub threads: Threads,
    /// What each commit changed, newest first.
    pub history: History,
    /// What the user asked to forget.
    pub forgotten: Tombstones,
    /// Other top-level keys of the envelope, kept as they were.
    pub extra: Map,
}

/// FNV-1a over the speaker and the text: stable across platforms and versions, so a
/// watermark written by one runtime is found by another.
pub fn message_hash(m: &ChatMessage) -> u64 {
    let role: &[u8] = match m.role {
        Speaker::User => b"u",
        Speaker::Assistant => b"a",
    };
    crate::base::hash::fnv1a(&[role, m.content.as_bytes()])
}

fn hex(h: u64) -> String {
    let mut s = String::with_capacity(16);
    crate::base::hex::push_hex(&mut s, h, 16);
    s
}

impl Threads {
    /// Number of threads with a watermark.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether no thread has a watermark.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The watermark of `thread`, if any.
    pub fn get(&self, thread: &str) -> Option<&Watermark> {
        self.list.iter().find(|w| w.thread == thread)
    }

    /// Index of the first message of `messages` (a thread's filtered history, or the end of
    /// it) that was not processed yet: right after the earliest place where the
    /// watermark's tail occurs. 0 when the thread has no watermark or the history no longer
    /// contains it (the app rewrote it: everything counts as new). The earliest match can
    /// only make old messages count as new again (extracted twice, merged as duplicates),
    /// never skip new ones.
    pub fn processed_upto(&self, thread: &str, messages: &[ChatMessage]) -> usize {
        let Some(w) = self.get(thread) else { return 0 };
        let k = w.tail.len();
        if k == 0 || messages.len() < k {
            return 0;
        }
        let hashes: Vec<u64> = messages.iter().map(message_hash).collect();
        (k..=hashes.len()).find(|&end| hashes[end - k..end] == w.tail[..]).unwrap_or(0)
    }

    /// Records that `processed` (a thread's history up to some point) has been extracted, at
    /// `now`. Keeps the [`MAX_THREADS`] most recent watermarks.
    pub fn advance(&mut self, thread: &str, processed: &[ChatMessage], now: Millis) {
        let tail: Vec<u64> = processed[processed.len().saturating_sub(TAIL)..].iter().map(message_hash).collect();
        match self.list.iter_mut().find(|w| w.thread == thread) {
            Some(w) => {
                w.tail = tail;
                w.at = now;
            }
            None => self.list.push(Watermark { thread: thread.to_string(), tail, at: now }),
        }
        while self.list.len() > MAX_THREADS {
            let oldest = (0..self.list.len()).min_by_key(|&i| self.list[i].at).unwrap_or(0);
            self.list.remove(oldest);
        }
    }

    /// Reads `{thread: {tail, at}}`; malformed entries are left out (their threads are
    /// extracted again from the start, which is safe).
    fn from_value(v: Option<&Value>) -> Threads {
        let mut out = Threads::default();
        let Some(map) = v.and_then(Value::as_object) else { return out };
        'threads: for (thread, w) in map {
            let (Some(hashes), Some(at)) = (w.get("tail").and_then(Value::as_array), w.get("at").and_then(Value::as_u64)) else { continue };
            if thread.is_empty() || hashes.len() > TAIL {
                continue;
            }
            let mut tail = Vec::with_capacity(hashes.len());
            for h in hashes {
                let Some(h) = h.as_str().and_then(crate::base::hex::parse_hex16) else { continue 'threads };
                tail.push(h);
            }
            out.list.push(Watermark { thread: thread.clone(), tail, at });
        }
        out
    }
}

impl ToJson for Threads {
    fn write_json(&self, out: &mut String) {
        let mut o = ObjectWriter::new(out);
        for w in &self.list {
            let mut x = ObjectWriter::new(o.key(&w.thread));
            let mut tail = crate::json::ArrayWriter::new(x.key("tail"));
            for h in &w.tail {
                tail.str(&hex(*h));
            }
            tail.finish();
            x.u64("at", w.at);
            x.finish();
        }
        o.finish();
    }
}

/// Keys of the envelope this version reads itself.
const RECORD_FIELDS: [&str; 5] = ["record", "memory", "threads", "history", "forgotten"];

impl Record {
    /// A record holding `doc` and nothing else.
    pub fn new(doc: Document) -> Record {
        Record { doc, ..Record::default() }
    }

    /// Parses a stored value: an envelope, or a plain `memory.json`. The error names what
    /// is wrong with the memory document (see [`Document::from_value`]).
    pub fn from_json(text: &str, ids: &dyn IdSource) -> Result<Record, String> {
        let v = Value::parse(text).map_err(|e| format!("not valid JSON: {e}"))?;
        let Some(obj) = v.as_object().filter(|o| o.contains_key("record")) else {
            return Ok(Record::new(Document::from_value(&v, ids)?));
        };
        let memory = obj.get("memory").ok_or("the record has no `memory`")?;
        let doc = Document::from_value(memory, ids).map_err(|e| format!("`memory`: {e}"))?;
        let mut extra = obj.clone();
        extra.retain(|k, _| !RECORD_FIELDS.contains(&k));
        Ok(Record {
            history: History::from_value(obj.get("history"), &doc),
            forgotten: Tombstones::from_value(obj.get("forgotten")),
            doc,
            threads: Threads::from_value(obj.get("threads")),
            extra,
        })
    }
}

impl ToJson for Record {
    fn write_json(&self, out: &mut String) {
        let mut o = ObjectWriter::new(out);
        o.u64("record", RECORD_VERSION);
        self.doc.write_json(o.key("memory"));
        self.threads.write_json(o.key("threads"));
        if !self.history.entries.is_empty() {
            self.history.write_json(o.key("history"));
        }
        if !self.forgotten.list.is_empty() {
            self.forgotten.write_json(o.key("forgotten"));
        }
        o.entries(&self.extra, &RECORD_FIELDS);
        o.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::SequentialIds;

    fn msgs(n: usize) -> Vec<ChatMessage> {
        (0..n).map(|i| if i % 2 == 0 { ChatMessage::user(format!("u{i}")) } else { ChatMessage::assistant(format!("a{i}")) }).collect()
    }

    #[test]
    fn a_plain_memory_json_reads_as_a_record_and_round_trips_as_an_envelope() {
        let ids = SequentialIds::starting_at(1);
        let plain = r#"{"version":"1.0","lastUpdated":"","user":{},"history":{},"facts":[{"id":"fact_1","content":"x"}],"custom":7}"#;
        let r = Record::from_json(plain, &ids).unwrap();
        assert_eq!(r.doc.facts[0].content, "x");
        assert!(r.threads.is_empty() && r.extra.is_empty());
        let mut r2 = r.clone();
        r2.threads.advance("t1", &msgs(3), 5);
        r2.extra.insert("later".into(), json!([1, 2]));
        r2.forgotten.list.push(crate::memory::forget::Tombstone { id: "f".into(), content: "x".into(), at: 1 });
        r2.history.push(json!({"revision": 3}), 10, "");
        let text = r2.to_json();
        assert!(text.starts_with(r#"{"record":1,"memory":{"version":"1.0""#), "{text}");
        assert!(text.contains(r#""custom":7"#), "unknown memory fields stay in memory");
        let back = Record::from_json(&text, &ids).unwrap();
        assert_eq!(back, r2);
        assert_eq!(back.doc.to_json(), r.doc.to_json(), "the memory inside is the plain document");
    }

    #[test]
    fn a_broken_memory_inside_an_envelope_is_an_error_and_broken_watermarks_are_dropped() {
        let ids = SequentialIds::starting_at(1);
        assert!(Record::from_json(r#"{"record":1}"#, &ids).unwrap_err().contains("memory"));
        assert!(Record::from_json(r#"{"record":1,"memory":{"user":{}}}"#, &ids).unwrap_err().contains("history"));
        let r = Record::from_json(
            r#"{"record":1,"memory":{"user":{},"history":{},"facts":[]},"threads":{"a":{"tail":["zz"],"at":1},"b":{"tail":[],"at":2},"c":5}}"#,
            &ids,
        )
        .unwrap();
        assert_eq!(r.threads.len(), 1);
        assert!(r.threads.get("b").is_some());
    }

    #[test]
    fn the_watermark_finds_where_new_messages_start() {
        let mut t = Threads::default();
        let history = msgs(10);
        assert_eq!(t.processed_upto("t", &history), 0, "no watermark: all new");
        t.advance("t", &history[..6], 1);
        assert_eq!(t.get("t").unwrap().tail.len(), TAIL);
        assert_eq!(t.processed_upto("t", &history), 6);
        assert_eq!(t.processed_upto("t", &history[..6]), 6, "fully processed");
        assert_eq!(t.processed_upto("t", &history[2..]), 4, "a trimmed history still finds it");
        assert_eq!(t.processed_upto("other", &history), 0);
        let rewritten: Vec<ChatMessage> = history.iter().map(|m| ChatMessage { content: format!("{}!", m.content), ..m.clone() }).collect();
        assert_eq!(t.processed_upto("t", &rewritten), 0, "a rewritten history is new");
        t.advance("t", &history[..1], 2);
        assert_eq!(t.processed_upto("t", &history), 1, "short tails work");
    }

    #[test]
    fn only_the_most_recent_threads_keep_a_watermark() {
        let mut t = Threads::default();
        for i in 0..(MAX_THREADS + 5) {
            t.advance(&format!("t{i}"), &msgs(2), i as u64);
        }
        assert_eq!(t.len(), MAX_THREADS);
        assert!(t.get("t0").is_none() && t.get("t4").is_none() && t.get("t5").is_some());
    }

    #[test]
    fn hashes_are_stable() {
        assert_eq!(hex(message_hash(&ChatMessage::user("hello"))), hex(message_hash(&ChatMessage::user("hello"))));
        assert_ne!(message_hash(&ChatMessage::user("hello")), message_hash(&ChatMessage::assistant("hello")));
        assert_eq!(crate::base::hex::parse_hex16(&hex(0x0123_4567_89ab_cdef)), Some(0x0123_4567_89ab_cdef));
        // FNV-1a 64 of "u" + "hello", fixed forever: stored watermarks depend on it.
        assert_eq!(hex(message_hash(&ChatMessage::user("hello"))), "8b944b0a31f0dd68");
    }
}
