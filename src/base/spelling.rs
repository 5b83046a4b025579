//! "Did you mean …?" for option names: the known name closest to a mistyped one.

/// The entry of `known` that `name` most likely misspells: equal ignoring ASCII case
/// (`baseURL` → `baseUrl`), else within two edits and less than half the name
/// (`debounce` → `debounceMs`, `maxFact` → `maxFacts`). `None` when nothing is that close.
pub(crate) fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let mut best = None;
    let mut best_d = 3;
    for k in known {
        let d = distance(name.as_bytes(), k.as_bytes());
        if d < best_d && 2 * d < name.len() {
            (best, best_d) = (Some(*k), d);
        }
    }
    best
}

/// `": did you mean `x`?"` to append to a message naming `name`, or `""`.
pub(crate) fn did_you_mean(name: &str, known: &[&str]) -> String {
    match closest(name, known) {
        Some(k) => String::from(": did you mean `") + k + "`?",
        None => String::new(),
    }
}

/// Levenshtein distance over bytes, ignoring ASCII case (option names are short ASCII; a
/// name over 40 bytes is close to nothing).
fn distance(a: &[u8], b: &[u8]) -> usize {
    const MAX: usize = 40;
    if a.len() > MAX || b.len() > MAX {
        return usize::MAX;
    }
    let mut prev = [0usize; MAX + 1];
    let mut row = [0usize; MAX + 1];
    for (j, p) in prev.iter_mut().enumerate().take(b.len() + 1) {
        *p = j;
    }
    for (i, ca) in a.iter().enumerate() {
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(!ca.eq_ignore_ascii_case(cb));
            row[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const LLM: &[&str] = &["provider", "baseUrl", "apiKey", "model", "headers", "timeoutMs", "maxRetries"];

    #[test]
    fn near_misses_find_their_option() {
        assert_eq!(closest("baseURL", LLM), Some("baseUrl"));
        assert_eq!(closest("apikey", LLM), Some("apiKey"));
        assert_eq!(closest("timeout", LLM), Some("timeoutMs"));
        assert_eq!(closest("modle", LLM), Some("model"));
        assert_eq!(closest("maxRetrys", LLM), Some("maxRetries"));
        assert_eq!(did_you_mean("base_url", LLM), ": did you mean `baseUrl`?");
    }

    #[test]
    fn unrelated_names_get_no_suggestion() {
        assert_eq!(closest("temperature", LLM), None);

        assert_eq!(closest("x", LLM), None, "one letter is no misspelling of anything");
        assert_eq!(closest("url", LLM), None);
        assert_eq!(did_you_mean("organization", LLM), "");
    }
}
