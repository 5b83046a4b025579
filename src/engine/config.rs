//! The options of `UserMemory.open()` (docs/design.md#options), validated.
//!
//! The platform layer hands over the JSON-representable options as a [`Value`]
//! object; functions and adapter objects (`llm` as a function, `storage` as an adapter,
//! `countTokens`) are taken out before and handled there. Every option is optional; a
//! negative, non-finite, fractional (for counts) or wrongly typed value is an
//! `INVALID_INPUT` error naming the option, and so is an unknown option name (a typo such as
//! `debounceMS` would otherwise be silently ignored).

use crate::base::error::{Error, Result};
use crate::extract::apply::{ApplyConfig, EvictionPolicy};
use crate::extract::prompt::PromptOptions;
use crate::json::field::{opt_bool, opt_f64, opt_str, opt_uint};
use crate::json::{Map, ObjectWriter, ToJson, Value};
use crate::queue::QueueConfig;
use crate::recall::inject::InjectOptions;

/// Validated options.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Memory namespace: 1–64 characters, case-sensitive (default `"default"`).
    pub agent: String,
    /// Debounce, attempts and maximum wait of the update queue.
    pub queue: QueueConfig,
    /// Threshold and cap for new facts.
    pub apply: ApplyConfig,
    /// Selection and budget of the injected block.
    pub inject: InjectOptions,
    /// Overrides of the extraction prompt.
    pub prompt: PromptOptions,
    /// Token budget of one extraction call (instructions, memory, conversation and room
    /// for the reply); a larger burst is split into several calls (default 8192, sized for
    /// an 8k-context model).
    pub max_extraction_tokens: usize,
    /// Tokens of facts one extraction prompt shows at most: with a larger memory, only the
    /// facts that matter for the new messages (default 2000; 0 shows none but the summaries).
    pub extraction_memory_tokens: usize,
    /// `false` turns learning off: `observe()` queues nothing (default `true`).
    pub enabled: bool,
    /// Whether timers drive the queue; `false` leaves it to `processDue()` (default `true`).
    pub auto_process: bool,
    /// How long `close()` waits for storage before it gives up (default 10 000 ms).
    pub close_timeout_ms: u64,
    /// History entries kept with the document (default 100; 0 turns the history off).
    pub history_limit: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            agent: "default".into(),
            queue: QueueConfig::default(),
            apply: ApplyConfig { threshold: 0.7, max_facts: DEFAULT_MAX_FACTS, policy: EvictionPolicy::Confidence },
            inject: InjectOptions {
                enabled: true,
                max_tokens: 2000,
                top_facts: 15,
                extra_facts: 15,
                recent_turns: 3,
                similarity_weight: 0.6,
                confidence_weight: 0.4,
                neutralize_links: true,
                now_ms: None,
                dates: true,
            },
            prompt: PromptOptions::default(),
            max_extraction_tokens: DEFAULT_MAX_EXTRACTION_TOKENS,
            extraction_memory_tokens: crate::extract::prompt::DEFAULT_EXTRACTION_MEMORY_TOKENS,
            enabled: true,
            auto_process: true,
            close_timeout_ms: 10_000,
            history_limit: crate::memory::history::DEFAULT_HISTORY_LIMIT,
        }
    }
}

/// Default of `maxFacts`: a user's whole history. The extraction prompt does not grow with
/// it (`extractionMemoryTokens`), and `inject()` stays under 2 ms at this size.
pub const DEFAULT_MAX_FACTS: usize = 10_000;

/// Default of `maxExtractionTokens`: an 8k-context model.
pub const DEFAULT_MAX_EXTRACTION_TOKENS: usize = 8192;
/// The smallest `maxExtractionTokens` accepted: the instructions alone take about 1 500.
pub const MIN_EXTRACTION_TOKENS: usize = 2048;

/// Option names read by [`Config::from_value`]; the platform layer handles `llm`,
/// `storage` and `countTokens` itself.
pub const KNOWN_OPTIONS: &[&str] = &[
    "agent",
    "userId",
    "debounceMs",
    "maxWaitMs",
    "maxAttempts",
    "maxFacts",
    "evictionPolicy",
    "factConfidenceThreshold",
    "maxExtractionTokens",
    "extractionMemoryTokens",
    "maxInjectionTokens",
    "topFacts",
    "extraFacts",
    "recentTurns",
    "similarityWeight",
    "confidenceWeight",
    "injectionEnabled",
    "neutralizeLinks",
    "injectDates",
    "enabled",
    "autoProcess",
    "closeTimeoutMs",
    "prompt",
    "historyLimit",
];

impl Config {
    /// Validates the options object (without `llm`, `storage`, `countTokens`).
    pub fn from_value(v: &Value) -> Result<Config> {
        let empty = Map::new();
        let obj = match v {
            Value::Null => &empty,
            Value::Object(o) => o,
            other => return Err(Error::invalid(format!("options must be an object, found {}", other.type_name()))),
        };
        let mut c = Config::default();
        c.apply(obj)?;
        Ok(c)
    }

    /// A copy with the options in `v` changed (for `configure()` at runtime). The agent
    /// cannot change: open another instance for another agent.
    pub fn with_changes(&self, v: &Value) -> Result<Config> {
        let obj = v.as_object().ok_or_else(|| Error::invalid(format!("options must be an object, found {}", v.type_name())))?;
        for name in ["agent", "userId"] {
            if obj.contains_key(name) {
                return Err(Error::invalid(format!("`{name}` cannot change on an open instance; open another one")));
            }
        }
        let mut c = self.clone();
        c.apply(obj)?;
        Ok(c)
    }

    fn apply(&mut self, obj: &Map) -> Result<()> {
        if let Some(k) = obj.keys().find(|k| !KNOWN_OPTIONS.contains(&k.as_str())) {
            // A field of `llm` given at the top level is the likeliest slip of all.
            if crate::llm::config::is_llm_key(k) {
                return Err(Error::invalid(format!("unknown option `{k}`: it belongs inside `llm` ({{ llm: {{ {k}, … }} }})")));
            }
            let hint = crate::base::spelling::did_you_mean(k, &[KNOWN_OPTIONS, &["llm", "storage", "countTokens"]].concat());
            return Err(Error::invalid(format!("unknown option `{k}`{hint}")));
        }
        let c = self;
        if let Some(agent) = agent_option(opt_str(obj, "", "agent")?, opt_str(obj, "", "userId")?)? {
            c.agent = agent.to_string();
        }
        if let Some(x) = opt_uint(obj, "", "debounceMs")? {
            c.queue.debounce_ms = x;
        }
        if let Some(x) = opt_uint(obj, "", "maxWaitMs")? {
            c.queue.max_wait_ms = x;
        }
        if let Some(x) = opt_uint(obj, "", "maxAttempts")? {
            c.queue.max_attempts = positive(x, "maxAttempts")? as u32;
        }
        if let Some(x) = opt_uint(obj, "", "maxFacts")? {
            c.apply.max_facts = positive(x, "maxFacts")? as usize;
        }
        if let Some(p) = opt_str(obj, "", "evictionPolicy")? {
            c.apply.policy = EvictionPolicy::parse(p)
                .ok_or_else(|| Error::invalid(format!("`evictionPolicy` must be \"confidence\" or \"hybrid\", found \"{p}\"")))?;
        }
        if let Some(x) = opt_uint(obj, "", "maxExtractionTokens")? {
            if x < MIN_EXTRACTION_TOKENS as u64 {
                return Err(Error::invalid(format!("`maxExtractionTokens` must be at least {MIN_EXTRACTION_TOKENS}")));
            }
            c.max_extraction_tokens = x.min(u32::MAX as u64) as usize;
        }
        if let Some(x) = opt_uint(obj, "", "extractionMemoryTokens")? {
            c.extraction_memory_tokens = x.min(u32::MAX as u64) as usize;
        }
        if let Some(x) = opt_f64(obj, "", "factConfidenceThreshold")? {
            if x > 1.0 {
                return Err(Error::invalid("`factConfidenceThreshold` must be within [0, 1]"));
            }
            c.apply.threshold = x;
        }
        if let Some(x) = opt_uint(obj, "", "maxInjectionTokens")? {
            c.inject.max_tokens = x as usize;
        }
        if let Some(x) = opt_uint(obj, "", "topFacts")? {
            c.inject.top_facts = x as usize;
        }
        if let Some(x) = opt_uint(obj, "", "extraFacts")? {
            c.inject.extra_facts = x as usize;
        }
        if let Some(x) = opt_uint(obj, "", "recentTurns")? {
            c.inject.recent_turns = x as usize;
        }
        if let Some(x) = opt_f64(obj, "", "similarityWeight")? {
            c.inject.similarity_weight = x;
        }
        if let Some(x) = opt_f64(obj, "", "confidenceWeight")? {
            c.inject.confidence_weight = x;
        }
        if let Some(x) = opt_bool(obj, "", "injectionEnabled")? {
            c.inject.enabled = x;
        }
        if let Some(x) = opt_bool(obj, "", "neutralizeLinks")? {
            c.inject.neutralize_links = x;
        }
        if let Some(x) = opt_bool(obj, "", "injectDates")? {
            c.inject.dates = x;
        }
        if let Some(x) = opt_bool(obj, "", "enabled")? {
            c.enabled = x;
        }
        if let Some(x) = opt_bool(obj, "", "autoProcess")? {
            c.auto_process = x;
        }
        if let Some(x) = opt_uint(obj, "", "closeTimeoutMs")? {
            c.close_timeout_ms = positive(x, "closeTimeoutMs")?;
        }
        if let Some(x) = opt_uint(obj, "historyLimit", "historyLimit")? {
            c.history_limit = x.min(u32::MAX as u64) as usize;
        }
        match obj.get("prompt") {
            None | Some(Value::Null) => {}
            Some(Value::Object(p)) => {
                if let Some(k) = p.keys().find(|k| *k != "instructions" && *k != "append") {
                    let hint = crate::base::spelling::did_you_mean(k, &["instructions", "append"]);
                    return Err(Error::invalid(format!("unknown option `prompt.{k}`{hint} (known: instructions, append)")));
                }
                c.prompt.instructions = opt_str(p, "prompt", "instructions")?.map(str::to_string);
                c.prompt.append = opt_str(p, "prompt", "append")?.map(str::to_string);
            }
            Some(other) => return Err(crate::json::field::wrong_type("prompt", "an object { instructions?, append? }", other).into()),
        }
        Ok(())
    }
}

/// The options with their public names (what `memory.options()` returns). Weights and the
/// threshold are written with 6 decimals.
impl ToJson for Config {
    fn write_json(&self, out: &mut String) {
        let mut o = ObjectWriter::new(out);
        o.str("agent", &self.agent)
            .u64("debounceMs", self.queue.debounce_ms)
            .u64("maxWaitMs", self.queue.max_wait_ms)
            .u64("maxAttempts", self.queue.max_attempts.into())
            .u64("maxFacts", self.apply.max_facts as u64)
            .str("evictionPolicy", self.apply.policy.as_str())
            .fixed("factConfidenceThreshold", self.apply.threshold, 6)
            .u64("maxExtractionTokens", self.max_extraction_tokens as u64)
            .u64("extractionMemoryTokens", self.extraction_memory_tokens as u64)
            .u64("maxInjectionTokens", self.inject.max_tokens as u64)
            .u64("topFacts", self.inject.top_facts as u64)
            .u64("extraFacts", self.inject.extra_facts as u64)
            .u64("recentTurns", self.inject.recent_turns as u64)
            .fixed("similarityWeight", self.inject.similarity_weight, 6)
            .fixed("confidenceWeight", self.inject.confidence_weight, 6)
            .bool("injectionEnabled", self.inject.enabled)
            .bool("neutralizeLinks", self.inject.neutralize_links)
            .bool("injectDates", self.inject.dates)
            .bool("enabled", self.enabled)
            .bool("autoProcess", self.auto_process)
            .u64("closeTimeoutMs", self.close_timeout_ms)
            .u64("historyLimit", self.history_limit as u64);
        let mut prompt = ObjectWriter::new(o.key("prompt"));
        prompt.opt_str("instructions", self.prompt.instructions.as_deref()).opt_str("append", self.prompt.append.as_deref());
        prompt.finish();
        o.finish();
    }
}

/// Agent names are case-sensitive strings of 1–64 characters.
pub fn validate_agent(agent: &str) -> Result<()> {
    validate_agent_named(agent, "agent")
}

fn validate_agent_named(agent: &str, name: &str) -> Result<()> {
    let n = agent.chars().count();
    if n == 0 || n > 64 {
        return Err(Error::invalid(format!("`{name}` must be 1 to 64 characters long, found {n}")));
    }
    if agent.chars().any(char::is_control) {
        return Err(Error::invalid(format!("`{name}` must not contain control characters")));
    }
    Ok(())
}

/// The memory's key from `agent` or its alias `userId` (the name users of mem0 and Zep look
/// for; a server passes its user id either way), validated. Both given must agree: two
/// different values are a mistake that would otherwise open one user's memory for another.
pub fn agent_option<'a>(agent: Option<&'a str>, user_id: Option<&'a str>) -> Result<Option<&'a str>> {
    match (agent, user_id) {
        (Some(a), Some(u)) if a != u => {
            let (mut qa, mut qu) = (String::new(), String::new());
            crate::json::write_str(&mut qa, a);
            crate::json::write_str(&mut qu, u);
            Err(Error::invalid(format!("`agent` and its alias `userId` differ ({qa}, {qu}): give one")))
        }
        (Some(a), _) => validate_agent_named(a, "agent").map(|()| Some(a)),
        (None, Some(u)) => validate_agent_named(u, "userId").map(|()| Some(u)),
        (None, None) => Ok(None),
    }
}

fn positive(x: u64, name: &str) -> Result<u64> {
    if x == 0 {
        return Err(Error::invalid(format!("`{name}` must be at least 1")));
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_spec() {
        let c = Config::from_value(&json!({})).unwrap();
        assert_eq!(c.agent, "default");
        assert_eq!(c.queue.debounce_ms, 30_000);
        assert_eq!(c.queue.max_wait_ms, 300_000);
        assert_eq!(c.queue.max_attempts, 5);
        assert_eq!((c.apply.max_facts, c.extraction_memory_tokens), (10_000, 2000));
        assert_eq!(c.apply.threshold, 0.7);
        assert_eq!(c.inject.max_tokens, 2000);
        assert_eq!(c.inject.top_facts, 15);
        assert_eq!(c.inject.extra_facts, 15);
        assert_eq!(c.inject.recent_turns, 3);
        assert_eq!((c.inject.similarity_weight, c.inject.confidence_weight), (0.6, 0.4));
        assert!(c.inject.enabled && c.enabled && c.auto_process);
        assert!(c.inject.neutralize_links);
        assert_eq!((c.apply.policy, c.max_extraction_tokens), (EvictionPolicy::Confidence, 8192));
    }

    #[test]
    fn options_round_trip_through_their_json_form_and_change_at_runtime() {
        let c = Config::from_value(&json!({"agent": "coder", "debounceMs": 150, "prompt": {"append": "x"}, "evictionPolicy": "hybrid", "maxExtractionTokens": 4096, "neutralizeLinks": false})).unwrap();
        let mut v = c.to_value();
        v.as_object_mut().unwrap().remove("agent");
        let again = Config::default().with_changes(&v).unwrap();
        assert_eq!(again.queue, c.queue);
        assert_eq!(again.prompt, c.prompt);
        assert_eq!((again.apply, again.max_extraction_tokens, again.inject.neutralize_links), (c.apply, 4096, false));
        let paused = c.with_changes(&json!({"enabled": false})).unwrap();
        assert!(!paused.enabled && paused.agent == "coder");
        assert_eq!(c.with_changes(&json!({"agent": "other"})).unwrap_err().code(), "INVALID_INPUT");
        assert_eq!(c.with_changes(&json!({"topFacts": -1})).unwrap_err().code(), "INVALID_INPUT");
        assert_eq!(c.with_changes(&json!({"extraFacts": 0})).unwrap().inject.extra_facts, 0);
        assert_eq!(c.with_changes(&json!({"extraFacts": 1.5})).unwrap_err().code(), "INVALID_INPUT");
    }

    #[test]
    fn a_mistyped_option_gets_a_suggestion_and_an_llm_field_is_pointed_inside_llm() {
        let message = |v| Config::from_value(&v).unwrap_err().message();
        assert_eq!(message(json!({"debounce": 5})), "unknown option `debounce`: did you mean `debounceMs`?");
        assert_eq!(message(json!({"autoprocess": false})), "unknown option `autoprocess`: did you mean `autoProcess`?");
        assert_eq!(message(json!({"apiKey": "k"})), "unknown option `apiKey`: it belongs inside `llm` ({ llm: { apiKey, … } })");
        assert_eq!(message(json!({"flavour": 1})), "unknown option `flavour`");
        assert_eq!(
            message(json!({"prompt": {"instruction": "x"}})),
            "unknown option `prompt.instruction`: did you mean `instructions`? (known: instructions, append)"
        );
    }

    #[test]
    fn user_id_is_an_alias_of_agent_and_both_must_agree() {
        assert_eq!(Config::from_value(&json!({"userId": "u-42"})).unwrap().agent, "u-42");
        assert_eq!(Config::from_value(&json!({"agent": "u-42", "userId": "u-42"})).unwrap().agent, "u-42");
        let err = Config::from_value(&json!({"agent": "alice", "userId": "bob"})).unwrap_err();
        assert_eq!(err.code(), "INVALID_INPUT");
        assert_eq!(err.message(), "`agent` and its alias `userId` differ (\"alice\", \"bob\"): give one");
        assert!(Config::from_value(&json!({"userId": ""})).unwrap_err().message().starts_with("`userId` must be 1 to 64"));
        assert!(Config::from_value(&json!({"userId": 7})).unwrap_err().message().contains("userId"));
        assert_eq!(Config::default().with_changes(&json!({"userId": "x"})).unwrap_err().code(), "INVALID_INPUT");
        assert_eq!(agent_option(None, None).unwrap(), None);
    }

    #[test]
    fn small_positive_values_are_valid() {
        let c = Config::from_value(&json!({"debounceMs": 150, "maxFacts": 3, "maxInjectionTokens": 120})).unwrap();
        assert_eq!((c.queue.debounce_ms, c.apply.max_facts, c.inject.max_tokens), (150, 3, 120));
    }

    #[test]
    fn bad_values_name_the_option() {
        let cases = [
            (json!({"debounceMs": -1}), "debounceMs"),
            (json!({"debounceMs": "30"}), "debounceMs"),
            (json!({"maxFacts": 2.5}), "maxFacts"),
            (json!({"maxFacts": 0}), "maxFacts"),
            (json!({"topFacts": true}), "topFacts"),
            (json!({"factConfidenceThreshold": 1.5}), "factConfidenceThreshold"),
            (json!({"agent": ""}), "agent"),
            (json!({"agent": "x".repeat(65)}), "agent"),
            (json!({"agent": 7}), "agent"),
            (json!({"debounceMS": 10}), "debounceMS"),
            (json!({"prompt": "x"}), "prompt"),
            (json!({"evictionPolicy": "lru"}), "evictionPolicy"),
            (json!({"evictionPolicy": 1}), "evictionPolicy"),
            (json!({"maxExtractionTokens": 100}), "maxExtractionTokens"),
            (json!({"neutralizeLinks": "yes"}), "neutralizeLinks"),
            (json!({"injectDates": 1}), "injectDates"),
            (json!([]), "options"),
        ];
        for (v, name) in cases {
            let err = Config::from_value(&v).unwrap_err();
            assert_eq!(err.code(), "INVALID_INPUT");
            assert!(err.message().contains(name), "{} should mention {name}", err.message());
        }
    }
}
