//! The one error type of the library, with stable machine-readable codes.
//!
//! Every fallible operation returns [`Error`]. Its [`code`](Error::code) is part of the
//! public contract: the wasm layer turns an `Error` into a JS `Error` whose `code` property
//! is exactly this string, so applications can branch on it. Messages are written for a
//! person who has to act on them and never contain an API key.

use std::fmt;

/// Why an operation failed.
///
/// The variants map one-to-one to the stable codes of docs/design.md#errors (see [`Error::code`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// An argument or option was malformed (`INVALID_INPUT`).
    InvalidInput(String),
    /// Storage refused the write because it is full (`STORAGE_QUOTA`).
    StorageQuota(String),
    /// The requested storage does not exist or cannot be used here (`STORAGE_UNAVAILABLE`).
    StorageUnavailable(String),
    /// Storage failed in another way; the previous document is intact (`STORAGE_FAILED`).
    StorageFailed(String),
    /// Stored data could not be read as memory; it was kept, not replaced (`CORRUPT_MEMORY`).
    CorruptMemory(String),
    /// The LLM endpoint answered with an HTTP error status (`LLM_HTTP`).
    LlmHttp {
        /// The HTTP status code.
        status: u16,
        /// What went wrong, including a short excerpt of the response body.
        message: String,
    },
    /// The LLM call did not complete within `timeoutMs` (`LLM_TIMEOUT`).
    LlmTimeout(String),
    /// The LLM endpoint could not be reached (`LLM_NETWORK`).
    LlmNetwork(String),
    /// The LLM (or the user's LLM function) failed in another way (`LLM_FAILED`).
    LlmFailed(String),
    /// The model's reply held no usable memory delta; memory was not touched (`LLM_BAD_OUTPUT`).
    LlmBadOutput(String),
    /// A commit kept losing against concurrent writers (`CONFLICT`).
    Conflict(String),
    /// No fact with the given id exists (`NOT_FOUND`).
    NotFound(String),
    /// The instance was closed (`CLOSED`).
    Closed,
    /// A queued update failed `maxAttempts` times and was dropped (`ABANDONED`).
    Abandoned(String),
    /// The embedding model (`embed`) failed or answered something unusable; ranking fell
    /// back to the lexical similarity and fact vectors are retried later (`EMBED_FAILED`).
    EmbedFailed(String),
    /// The encryption key or passphrase does not open this memory, or encrypted memory was
    /// opened without one; nothing was changed (`DECRYPT_FAILED`).
    DecryptFailed(String),
    /// Encrypted memory holds an older copy than one already written (a restored backup, or
    /// a store writer putting an old value back); it was not read (`ROLLBACK`).
    Rollback(String),
}

impl Error {
    /// The stable code of this error, e.g. `"CORRUPT_MEMORY"`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidInput(_) => "INVALID_INPUT",
            Error::StorageQuota(_) => "STORAGE_QUOTA",
            Error::StorageUnavailable(_) => "STORAGE_UNAVAILABLE",
            Error::StorageFailed(_) => "STORAGE_FAILED",
            Error::CorruptMemory(_) => "CORRUPT_MEMORY",
            Error::LlmHttp { .. } => "LLM_HTTP",
            Error::LlmTimeout(_) => "LLM_TIMEOUT",
            Error::LlmNetwork(_) => "LLM_NETWORK",
            Error::LlmFailed(_) => "LLM_FAILED",
            Error::LlmBadOutput(_) => "LLM_BAD_OUTPUT",
            Error::Conflict(_) => "CONFLICT",
            Error::NotFound(_) => "NOT_FOUND",
            Error::Closed => "CLOSED",
            Error::Abandoned(_) => "ABANDONED",
            Error::EmbedFailed(_) => "EMBED_FAILED",
            Error::DecryptFailed(_) => "DECRYPT_FAILED",
            Error::Rollback(_) => "ROLLBACK",
        }
    }

    /// The HTTP status for [`Error::LlmHttp`], else `None`.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::LlmHttp { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The human-readable message, without the code.
    pub fn message(&self) -> String {
        match self {
            Error::InvalidInput(m)
            | Error::StorageQuota(m)
            | Error::StorageUnavailable(m)
            | Error::StorageFailed(m)
            | Error::CorruptMemory(m)
            | Error::LlmTimeout(m)
            | Error::LlmNetwork(m)
            | Error::LlmFailed(m)
            | Error::LlmBadOutput(m)
            | Error::Conflict(m)
            | Error::NotFound(m)
            | Error::Abandoned(m)
            | Error::EmbedFailed(m)
            | Error::DecryptFailed(m)
            | Error::Rollback(m) => m.clone(),
            Error::LlmHttp { message, .. } => message.clone(),
            Error::Closed => "this memory instance was closed; open a new one".to_string(),
        }
    }

    /// Shorthand for [`Error::InvalidInput`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    /// Shorthand for [`Error::CorruptMemory`].
    pub fn corrupt(msg: impl Into<String>) -> Self {
        Error::CorruptMemory(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl std::error::Error for Error {}

/// The result type used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of every variant with its code; the match makes adding a variant without
    /// listing it here a compile error.
    fn every_variant() -> Vec<(Error, &'static str)> {
        let all = vec![
            (Error::invalid("x"), "INVALID_INPUT"),
            (Error::StorageQuota("x".into()), "STORAGE_QUOTA"),
            (Error::StorageUnavailable("x".into()), "STORAGE_UNAVAILABLE"),
            (Error::StorageFailed("x".into()), "STORAGE_FAILED"),
            (Error::corrupt("x"), "CORRUPT_MEMORY"),
            (Error::LlmHttp { status: 500, message: "x".into() }, "LLM_HTTP"),
            (Error::LlmTimeout("x".into()), "LLM_TIMEOUT"),
            (Error::LlmNetwork("x".into()), "LLM_NETWORK"),
            (Error::LlmFailed("x".into()), "LLM_FAILED"),
            (Error::LlmBadOutput("x".into()), "LLM_BAD_OUTPUT"),
            (Error::Conflict("x".into()), "CONFLICT"),
            (Error::NotFound("x".into()), "NOT_FOUND"),
            (Error::Closed, "CLOSED"),
            (Error::Abandoned("x".into()), "ABANDONED"),
            (Error::EmbedFailed("x".into()), "EMBED_FAILED"),
            (Error::DecryptFailed("x".into()), "DECRYPT_FAILED"),
            (Error::Rollback("x".into()), "ROLLBACK"),
        ];
        for (e, _) in &all {
            match e {
                Error::InvalidInput(_)
                | Error::StorageQuota(_)
                | Error::StorageUnavailable(_)
                | Error::StorageFailed(_)
                | Error::CorruptMemory(_)
                | Error::LlmHttp { .. }
                | Error::LlmTimeout(_)
                | Error::LlmNetwork(_)
                | Error::LlmFailed(_)
                | Error::LlmBadOutput(_)
                | Error::Conflict(_)
                | Error::NotFound(_)
                | Error::Closed
                | Error::Abandoned(_)
                | Error::EmbedFailed(_)
                | Error::DecryptFailed(_)
                | Error::Rollback(_) => {}
            }
        }
        all
    }

    #[test]
    fn codes_are_stable_strings() {
        for (err, code) in every_variant() {
            assert_eq!(err.code(), code);
            assert!(err.to_string().starts_with(code));
        }
    }

    /// The codes of `text`'s `export type ErrorCode = | "A" | "B" …;`.
    fn typescript_codes(text: &str) -> Vec<String> {
        let start = text.find("export type ErrorCode =").expect("the types declare ErrorCode");
        let decl = &text[start..start + text[start..].find(';').expect("ErrorCode ends with ;")];
        decl.split('"').skip(1).step_by(2).map(String::from).collect()
    }

    #[test]
    fn the_typescript_error_codes_are_exactly_the_rust_ones() {
        let mut rust: Vec<String> = every_variant().into_iter().map(|(e, _)| e.code().to_string()).collect();
        let mut ts = typescript_codes(include_str!("../wasm/types.rs"));
        #[allow(clippy::disallowed_methods)]
        {
            rust.sort();
            ts.sort();
        }
        assert_eq!(ts, rust, "ErrorCode in src/wasm/types.rs and Error::code differ");
    }

    #[test]
    fn every_code_the_js_modules_raise_is_a_rust_one() {
        let rust: Vec<&str> = every_variant().iter().map(|(e, _)| e.code()).collect();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/js");
        let mut raised = 0;
        for entry in std::fs::read_dir(dir).expect("js/ exists") {
            let path = entry.expect("a js/ entry").path();
            if path.extension().is_none_or(|x| x != "js") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("js/ files are text");
            // `userMemoryError("CODE", …)` and the CLI's and MCP server's `fail("CODE", …)`.
            for call in ["userMemoryError(\"", "fail(\""] {
                for (at, _) in text.match_indices(call) {
                    let rest = &text[at + call.len()..];
                    let code = &rest[..rest.find('"').expect("a closed string")];
                    assert!(rust.contains(&code), "{} raises {code}, which is no Error code", path.display());
                    raised += 1;
                }
            }
        }
        assert!(raised > 20, "the scan found the JS modules' errors ({raised})");
    }
}
