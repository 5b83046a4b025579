//! Scrubbing of upload mentions (docs/design.md#applying-a-delta, DeerFlow's post-LLM scrubber).
//!
//! Uploads are session-specific: a memory that says "the user uploaded report.pdf" makes
//! later sessions look for a file that is not there. After every update, sentences that
//! merely record an upload are cut from the summaries and such facts are deleted.
//!
//! A sentence records an upload when it has
//! * `upload` / `uploads` / `uploaded` / `uploading` followed within three words by
//!   `file(s)`, `document(s)` or `attachment(s)`;
//! * `file upload(s)`;
//!
//! unless the words in between (or right after `file upload`) name a piece of software —
//! `service`, `api`, `endpoint`, `feature`, `handler`, `bug` … — so "Building a file upload
//! service in Go" or "fixing the upload API for PDF files" stay: they are work, not events.
//! * `/mnt/user-data/uploads/` or `<uploaded_files>`;
//! * in Chinese, 上传 together with 文件, 附件 or 文档.
//!
//! "Works with CSV files" and "prefers PDF export" are kept.

use crate::memory::document::{Document, SectionId};

const UPLOAD_WORDS: [&str; 4] = ["upload", "uploads", "uploaded", "uploading"];
const FILE_WORDS: [&str; 6] = ["file", "files", "document", "documents", "attachment", "attachments"];
/// Words that turn "upload" into the name of something being built.
const FEATURE_WORDS: [&str; 30] = [
    "service",
    "services",
    "feature",
    "features",
    "api",
    "apis",
    "endpoint",
    "endpoints",
    "component",
    "components",
    "handler",
    "handlers",
    "form",
    "forms",
    "page",
    "widget",
    "module",
    "system",
    "flow",
    "pipeline",
    "library",
    "button",
    "limit",
    "limits",
    "bug",
    "bugs",
    "server",
    "backend",
    "frontend",
    "ui",
];

/// Whether any sentence of `text` records a file upload.
pub(crate) fn mentions_upload(text: &str) -> bool {
    sentences(text).any(sentence_mentions_upload)
}

/// Removes the sentences that record file uploads, collapses runs of spaces and trims.
pub(crate) fn scrub_text(text: &str) -> String {
    let kept: String = sentences(text).filter(|s| !sentence_mentions_upload(s)).collect();
    let mut out = String::with_capacity(kept.len());
    for c in kept.chars() {
        if c == ' ' && out.ends_with(' ') {
            continue;
        }
        out.push(c);
    }
    out.trim().to_string()
}

/// Scrubs upload mentions from the six summaries and removes facts that mention uploads.
/// Summaries without such a mention are left byte for byte as they were. Returns the ids
/// of the removed facts, in document order.
pub(crate) fn scrub_document(doc: &mut Document) -> Vec<String> {
    for id in SectionId::ALL {
        let section = doc.section_mut(id);
        if mentions_upload(&section.summary) {
            section.summary = scrub_text(&section.summary);
        }
    }
    let mut removed = Vec::new();
    doc.facts.retain(|f| {
        let upload = mentions_upload(&f.content);
        if upload {
            removed.push(f.id.clone());
        }
        !upload
    });
    removed
}

/// Splits text into sentences, each keeping its terminal punctuation and the whitespace
/// after it, so concatenating them gives the text back. `.`, `!` and `?` end a sentence
/// only before whitespace or the end (so `report.pdf` and `v1.2` stay whole); `。`, `！`
/// and `？` always do.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = sentence_end(rest);
        let (sentence, tail) = rest.split_at(end);
        rest = tail;
        Some(sentence)
    })
}

/// Byte length of the first sentence of `text` (terminators and trailing whitespace
/// included).
fn sentence_end(text: &str) -> usize {
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let ends = match c {
            '。' | '！' | '？' => true,
            '.' | '!' | '?' => chars.peek().map_or(true, |&(_, n)| n.is_whitespace() || is_terminator(n)),
            _ => false,
        };
        if ends {
            let mut end = i + c.len_utf8();
            // Swallow further terminators ("?!", "...") and the whitespace after them.
            while let Some(&(j, n)) = chars.peek() {
                if is_terminator(n) || n.is_whitespace() {
                    end = j + n.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            return end;
        }
    }
    text.len()
}

fn is_terminator(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '。' | '！' | '？')
}

fn sentence_mentions_upload(sentence: &str) -> bool {
    let lower = crate::base::unicode::lowercase(sentence);
    if lower.contains("/mnt/user-data/uploads/") || lower.contains("<uploaded_files>") || lower.contains("<current_uploads>") {
        return true;
    }
    if lower.contains("上传") && ["文件", "附件", "文档"].iter().any(|w| lower.contains(w)) {
        return true;
    }
    let words: Vec<&str> = lower.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
    words.iter().enumerate().any(|(i, w)| {
        if UPLOAD_WORDS.contains(w) {
            for n in words[i + 1..].iter().take(4) {
                if FEATURE_WORDS.contains(n) {
                    return false;
                }
                if FILE_WORDS.contains(n) {
                    return true;
                }
            }
            return false;
        }
        *w == "file"
            && words.get(i + 1).is_some_and(|n| *n == "upload" || *n == "uploads")
            && !words.get(i + 2).is_some_and(|n| FEATURE_WORDS.contains(n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::document::Fact;

    fn fact(id: &str, content: &str) -> Fact {
        Fact {
            id: id.into(),
            content: content.into(),
            category: "context".into(),
            confidence: 0.9,
            created_at: String::new(),
            source: "t".into(),
            extra: Default::default(),
        }
    }

    #[test]
    fn detects_upload_sentences_in_english() {
        for s in [
            "The user uploaded a CSV file.",
            "User is uploading three large PDF documents",
            "Uploaded the quarterly report attachment",
            "Mentioned a file upload earlier",
            "Files are at /mnt/user-data/uploads/report.pdf",
            "Sent <uploaded_files> block",
            "UPLOADS FILES OFTEN",
        ] {
            assert!(mentions_upload(s), "{s}");
        }
    }

    #[test]
    fn keeps_legitimate_mentions() {
        for s in [
            "Works with CSV files",
            "Prefers PDF export",
            "Uploaded photos of the trip to Flickr",
            "Wrote the upload handler. Files are stored in S3.",
            "Reads documents on upload day and more words later files",
            "Building a file upload service in Go",
            "Building an upload service for PDF files",
            "Fixing the file upload bug in the billing app",
            "Owns the upload API for attachments",
        ] {
            assert!(!mentions_upload(s), "{s}");
        }
    }

    #[test]
    fn upload_word_window_is_three_words() {
        assert!(mentions_upload("uploaded one two three files"));
        assert!(!mentions_upload("uploaded one two three four files"));
    }

    #[test]
    fn detects_chinese_upload_sentences() {
        assert!(mentions_upload("用户上传了一个PDF文件。"));
        assert!(mentions_upload("他上传附件"));
        assert!(!mentions_upload("用户在上传服务上工作。文件格式是JSON。"));
        assert!(!mentions_upload("喜欢处理CSV文件"));
    }

    #[test]
    fn scrub_text_removes_only_matching_sentences() {
        let s = "Works on Acme's billing service. The user uploaded a file named q3.xlsx for review! Prefers PDF export.";
        assert_eq!(scrub_text(s), "Works on Acme's billing service. Prefers PDF export.");
        assert_eq!(scrub_text("用户是后端工程师。用户上传了文件。喜欢Rust。"), "用户是后端工程师。喜欢Rust。");
        assert_eq!(scrub_text("a  b.   Uploaded files!  c"), "a b. c");
    }

    #[test]
    fn file_names_do_not_split_sentences() {
        assert_eq!(scrub_text("Uploaded report.pdf document today. Likes Go."), "Likes Go.");
    }

    #[test]
    fn scrub_document_cleans_summaries_and_removes_facts() {
        let mut doc = Document::empty();
        doc.section_mut(SectionId::TopOfMind).summary = "Debugging a Kafka consumer. Uploaded two log files for analysis.".into();
        doc.section_mut(SectionId::WorkContext).summary = "Backend  engineer.  ".into();
        doc.facts = vec![
            fact("fact_00000001", "Works with CSV files"),
            fact("fact_00000002", "User uploaded resume.pdf document"),
            fact("fact_00000003", "Keeps files in /mnt/user-data/uploads/x"),
        ];
        let removed = scrub_document(&mut doc);
        assert_eq!(removed, vec!["fact_00000002", "fact_00000003"]);
        assert_eq!(doc.facts.len(), 1);
        assert_eq!(doc.section(SectionId::TopOfMind).summary, "Debugging a Kafka consumer.");
        assert_eq!(doc.section(SectionId::WorkContext).summary, "Backend  engineer.  ", "untouched");
    }
}
