//! What the instances of one agent say to each other: storage operations, their answers,
//! and the two announcements. The platform carries these over its channel (in a browser a
//! `BroadcastChannel`, as plain objects); the protocol only ever sees these types.

use crate::base::error::Error;
use crate::base::time::Millis;
use crate::storage::{Commit, Slot, Versioned};

/// A storage operation, performed by the leader.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    /// `Store::load`.
    Load(Slot),
    /// `Store::commit` of the value, based on the revision.
    Commit(Slot, u64, String),
    /// `Store::discard`.
    Discard(Slot),
    /// `Store::cleanup` (never sent: a new leader cleans up when it takes over).
    Cleanup,
}

impl Op {
    /// The slot the operation is about (none for cleanup).
    pub(crate) fn slot(&self) -> Option<Slot> {
        match self {
            Op::Load(s) | Op::Commit(s, ..) | Op::Discard(s) => Some(*s),
            Op::Cleanup => None,
        }
    }
}

/// What an operation gave.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// Of a load.
    Loaded(Option<Versioned>),
    /// Of a commit.
    Committed(Commit),
    /// Of a discard or cleanup.
    Done,
}

impl Answer {
    /// The revision the answer tells of (0 when it tells of none).
    pub(crate) fn revision(&self) -> u64 {
        match self {
            Answer::Loaded(Some(v)) => v.revision,
            Answer::Committed(Commit::Committed(rev)) => *rev,
            _ => 0,
        }
    }

    /// This answer read as the answer to `op`. On the wire a reply says only "ok" with a
    /// revision, a value or a conflict; which kind of answer it is, the requester knows.
    pub(crate) fn answering(self, op: &Op) -> Answer {
        match (op, self) {
            (Op::Load(_), Answer::Loaded(v)) => Answer::Loaded(v),
            (Op::Load(_), _) => Answer::Loaded(None),
            (Op::Commit(..), Answer::Committed(c)) => Answer::Committed(c),
            (Op::Commit(..), other) => Answer::Committed(Commit::Committed(other.revision())),
            (Op::Discard(_) | Op::Cleanup, _) => Answer::Done,
        }
    }
}

/// A follower's request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    /// Unique per operation; every copy of a request sent again carries the same id.
    pub(crate) id: String,
    /// What to do.
    pub(crate) op: Op,
    /// The highest revision of each slot (in [`Slot::ALL`] order) the sender has heard of.
    pub(crate) known: [u64; Slot::ALL.len()],
    /// Whether this is a copy sent again (a commit may then have landed already).
    pub(crate) retry: bool,
    /// Epoch ms after which the leader must not start it (`None`: no deadline).
    pub(crate) until: Option<Millis>,
}

/// The leader's answer to a request (or, with an empty id, news of its own commit).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    /// The request's id.
    pub(crate) id: String,
    /// The slot of the operation, so every listener learns its revision.
    pub(crate) slot: Option<Slot>,
    /// The answer, or why there is none.
    pub(crate) outcome: Result<Answer, Error>,
}

impl Reply {
    /// The revision the reply tells of (0 for none or a failure).
    pub(crate) fn revision(&self) -> u64 {
        self.outcome.as_ref().map_or(0, Answer::revision)
    }
}

/// One message on the agent's channel.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    /// A follower asks the leader to perform an operation.
    Request(Request),
    /// The leader answers.
    Reply(Reply),
    /// The leader discarded a slot: its revisions start again at 0.
    Reset(Slot),
    /// A new leader serves from now on: send what is waiting again.
    Leader,
}
