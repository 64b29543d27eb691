//! Skill search for catalogs too large for the system prompt: BM25 over each skill's
//! name and description. Names weigh double: a query naming a skill finds it first.

use std::collections::HashMap;

/// BM25's term-frequency saturation and length normalization (the usual values).
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Words too common to tell skills apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "i", "in", "into", "is", "it",
    "me", "my", "of", "on", "or", "our", "that", "the", "this", "to", "use", "used", "using", "want", "we",
    "what", "when", "with", "you", "your", "skill", "need", "needs", "can", "do",
];

/// Lower-cased words of `text` without stop words, each cut to a crude stem so
/// "reports" finds "report" and "filling" finds "fill".
pub fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

fn stem(word: &str) -> String {
    for suffix in ["ing", "ies", "es", "ed", "s"] {
        if let Some(base) = word.strip_suffix(suffix)
            && base.chars().count() >= 3
        {
            return match suffix {
                "ies" => format!("{base}y"),
                _ => base.to_string(),
            };
        }
    }
    word.to_string()
}

/// An index over skills' names and descriptions.
#[derive(Debug, Clone, Default)]
pub struct SkillIndex {
    /// Per skill: its name and the count of each term.
    docs: Vec<(String, HashMap<String, u32>, u32)>,
    /// Skills each term appears in.
    df: HashMap<String, u32>,
    avg_len: f64,
}

impl SkillIndex {
    /// Indexes `(name, description)` pairs.
    pub fn new<'a>(skills: impl IntoIterator<Item = (&'a str, &'a str)>) -> SkillIndex {
        let mut index = SkillIndex::default();
        let mut total = 0u64;
        for (name, description) in skills {
            let name_terms = terms(&name.replace('-', " "));
            let mut counts: HashMap<String, u32> = HashMap::new();
            // The name counts twice: it is the skill's most specific words.
            for t in name_terms.iter().chain(&name_terms).chain(&terms(description)) {
                *counts.entry(t.clone()).or_default() += 1;
            }
            let len: u32 = counts.values().sum();
            total += u64::from(len);
            for t in counts.keys() {
                *index.df.entry(t.clone()).or_default() += 1;
            }
            index.docs.push((name.to_string(), counts, len));
        }
        index.avg_len = if index.docs.is_empty() {
            0.0
        } else {
            total as f64 / index.docs.len() as f64
        };
        index
    }

    /// Up to `k` skill names best matching `query`, best first; skills sharing no term
    /// with it are left out.
    pub fn search(&self, query: &str, k: usize) -> Vec<(String, f64)> {
        let n = self.docs.len() as f64;
        let mut query_terms = terms(query);
        query_terms.sort();
        query_terms.dedup();
        let mut scored: Vec<(String, f64)> = self
            .docs
            .iter()
            .filter_map(|(name, counts, len)| {
                let score: f64 = query_terms
                    .iter()
                    .filter_map(|t| {
                        let tf = f64::from(*counts.get(t)?);
                        let df = f64::from(self.df.get(t).copied().unwrap_or(0));
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        let norm = K1 * (1.0 - B + B * f64::from(*len) / self.avg_len.max(1.0));
                        Some(idf * tf * (K1 + 1.0) / (tf + norm))
                    })
                    .sum();
                (score > 0.0).then(|| (name.clone(), score))
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored.truncate(k);
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_by_description_words_and_prefers_names() {
        let index = SkillIndex::new([
            (
                "pdf-forms",
                "Fill PDF forms from data and check which fields are fillable.",
            ),
            (
                "spreadsheet-recalc",
                "Recalculate formulas in spreadsheets after edits.",
            ),
            ("release-notes", "Write release notes from merged pull requests."),
        ]);
        let hits = index.search("filling in a PDF form", 3);
        assert_eq!(hits[0].0, "pdf-forms");
        let hits = index.search("recalculate formulas", 3);
        assert_eq!(hits[0].0, "spreadsheet-recalc");
        assert!(index.search("kubernetes", 3).is_empty());
    }

    #[test]
    fn stems_plurals_and_gerunds() {
        assert_eq!(terms("Reports filling Policies"), ["report", "fill", "policy"]);
    }
}
