//! The built-in token estimate of texts, for benchmarks written in JS (bench/prompt-tokens.mjs,
//! bench/models.mjs), which compare it with a real tokenizer.
//!
//! ```text
//! cargo run -q --example count_tokens -- a.txt b.txt   # one count per file, in order
//! cargo run -q --example count_tokens -- --system      # the built-in system prompt's count
//! ```

// A tool run natively: the size rules of clippy.toml are for the wasm build.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use user_memory::prompt::{system_prompt, PromptOptions};
use user_memory::tokens::{Estimate, TokenCounter};

fn main() {
    for arg in std::env::args().skip(1) {
        let text = if arg == "--system" {
            system_prompt(&PromptOptions::default())
        } else {
            std::fs::read_to_string(&arg).unwrap_or_else(|e| panic!("{arg}: {e}"))
        };
        println!("{}", Estimate.count(&text));
    }
}
