//! "Did you mean …?" for option names: the known name closest to a mistyped one.

/// The entry of `known` that `name` most likely misspells: equal ignoring ASCII case
/// (`baseURL` → `baseUrl`), else within two edits and less than half the name
/// (`debounce` → `debounceMs`, `maxFact` → `maxFacts`). `None` when nothing is that close.
pub fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    if let Some(k) = known.iter().find(|k| k.eq_ignore_ascii_case(name)) {
        return Some(k);
    }
    let lower = name.to_ascii_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for k in known {
        let d = distance(&lower, &k.to_ascii_lowercase());
        if d <= 2 && 2 * d < name.chars().count() && best.map_or(true, |(b, _)| d < b) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

/// `": did you mean `x`?"` to append to a message naming `name`, or `""`.
pub fn did_you_mean(name: &str, known: &[&str]) -> String {
    closest(name, known).map_or_else(String::new, |k| format!(": did you mean `{k}`?"))
}

/// Levenshtein distance over characters (names are short: a two-row table).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            row[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(row[j] + 1);
        }
        std::mem::swap(&mut prev, &mut row);
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
