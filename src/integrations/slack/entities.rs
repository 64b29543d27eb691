//! Slack's entity syntax both ways. Text reaching the model reads as people write it
//! (`<@U123>` → `@ada`, `<#C123|eng>` → `#eng`, `<!subteam^S1|@oncall>` → `@oncall`,
//! `<https://x|label>` → `[label](https://x)`, `&lt;` → `<`); names the model writes
//! (`@ada`, `#eng`) become mentions again on the way out.
//!
//! Names come from `users.info` and `conversations.info`, cached per workspace (one
//! [`Directory`] per bot token) for [`Directory::ttl`]. The way back knows the names in
//! the cache: those of the people and channels the run has read about, which are the
//! ones a reply names in practice. An unknown `@name` stays text.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Display names of users and names of channels, by id, each with when it was fetched.
#[derive(Debug)]
pub struct Directory {
    ttl: Duration,
    entries: Mutex<HashMap<String, (String, Instant)>>,
}

/// How long a looked-up name is trusted (renames are rare; a stale name only reads
/// oddly, it links to the right id).
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);

impl Default for Directory {
    fn default() -> Self {
        Directory::new(DEFAULT_TTL)
    }
}

impl Directory {
    pub fn new(ttl: Duration) -> Self {
        Directory {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The cached name of `id` (a user or channel id), if fresh.
    pub fn get(&self, id: &str) -> Option<String> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(id)
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(name, _)| name.clone())
    }

    /// Drops what is known of `id`.
    pub fn forget(&self, id: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.remove(id);
    }

    pub fn put(&self, id: &str, name: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.insert(id.to_string(), (name.to_string(), Instant::now()));
    }

    /// Ids by name: users (ids `U…`/`W…`) and channels (`C…`/`G…`), fresh entries only.
    fn reverse(&self) -> (Names, Names) {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut users = Vec::new();
        let mut channels = Vec::new();
        for (id, (name, at)) in entries.iter() {
            if at.elapsed() >= self.ttl || name.is_empty() {
                continue;
            }
            match id.as_bytes().first() {
                Some(b'U' | b'W') => users.push((name.clone(), id.clone())),
                Some(b'C' | b'G') => channels.push((name.clone(), id.clone())),
                _ => {}
            }
        }
        // Longest names first, so `@ada lovelace` wins over `@ada`.
        users.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
        channels.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
        (users, channels)
    }
}

/// `(name, id)` pairs.
type Names = Vec<(String, String)>;

/// A `<…>` entity in Slack text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entity {
    User(String),
    Channel { id: String, name: Option<String> },
    Special(String),
    Link { url: String, label: Option<String> },
}

/// Parses the inside of `<…>`.
pub fn parse_entity(inner: &str) -> Entity {
    let (target, label) = match inner.split_once('|') {
        Some((t, l)) => (t, Some(l.to_string()).filter(|l| !l.is_empty())),
        None => (inner, None),
    };
    if let Some(id) = target.strip_prefix('@') {
        return Entity::User(id.to_string());
    }
    if let Some(id) = target.strip_prefix('#') {
        return Entity::Channel {
            id: id.to_string(),
            name: label,
        };
    }
    if let Some(special) = target.strip_prefix('!') {
        let text = match (special.split_once('^'), label) {
            (_, Some(l)) => l.trim_start_matches('@').to_string(),
            (Some((kind, _)), None) => kind.to_string(),
            (None, None) => special.to_string(),
        };
        return Entity::Special(text);
    }
    Entity::Link {
        url: target.to_string(),
        label,
    }
}

/// Rewrites Slack text for a reader: each entity through `name_of` (which returns a
/// user's or channel's name, or `None` to keep the id; a channel link's own label
/// stands in when it gives none), links as Markdown, and Slack's escapes undone.
pub fn humanize(text: &str, name_of: impl Fn(&Entity) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&unescape(&rest[..open]));
        let Some(close) = rest[open..].find('>') else {
            out.push_str(&unescape(&rest[open..]));
            return out;
        };
        let entity = parse_entity(&rest[open + 1..open + close]);
        match &entity {
            Entity::User(id) => {
                out.push('@');
                out.push_str(&name_of(&entity).unwrap_or_else(|| id.clone()));
            }
            Entity::Channel { id, name } => {
                out.push('#');
                // Slack's name first: the label is whatever the text's author wrote.
                out.push_str(
                    &name_of(&entity)
                        .or_else(|| name.clone())
                        .unwrap_or_else(|| id.clone()),
                );
            }
            Entity::Special(text) => {
                out.push('@');
                out.push_str(text);
            }
            Entity::Link { url, label } => {
                let url = unescape(url);
                match label {
                    Some(l) if *l != url && url.strip_prefix("mailto:") != Some(l) => {
                        out.push_str(&format!("[{}]({url})", unescape(l)))
                    }
                    _ => out.push_str(url.strip_prefix("mailto:").unwrap_or(&url)),
                }
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(&unescape(rest));
    out
}

/// The users and channels `text` mentions, each once.
pub fn named(text: &str) -> Vec<Entity> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let entity = parse_entity(&rest[open + 1..open + close]);
        let named = matches!(&entity, Entity::User(_) | Entity::Channel { .. });
        if named && !out.contains(&entity) {
            out.push(entity);
        }
        rest = &rest[open + close + 1..];
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

/// Turns `@name` and `#name` into `<@U…>` and `<#C…>` for the names `directory` knows
/// (case-insensitively), outside code spans and blocks, and not inside words (an
/// e-mail address keeps its `@`).
pub fn mentionize(text: &str, directory: &Directory) -> String {
    let (users, channels) = directory.reverse();
    if users.is_empty() && channels.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    let mut prev: Option<char> = None;
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let c = rest.chars().next().unwrap_or(' ');
        if c == '`' {
            in_code = !in_code;
        }
        let boundary = !prev.is_some_and(|p| p.is_alphanumeric() || p == '<' || p == '|');
        if !in_code && boundary && (c == '@' || c == '#') {
            let table = if c == '@' { &users } else { &channels };
            let after = &rest[1..];
            let hit = table.iter().find(|(name, _)| {
                after.len() >= name.len()
                    && after.is_char_boundary(name.len())
                    && after[..name.len()].eq_ignore_ascii_case(name)
                    && !after[name.len()..]
                        .chars()
                        .next()
                        .is_some_and(|n| n.is_alphanumeric() || n == '_' || n == '-')
            });
            if let Some((name, id)) = hit {
                out.push_str(&format!("<{c}{id}>"));
                i += 1 + name.len();
                prev = Some('>');
                continue;
            }
        }
        out.push(c);
        prev = Some(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_read_as_people_write_them() {
        let names = |e: &Entity| match e {
            Entity::User(id) if id == "U123" => Some("ada".to_string()),
            Entity::Channel { id, .. } if id == "C9" => Some("random".to_string()),
            _ => None,
        };
        let text = "<@U123> see <#C1|eng> and <#C9>, ping <!subteam^S1|@oncall> <!here> \
                    <https://x.io/a_b|the doc> <https://y.io> <mailto:a@b.io|a@b.io> 1 &lt; 2 &amp;&amp; <@U777>";
        assert_eq!(
            humanize(text, names),
            "@ada see #eng and #random, ping @oncall @here [the doc](https://x.io/a_b) https://y.io a@b.io 1 < 2 && @U777"
        );
        assert_eq!(
            named(text),
            [
                Entity::User("U123".into()),
                Entity::Channel {
                    id: "C1".into(),
                    name: Some("eng".into())
                },
                Entity::Channel {
                    id: "C9".into(),
                    name: None
                },
                Entity::User("U777".into())
            ]
        );
    }

    #[test]
    fn known_names_become_mentions_again() {
        let d = Directory::default();
        d.put("U123", "ada");
        d.put("U124", "Ada Lovelace");
        d.put("C1", "eng");
        let out = mentionize(
            "@ada and @Ada Lovelace in #eng; mail ada@x.io; `@ada` @adam #engineering",
            &d,
        );
        assert_eq!(
            out,
            "<@U123> and <@U124> in <#C1>; mail ada@x.io; `@ada` @adam #engineering"
        );
    }

    #[test]
    fn stale_names_are_not_used() {
        let d = Directory::new(Duration::ZERO);
        d.put("U123", "ada");
        assert_eq!(d.get("U123"), None);
        assert_eq!(mentionize("@ada", &d), "@ada");
    }
}
