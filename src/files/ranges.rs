//! What of a file has been read into context: merged, inclusive ranges.

use serde::{Deserialize, Serialize};

/// Read tracking for one file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadState {
    /// The whole file was read (or loaded) at least once.
    pub whole: bool,
    /// 1-based inclusive line ranges.
    pub lines: Vec<[u64; 2]>,
    /// 0-based byte ranges, end exclusive.
    pub bytes: Vec<[u64; 2]>,
}

impl ReadState {
    pub fn add_lines(&mut self, start: u64, end: u64) {
        merge(&mut self.lines, [start, end], 1);
    }

    pub fn add_bytes(&mut self, start: u64, end: u64) {
        merge(&mut self.bytes, [start, end], 0);
    }

    /// `none`, `all`, or `lines 1-20, 40-45; bytes 0-1024`.
    pub fn describe(&self) -> String {
        if self.whole {
            return "all".into();
        }
        let fmt = |r: &[[u64; 2]]| {
            r.iter()
                .map(|[a, b]| format!("{a}-{b}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.lines.is_empty() {
            parts.push(format!("lines {}", fmt(&self.lines)));
        }
        if !self.bytes.is_empty() {
            parts.push(format!("bytes {}", fmt(&self.bytes)));
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join("; ")
        }
    }
}

/// Inserts `r` and merges ranges that overlap or touch (`gap` allows adjacency).
fn merge(ranges: &mut Vec<[u64; 2]>, r: [u64; 2], gap: u64) {
    ranges.push(r);
    ranges.sort_unstable();
    let mut out: Vec<[u64; 2]> = Vec::with_capacity(ranges.len());
    for cur in ranges.drain(..) {
        match out.last_mut() {
            Some(last) if cur[0] <= last[1] + gap => last[1] = last[1].max(cur[1]),
            _ => out.push(cur),
        }
    }
    *ranges = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_adjacent_and_overlapping_ranges() {
        let mut r = ReadState::default();
        assert_eq!(r.describe(), "none");
        r.add_lines(10, 20);
        r.add_lines(1, 5);
        r.add_lines(21, 30);
        r.add_lines(4, 8);
        assert_eq!(r.lines, vec![[1, 8], [10, 30]]);
        r.add_bytes(0, 100);
        r.add_bytes(100, 200);
        assert_eq!(r.describe(), "lines 1-8, 10-30; bytes 0-200");
        r.whole = true;
        assert_eq!(r.describe(), "all");
    }
}
