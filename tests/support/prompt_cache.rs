//! A model of Anthropic's prompt cache, for a fake Messages server: a request is a
//! sequence of blocks (tools, then system, then each message's content blocks); a
//! `cache_control` marker writes the prefix ending at its block, and a later request
//! reads the longest cached prefix ending at a marker or up to 20 blocks before one.
//! Prefixes under 1,024 tokens are not cached. Tokens are counted as 4 bytes each.
//! The usage it reports has Anthropic's shape: `input_tokens` (uncached),
//! `cache_creation_input_tokens`, `cache_read_input_tokens`.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Value, json};

/// Blocks before a marker that a lookup also tries.
pub const LOOKBACK: usize = 20;
/// The smallest prefix the cache keeps.
pub const MIN_TOKENS: u64 = 1024;

/// What one request read, wrote and paid in full.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUse {
    pub uncached: u64,
    pub written: u64,
    pub read: u64,
}

impl CacheUse {
    pub fn total(&self) -> u64 {
        self.uncached + self.written + self.read
    }

    /// The `usage` object Anthropic sends with it.
    pub fn usage(&self, output_tokens: u64) -> Value {
        json!({"input_tokens": self.uncached, "cache_creation_input_tokens": self.written,
               "cache_read_input_tokens": self.read, "output_tokens": output_tokens})
    }
}

/// The cached prefixes, by the hash of everything up to and including their last block.
#[derive(Debug, Default)]
pub struct PromptCache {
    prefixes: HashSet<u64>,
}

/// One block as the cache sees it: its bytes without the marker, and whether it had one.
pub fn blocks(body: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut push = |block: &Value| {
        let marked = !block["cache_control"].is_null();
        let mut clean = block.clone();
        if let Some(o) = clean.as_object_mut() {
            o.remove("cache_control");
        }
        out.push((clean.to_string(), marked));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push(t);
    }
    match &body["system"] {
        Value::Array(system) => system.iter().for_each(&mut push),
        Value::String(s) => push(&json!({"type": "text", "text": s})),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        match &m["content"] {
            Value::Array(content) => {
                for b in content {
                    // The role is part of what a block means.
                    let mut b = b.clone();
                    b["_role"] = m["role"].clone();
                    push(&b);
                }
            }
            other => push(&json!({"type": "text", "text": other, "_role": m["role"]})),
        }
    }
    out
}

fn tokens(bytes: &str) -> u64 {
    (bytes.len() as u64).div_ceil(4)
}

impl PromptCache {
    /// Serves one request: what it read from the cache, what it wrote, what it paid
    /// in full; and remembers the prefixes it marked.
    pub fn serve(&mut self, body: &Value) -> CacheUse {
        let blocks = blocks(body);
        let mut hashes = Vec::with_capacity(blocks.len());
        let mut cumulative = Vec::with_capacity(blocks.len());
        let mut h = DefaultHasher::new();
        let mut sum = 0;
        for (bytes, _) in &blocks {
            bytes.hash(&mut h);
            hashes.push(h.finish());
            sum += tokens(bytes);
            cumulative.push(sum);
        }
        let markers: Vec<usize> = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.1)
            .map(|(i, _)| i)
            .collect();
        let hit = markers
            .iter()
            .filter_map(|&m| {
                (m.saturating_sub(LOOKBACK - 1)..=m)
                    .rev()
                    .find(|&p| self.prefixes.contains(&hashes[p]))
            })
            .max();
        let read = hit.map_or(0, |p| cumulative[p]);
        let written = match markers.last() {
            Some(&last) if cumulative[last] >= MIN_TOKENS && cumulative[last] > read => {
                cumulative[last] - read
            }
            _ => 0,
        };
        for &m in &markers {
            if cumulative[m] >= MIN_TOKENS {
                self.prefixes.insert(hashes[m]);
            }
        }
        CacheUse {
            uncached: sum - read - written,
            written,
            read,
        }
    }
}

/// Whether `later` starts with everything `earlier` sent up to its last marker, block
/// for block (markers aside): the property that lets `later` read `earlier`'s prefix.
pub fn extends_prefix(earlier: &Value, later: &Value) -> bool {
    let (a, b) = (blocks(earlier), blocks(later));
    let Some(last) = a.iter().rposition(|x| x.1) else {
        return true;
    };
    b.len() > last && a[..=last].iter().zip(&b[..=last]).all(|(x, y)| x.0 == y.0)
}
