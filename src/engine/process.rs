//! Processing queued threads: claim → prompt → LLM → parse → apply → commit → settle, the
//! claim renewed while the attempt runs.

use super::{Engine, ErrorEvent, Event, ProcessedEvent, UpdateReason};
use crate::base::error::{Error, Result};
use crate::base::sync::{race, Either};
use crate::base::time::iso_from_millis;
use crate::extract::apply::{apply_delta, ApplyContext, Conversation};
use crate::extract::delta::Delta;
use crate::extract::prompt::{build_request, chunk_end, memory_view, CONTEXT_MESSAGES};
use crate::llm::Usage;
use crate::memory::forget::Tombstone;
use crate::memory::message::Speaker;
use crate::queue::{Entry, FailureOutcome, RETRY_BASE_MS};
use crate::recall::token_count::Estimate;

/// Which entries a run takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Those due now (timer, `processDue()`).
    Due,
    /// Every entry not claimed elsewhere (`flush()`).
    Flush,
}

/// A parsed reply, waiting to be committed, and the part of the entry it covers: context
/// `messages[ctx_from..start]`, new messages `messages[start..end]`.
struct Extraction {
    delta: Delta,
    usage: Usage,
    usage_reported: bool,
    ctx_from: usize,
    start: usize,
    end: usize,
    /// The ids of the facts the prompt showed, when it showed only some.
    shown: Option<Vec<String>>,
}

/// How an attempt at an entry ended.
pub(super) enum Extracted {
    /// Everything new was extracted and committed; the last call's `processed` event (none
    /// when there was nothing new to send).
    Done(Option<ProcessedEvent>),
    /// Another instance holds the entry now (this one could not renew its claim in time).
    TakenOver,
}

/// What a processing run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunReport {
    /// Threads whose update was applied.
    pub processed: Vec<String>,
    /// Threads whose attempt failed (still queued unless abandoned).
    pub failed: Vec<String>,
    /// The first failure, if any.
    pub first_error: Option<Error>,
}

impl Engine {
    /// One batch: claims the entries (`mode`), processes them one at a time, settles each in
    /// the queue, and re-arms the timer.
    pub(super) async fn run(&self, mode: Mode) -> Result<RunReport> {
        let _batch = self.inner.process_lock.lock().await;
        if self.is_closed() {
            return Err(Error::Closed);
        }
        self.inner.state.borrow_mut().processing = true;
        let result = self.run_locked(mode).await;
        self.inner.state.borrow_mut().processing = false;
        // A failure of the batch itself (storage could not be read or written) is reported
        // like any other failure, also when a timer ran the batch and nobody awaits it.
        if let Err(e) = &result {
            if *e != Error::Closed {
                self.emit(Event::Error(ErrorEvent { error: e.clone(), thread_id: None, attempt: None }));
            }
        }
        let next = self.rearm();
        // A due time in the past would make the timer fire again at once: after a run that
        // took nothing, look again a little later; after a failed run, back off as after a
        // failed attempt (a storage outage must not turn into a busy loop).
        if let Some(at) = next {
            let now = self.now();
            if at <= now && self.config().auto_process {
                match &result {
                    Err(_) => self.parts().scheduler.arm(Some(now + RETRY_BASE_MS)),
                    Ok(r) if r.processed.is_empty() && r.failed.is_empty() && mode == Mode::Due => {
                        self.parts().scheduler.arm(Some(now + 1_000))
                    }
                    Ok(_) => {}
                }
            }
        }
        result
    }

    async fn run_locked(&self, mode: Mode) -> Result<RunReport> {
        let me = self.parts().instance_id.clone();
        let cfg = self.config().queue;
        let lease = self.parts().lease_ms;
        let now = self.now();
        let mut claimed = Vec::new();
        self.update_queue(&mut |q| {
            let threads = match mode {
                Mode::Due => q.due(&cfg, &me, now),
                Mode::Flush => q.claimable(&me, now),
            };
            claimed = q
                .claim(&threads, &me, now, lease)
                .into_iter()
                .filter_map(|(thread, version)| q.entry(&thread).cloned().map(|e| (e, version)))
                .collect();
        })
        .await?;
        let mut report = RunReport::default();
        for (i, (mut entry, mut version)) in claimed.into_iter().enumerate() {
            if self.is_closed() {
                // close() released the claims; the entries stay queued. A flush() that
                // could not finish rejects with CLOSED.
                report.first_error.get_or_insert(Error::Closed);
                break;
            }
            if i > 0 {
                // The batch claimed everything at its start, but each claim only lasts one
                // attempt: renew it right before this entry's turn (which also picks up
                // messages observed meanwhile). Taken over by another instance, or gone:
                // skip it.
                let now = self.now();
                let mut renewed = None;
                self.update_queue(&mut |q| {
                    let got = q.claim(std::slice::from_ref(&entry.thread_id), &me, now, lease);
                    renewed = got.into_iter().next().and_then(|(thread, v)| q.entry(&thread).cloned().map(|e| (e, v)));
                })
                .await?;
                match renewed {
                    Some((e, v)) => (entry, version) = (e, v),
                    None => continue,
                }
            }
            let outcome = self.attempt(&entry).await;
            let now = self.now();
            match outcome {
                // Cancelled by close(): not a failure of the entry (no attempt counted, no
                // event); it stays queued for the next open().
                Err(Error::Closed) => {
                    report.first_error.get_or_insert(Error::Closed);
                    break;
                }
                // Another instance holds the entry now (this one could not renew its claim
                // in time): it is that instance's to settle.
                Ok(Extracted::TakenOver) => continue,
                Ok(Extracted::Done(processed)) => {
                    let settled = self
                        .update_queue(&mut |q| {
                            q.succeed(&entry.thread_id, &version, now);
                        })
                        .await;
                    // After the queue forgot the entry, so a listener reading status() sees it done.
                    if let Some(processed) = processed {
                        self.emit_processed(processed);
                    }
                    settled?;
                    report.processed.push(entry.thread_id.clone());
                }
                Err(error) => {
                    let code = error.code();
                    let mut outcome = None;
                    let settled = self.update_queue(&mut |q| outcome = Some(q.fail(&entry.thread_id, &version, code, now, &cfg))).await;
                    let attempt = match (&settled, &outcome) {
                        (Ok(()), Some(FailureOutcome::Retry { attempt, .. } | FailureOutcome::Abandoned { attempt })) => Some(*attempt),
                        _ => None,
                    };
                    self.emit(Event::Error(ErrorEvent { error: error.clone(), thread_id: Some(entry.thread_id.clone()), attempt }));
                    if let (Ok(()), Some(FailureOutcome::Abandoned { attempt })) = (&settled, outcome) {
                        self.emit(Event::Error(ErrorEvent {
                            error: Error::Abandoned(format!(
                                "the update of thread \"{}\" failed {attempt} times and was dropped; last error: {}",
                                entry.thread_id, error
                            )),
                            thread_id: Some(entry.thread_id.clone()),
                            attempt: Some(attempt),
                        }));
                    }
                    report.failed.push(entry.thread_id.clone());
                    report.first_error.get_or_insert(error);
                    settled?;
                }
            }
        }
        Ok(report)
    }

    /// One attempt at an entry this instance has claimed: what follows the thread's
    /// watermark, in as many calls as `maxExtractionTokens` needs, oldest first. Each call is
    /// an extraction while the claim is renewed every third of the lease, then — once the
    /// claim is confirmed for another full lease — its commit (with the watermark), before
    /// the next call. Returns the last call's `processed` event to emit once the queue is
    /// settled (those of earlier calls are emitted at once). [`Extracted::TakenOver`] when
    /// the claim was lost (another instance took the entry over after a renewal came too
    /// late): the call in progress is dropped unfinished and nothing of it is committed, so
    /// two instances never both apply one part.
    ///
    /// Memory is untouched unless a call got as far as a valid delta.
    async fn attempt(&self, entry: &Entry) -> Result<Extracted> {
        let thread = &entry.thread_id;
        loop {
            let extracted = match race(Box::pin(self.extract(entry)), Box::pin(self.keep_claim(thread))).await {
                Either::Left(extracted) => extracted?,
                Either::Right(()) => return Ok(Extracted::TakenOver),
            };
            let Some(extracted) = extracted else { return Ok(Extracted::Done(None)) };
            // The commit runs under a claim good for a whole lease from now (it takes
            // milliseconds; storage that hangs longer than the lease is the one way another
            // instance could start on the entry meanwhile).
            if !self.renew_claim(thread).await? {
                return Ok(Extracted::TakenOver);
            }
            let last = extracted.end >= entry.messages.len();
            let processed = self.commit_extraction(entry, extracted).await?;
            if last {
                return Ok(Extracted::Done(Some(processed)));
            }
            self.emit_processed(processed);
        }
    }

    /// Renews this instance's claim on `thread` for a lease from now; `false` if it is no
    /// longer this instance's.
    async fn renew_claim(&self, thread: &str) -> Result<bool> {
        let (me, lease, now) = (self.parts().instance_id.clone(), self.parts().lease_ms, self.now());
        let mut held = false;
        self.update_queue(&mut |q| held = q.renew(thread, &me, now, lease)).await?;
        Ok(held)
    }

    /// Renews the claim on `thread` every third of the lease; returns once it was lost. A
    /// renewal that fails (storage) is tried again at the next tick; if the claim ran out
    /// meanwhile and another instance took it, the next renewal finds out.
    async fn keep_claim(&self, thread: &str) {
        loop {
            self.parts().clock.sleep(self.parts().lease_ms / 3).await;
            if let Ok(false) = self.renew_claim(thread).await {
                return;
            }
        }
    }

    /// Prompt → LLM → parse for the next part of one entry: the messages after the thread's
    /// newest watermark that fit `maxExtractionTokens`, with up to [`CONTEXT_MESSAGES`]
    /// already-processed ones before them. `None` when no user message is new.
    async fn extract(&self, entry: &Entry) -> Result<Option<Extraction>> {
        // The prompt shows the newest memory, including other instances' changes, and starts
        // where the newest watermark says.
        let refreshed = self.refresh().await?;
        let messages = &entry.messages;
        let start = self.inner.state.borrow().threads.processed_upto(&entry.thread_id, messages);
        if !messages[start..].iter().any(|m| m.role == Speaker::User) {
            return Ok(None);
        }
        let config = self.config();
        // Of a memory larger than `extractionMemoryTokens`, the prompt shows the facts the
        // ranker puts on top for the new messages (hybrid with an embedder).
        let mut query = String::new();
        for m in &messages[start..] {
            query.push_str(&m.content);
            query.push('\n');
        }
        let q = self.query_vectors(&query).await;
        // (No await from here on: the query's fact vectors belong to this document.)
        let (cached, index) = self.snapshot();
        // The vectors are aligned with the cached document, which the refresh just adopted
        // (unless storage was ahead of it: then lexical on the refreshed one).
        let aligned = cached.facts.len() == refreshed.facts.len() && cached.last_updated == refreshed.last_updated;
        let dense = q.as_ref().filter(|_| aligned).map(|q| q.dense());
        let view = memory_view(&refreshed, &index, dense.as_ref(), &query, config.extraction_memory_tokens, &config.inject, &Estimate);
        let (current, shown) = match view {
            Some((view, shown)) => (view, Some(shown)),
            None => (refreshed, None),
        };
        let ctx_from = start.saturating_sub(CONTEXT_MESSAGES);
        let end = chunk_end(&current, messages, ctx_from, start, &config.prompt, config.max_extraction_tokens, &Estimate);
        let request = build_request(&current, &messages[ctx_from..end], start - ctx_from, &config.prompt);
        let reply = self.parts().llm.complete(&request).await?;
        let (usage, usage_reported) = match reply.usage {
            Some(u) => (u, true),
            None => {
                let counter = &*self.parts().counter;
                let prompt_tokens = counter.count(&request.system) + counter.count(&request.prompt);
                (Usage { prompt_tokens: prompt_tokens as u64, completion_tokens: counter.count(&reply.text) as u64 }, false)
            }
        };
        let delta = crate::llm::parse_delta(&reply.text, self.parts().llm.secrets())?;
        Ok(Some(Extraction { delta, usage, usage_reported, ctx_from, start, end, shown }))
    }

    /// Applies an extraction's delta in one commit, which also moves the thread's watermark
    /// to the end of the messages it covered; returns its `processed` event.
    async fn commit_extraction(&self, entry: &Entry, extracted: Extraction) -> Result<ProcessedEvent> {
        let Extraction { delta, usage, usage_reported, ctx_from, start, end, shown } = extracted;
        // With an embedder, new facts that mean what a forgotten one says join the tombstones
        // apply matches (as the tombstone they mean: reported as `forgotten`, not stored).
        let by_meaning = if self.has_embedder() && !delta.new_facts.is_empty() {
            let texts: Vec<String> =
                delta.new_facts.iter().map(|f| crate::extract::sanitize::strip_invisible(f.content.trim()).trim().to_string()).collect();
            self.forgotten_by_meaning(&texts).await
        } else {
            Vec::new()
        };
        let cfg = self.config().apply;
        let ids = self.parts().ids.clone();
        let now = self.now();
        let now_iso = iso_from_millis(now);
        let thread = entry.thread_id.clone();
        let (messages, sent) = (&entry.messages, &entry.messages[ctx_from..end]);
        let mut report = None;
        self.commit(UpdateReason::Extraction, Some(&thread), true, &mut |record| {
            let conversation = Some(Conversation { messages: sent, new_from: start - ctx_from });
            let meant: Vec<Tombstone>;
            let forgotten = if by_meaning.is_empty() {
                &record.forgotten.list
            } else {
                let list = &record.forgotten.list;
                let extra = by_meaning.iter().filter(|(_, id)| list.iter().any(|t| t.id == *id));
                meant = list
                    .iter()
                    .cloned()
                    .chain(extra.map(|(content, id)| Tombstone { id: id.clone(), content: content.clone(), at: 0 }))
                    .collect();
                &meant
            };
            let ctx = ApplyContext { now_iso: &now_iso, source: &thread, ids: &*ids, conversation, forgotten, shown: shown.as_deref() };
            let r = apply_delta(&mut record.doc, &delta, &cfg, &ctx);
            // The watermark moves in the same commit as what was learned from the messages.
            record.threads.advance(&thread, &messages[..end], now);
            let evicted = r.evicted.clone();
            report = Some(r);
            Ok(evicted.into())
        })
        .await?;
        let report = report.unwrap_or_default();
        let proposed = delta.new_facts.len()
            + delta.sections.iter().flatten().filter(|s| s.should_update && !s.summary.trim().is_empty()).count()
            + delta.section_strings.len()
            + delta.facts_to_remove.len()
            + delta.facts_to_reinforce.len();
        let learned = report.added.len() + report.updated_sections.len();
        let mut skipped = delta.skipped;
        skipped.extend(report.skipped.iter().cloned());
        let processed = ProcessedEvent {
            thread_id: thread,
            changed: !report.is_empty(),
            revision: self.revision(),
            skipped,
            usage,
            usage_reported,
            proposed,
            learned,
        };
        let note = self.inner.state.borrow_mut().extractions.record(&processed);
        self.inner.state.borrow_mut().extractions.note = note;
        Ok(processed)
    }

    /// Emits a `processed` event, then the `EMPTY_EXTRACTIONS` note its extraction ended a
    /// run with, if any.
    pub(super) fn emit_processed(&self, processed: ProcessedEvent) {
        self.emit(Event::Processed(processed));
        let note = self.inner.state.borrow_mut().extractions.note.take();
        if let Some(note) = note {
            self.emit(Event::Debug(note));
        }
    }
}

/// After this many extractions in a row that learned nothing, a `debug` event
/// `EMPTY_EXTRACTIONS` says so (once per run).
pub(super) const EMPTY_RUN: u32 = 5;

/// How the extractions of this instance went.
#[derive(Debug, Default)]
pub(super) struct ExtractionStats {
    /// Committed extractions.
    pub(super) total: u64,
    /// Those that learned nothing.
    pub(super) empty: u64,
    /// Empty extractions in a row, and what they proposed and had refused.
    run: u32,
    run_proposed: usize,
    run_reasons: Vec<(String, usize)>,
    /// The note to emit after the `processed` event, once the run is long enough.
    pub(super) note: Option<super::DebugEvent>,
}

impl ExtractionStats {
    /// Counts one extraction; the `EMPTY_EXTRACTIONS` note when it makes the run of empty
    /// ones [`EMPTY_RUN`] long. Every extraction had a new user message to learn from (a
    /// conversation without one is not sent).
    pub(super) fn record(&mut self, p: &ProcessedEvent) -> Option<super::DebugEvent> {
        self.total += 1;
        if p.learned > 0 {
            (self.run, self.run_proposed) = (0, 0);
            self.run_reasons.clear();
            return None;
        }
        self.empty += 1;
        self.run += 1;
        self.run_proposed += p.proposed;
        for s in &p.skipped {
            match self.run_reasons.iter_mut().find(|(r, _)| *r == s.reason) {
                Some((_, n)) => *n += 1,
                None => self.run_reasons.push((s.reason.clone(), 1)),
            }
        }
        if self.run != EMPTY_RUN {
            return None;
        }
        Some(empty_run_note(self.run_proposed, &self.run_reasons))
    }
}

/// The `EMPTY_EXTRACTIONS` note: what the run of empty extractions looked like, the likely
/// cause and the setting to try (docs/local-models.md).
fn empty_run_note(proposed: usize, reasons: &[(String, usize)]) -> super::DebugEvent {
    let lead = "the last 5 extractions learned nothing, though each had new user messages: ";
    let (reason, message) = if proposed == 0 {
        (
            "nothing-proposed",
            crate::delta::cat(&[
                lead,
                "the model answered \"nothing changed\" every time. A model this small may not follow the instructions: try a larger \
                 one (docs/local-models.md lists what the defaults are tested with), or llm.jsonMode: true if the endpoint's \
                 structured outputs are the cause",
            ]),
        )
    } else {
        let top = reasons.iter().max_by_key(|(_, n)| *n).map_or("", |(r, _)| r.as_str());
        let hint = match top {
            crate::delta::reasons::BELOW_THRESHOLD => {
                "the model's confidences are below factConfidenceThreshold: lower it, or ask for 0.9 in prompt.append"
            }
            crate::delta::reasons::INVALID => {
                "the replies do not fit the delta: try llm.jsonMode: \"schema\" (structured outputs), or a larger model"
            }
            crate::delta::reasons::SCOPE_GATED => "the model labels everything as not lasting (scope, durability, authority)",
            "" => "see the skipped parts of the processed events",
            _ => "the model copies (the assistant's answers, the prompt, the user's task) instead of extracting: try a larger model",
        };
        ("all-refused", crate::delta::cat(&[lead, "everything the model proposed was refused, most often as \"", top, "\"; ", hint]))
    };
    super::DebugEvent { code: "EMPTY_EXTRACTIONS", message, thread_id: None, reason: Some(reason) }
}
