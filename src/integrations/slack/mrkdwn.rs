//! Markdown (what models write) to Slack mrkdwn (what Slack renders in `text` and
//! `section` blocks), so a reply reads right whether or not the model followed the
//! `slack-formatting` skill.
//!
//! Bold `**x**` becomes `*x*`, italics `*x*` become `_x_`, `~~x~~` becomes `~x~`,
//! `[label](url)` becomes `<url|label>`, headings become bold lines, list items get
//! bullets (nested lists keep their depth), fenced code loses its language tag, and
//! tables become aligned code blocks. `&`, `<` and `>` are escaped as Slack requires,
//! except in Slack's own `<@U…>`, `<#C…>`, `<!…>` and `<https://…>` forms. Code spans,
//! code blocks and bare URLs are copied as they are: `*` and `_` in them are not
//! emphasis.

/// Converts a Markdown document to Slack mrkdwn.
pub fn to_mrkdwn(md: &str) -> String {
    let lines: Vec<&str> = md.lines().collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if let Some(fence) = fence_of(trimmed) {
            // Copy up to the closing fence (or the end) as one code block.
            out.push("```".into());
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with(fence) {
                out.push(escape(lines[i]));
                i += 1;
            }
            out.push("```".into());
            i += 1;
            continue;
        }
        if is_table_row(trimmed) && lines.get(i + 1).is_some_and(|l| is_table_rule(l.trim())) {
            let start = i;
            i += 2;
            while i < lines.len() && is_table_row(lines[i].trim_start()) {
                i += 1;
            }
            out.push(table(&lines[start..i]));
            continue;
        }
        out.push(block_line(line));
        i += 1;
    }
    out.join("\n")
}

/// The fence a line opens (```` ``` ```` or `~~~`), if it opens one.
fn fence_of(trimmed: &str) -> Option<&'static str> {
    if trimmed.starts_with("```") {
        Some("```")
    } else if trimmed.starts_with("~~~") {
        Some("~~~")
    } else {
        None
    }
}

fn is_table_row(trimmed: &str) -> bool {
    trimmed.starts_with('|') && trimmed.len() > 1
}

fn is_table_rule(trimmed: &str) -> bool {
    trimmed.starts_with('|')
        && trimmed.contains('-')
        && trimmed.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// A Markdown table as a code block with aligned columns (Slack renders no tables).
fn table(rows: &[&str]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .enumerate()
        .filter(|(n, _)| *n != 1)
        .map(|(_, r)| {
            r.trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().replace("**", "").replace('`', ""))
                .collect()
        })
        .collect();
    let columns = cells.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            cells
                .iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::from("```\n");
    for (n, row) in cells.iter().enumerate() {
        let line: Vec<String> = (0..columns)
            .map(|c| {
                let cell = row.get(c).map(String::as_str).unwrap_or("");
                format!("{cell}{}", " ".repeat(widths[c] - cell.chars().count()))
            })
            .collect();
        out.push_str(escape(line.join("  ").trim_end()).as_str());
        out.push('\n');
        if n == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("  "));
            out.push('\n');
        }
    }
    out.push_str("```");
    out
}

/// One line outside code: headings, rules, list items and quotes, then inline markup.
fn block_line(line: &str) -> String {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    if let Some(rest) = heading(trimmed) {
        // Bold inside a bold line would close it early.
        let plain = rest
            .trim()
            .trim_end_matches('#')
            .trim()
            .replace("**", "")
            .replace("__", "");
        return format!("*{}*", inline(&plain));
    }
    if is_rule(trimmed) {
        return "──────────".into();
    }
    if let Some(rest) = trimmed.strip_prefix('>') {
        return format!(">{}", inline(rest));
    }
    let depth = indent_depth(&line[..indent]);
    let pad = "    ".repeat(depth);
    if let Some(rest) = ["- ", "* ", "+ "].iter().find_map(|b| trimmed.strip_prefix(b)) {
        let (mark, text) = if let Some(t) = rest.strip_prefix("[ ] ") {
            ("☐", t)
        } else if let Some(t) = rest.strip_prefix("[x] ").or_else(|| rest.strip_prefix("[X] ")) {
            ("☑", t)
        } else {
            (["•", "◦", "▪"][depth.min(2)], rest)
        };
        return format!("{pad}{mark} {}", inline(text));
    }
    if let Some((number, text)) = ordered_item(trimmed) {
        return format!("{pad}{number}. {}", inline(text));
    }
    inline(line)
}

fn heading(trimmed: &str) -> Option<&str> {
    let hashes = trimmed.bytes().take_while(|b| *b == b'#').count();
    if (1..=6).contains(&hashes) {
        trimmed[hashes..].strip_prefix(' ')
    } else {
        None
    }
}

fn is_rule(trimmed: &str) -> bool {
    let marks: Vec<char> = trimmed.chars().filter(|c| *c != ' ').collect();
    marks.len() >= 3 && ['-', '*', '_'].iter().any(|m| marks.iter().all(|c| c == m))
}

/// Nesting depth of a list item from its leading whitespace (two spaces or a tab a level).
fn indent_depth(lead: &str) -> usize {
    let width: usize = lead.chars().map(|c| if c == '\t' { 4 } else { 1 }).sum();
    width / 2
}

fn ordered_item(trimmed: &str) -> Option<(&str, &str)> {
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let rest = &trimmed[digits..];
    let text = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") "))?;
    Some((&trimmed[..digits], text))
}

/// Model text with Slack's broadcast forms (`<!here>`, `<!channel>`, `<!everyone>`,
/// `<!subteam^ID|@group>`) made plain `@here`, `@channel`, `@everyone`, `@group`, which
/// notify no one (steward never sets `link_names`): a page or ticket the model read
/// must not be able to make it ping a whole channel or user group. Person and channel
/// mentions stay. Emphasis inside a form does not hide it (`<!he**re>` is `<!here>`
/// once the stars are gone), and a Markdown link to a `!` target (`[team](!channel)`,
/// which a conversion would make `<!channel|team>`) is no link. Run it on the text as
/// Slack gets it (after [`to_mrkdwn`]): a conversion can make a form.
pub fn defuse_broadcasts(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("<!") && !text.contains("](!") {
        return std::borrow::Cow::Borrowed(text);
    }
    let unlinked = text.replace("](!", "] (!");
    let mut out = String::with_capacity(unlinked.len());
    let mut rest = unlinked.as_str();
    while let Some(at) = rest.find("<!") {
        out.push_str(&rest[..at]);
        let form = &rest[at..];
        let end = form.find('>');
        let Some(end) = end.filter(|&end| !form[2..end].contains('<')) else {
            // No form here: an unclosed `<!` (a stream sends text in pieces, and Slack
            // joins `<!here|…` with a later piece's `>`), or one with another form
            // inside (`<!<!here>`). Escaped, so no later text completes it.
            out.push_str("&lt;!");
            rest = &form[2..];
            continue;
        };
        let inner = &form[2..end];
        let (name, label) = inner.split_once('|').unwrap_or((inner, ""));
        let lower = name.replace(['*', '_', '~', '`'], "").to_ascii_lowercase();
        let plain = match lower.as_str() {
            "here" | "channel" | "everyone" => Some(format!("@{lower}")),
            _ if lower.starts_with("subteam^") => Some(match label.trim_start_matches('@') {
                "" => "@group".to_string(),
                l => format!("@{l}"),
            }),
            _ => None,
        };
        match plain {
            Some(p) => out.push_str(&p),
            None => out.push_str(&form[..=end]),
        }
        rest = &form[end + 1..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Escapes the three characters Slack reserves.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Inline markup of one line.
fn inline(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    while i < b.len() {
        let rest = &text[i..];
        match b[i] {
            b'\\' if i + 1 < b.len() && b[i + 1].is_ascii_punctuation() => {
                out.push_str(&escape(&text[i + 1..i + 2]));
                i += 2;
            }
            b'`' => {
                let ticks = rest.bytes().take_while(|c| *c == b'`').count();
                let delim = &rest[..ticks];
                match rest[ticks..].find(delim) {
                    Some(end) => {
                        let code = rest[ticks..ticks + end].trim();
                        out.push('`');
                        out.push_str(&escape(code));
                        out.push('`');
                        i += ticks + end + ticks;
                    }
                    None => {
                        out.push_str(delim);
                        i += ticks;
                    }
                }
            }
            b'!' if rest.starts_with("![") => match link(&rest[1..]) {
                Some((label, url, used)) => {
                    out.push_str(&slack_link(url, label));
                    i += 1 + used;
                }
                None => {
                    out.push('!');
                    i += 1;
                }
            },
            b'[' => match link(rest) {
                Some((label, url, used)) => {
                    out.push_str(&slack_link(url, label));
                    i += used;
                }
                None => {
                    out.push('[');
                    i += 1;
                }
            },
            b'<' => match slack_form(rest) {
                Some(len) => {
                    // A link written in Slack's own form is shown as written, unless its
                    // label names another site than it goes to.
                    let form = &rest[..len];
                    match form[1..len - 1].split_once('|') {
                        Some((url, label)) if url.starts_with("http") => {
                            out.push_str(&format!("<{url}|{}>", shown_label(url, label)))
                        }
                        _ => out.push_str(form),
                    }
                    i += len;
                }
                None => {
                    out.push_str("&lt;");
                    i += 1;
                }
            },
            b'>' => {
                out.push_str("&gt;");
                i += 1;
            }
            b'&' => {
                out.push_str("&amp;");
                i += 1;
            }
            b'h' if rest.starts_with("https://") || rest.starts_with("http://") => {
                let len = rest
                    .find(|c: char| c.is_whitespace() || c == '<' || c == '>')
                    .unwrap_or(rest.len());
                // A sentence's closing punctuation is not part of the URL.
                let url = rest[..len].trim_end_matches(['.', ',', ';', ':', '!', '?', ')']);
                out.push_str(&escape(url));
                i += url.len();
            }
            b'*' | b'_' | b'~' => match emphasis(rest) {
                Some((open, close, inner, used)) => {
                    out.push_str(open);
                    out.push_str(&inline(inner));
                    out.push_str(close);
                    i += used;
                }
                None => {
                    let run = rest.bytes().take_while(|c| *c == b[i]).count();
                    out.push_str(&rest[..run]);
                    i += run;
                }
            },
            _ => {
                let c = rest.chars().next().unwrap_or(' ');
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// `[label](url)` at the start of `s`: the label, the URL and the bytes used.
fn link(s: &str) -> Option<(&str, &str, usize)> {
    let close = s.find("](")?;
    let label = &s[1..close];
    if label.contains('\n') {
        return None;
    }
    let after = &s[close + 2..];
    // URLs may hold balanced parentheses (Wikipedia's do).
    let mut depth = 0usize;
    for (n, c) in after.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                let url = after[..n].trim();
                if url.is_empty() || url.contains(' ') {
                    return None;
                }
                return Some((label, url, close + 2 + n + 1));
            }
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn slack_link(url: &str, label: &str) -> String {
    let label = inline(label).replace('|', "¦");
    // Only web and mail links: `<!channel|…>` or `<@U…|…>` would be a mention.
    if !["http://", "https://", "mailto:"]
        .iter()
        .any(|p| url.starts_with(p))
    {
        return format!("{label} ({})", escape(url));
    }
    if label.is_empty() || label == url {
        format!("<{}>", url.replace('>', "%3E").replace('|', "%7C"))
    } else {
        format!(
            "<{}|{}>",
            url.replace('>', "%3E").replace('|', "%7C"),
            shown_label(url, &label)
        )
    }
}

/// A link's label as shown: as written, unless a piece of it reads as an address on
/// another site than the link goes to (`[https://sso.corp/login](https://evil.example)`),
/// when the real host follows it in brackets, so a reader sees where a click goes. A
/// piece reads as an address when it has a scheme or starts `www.` (a bare `README.md`
/// or `Vue.js` is a name, not a site); markup around it does not hide it, and hosts are
/// compared as Slack would show them (punycode for other scripts).
fn shown_label(url: &str, label: &str) -> String {
    let host_of = |text: &str| {
        url::Url::parse(text)
            .ok()?
            .host_str()
            .map(str::to_ascii_lowercase)
    };
    let Some(target) = host_of(url) else {
        return label.to_string();
    };
    let same_site = |named: &str| {
        named == target || named.ends_with(&format!(".{target}")) || target.ends_with(&format!(".{named}"))
    };
    let unmarked: String = label
        .chars()
        .map(|c| if "*_~`()[]<>\"'".contains(c) { ' ' } else { c })
        .collect();
    let foreign = unmarked.split_whitespace().any(|piece| {
        let address = if piece.contains("://") {
            Some(piece.to_string())
        } else if piece.to_ascii_lowercase().starts_with("www.") {
            Some(format!("http://{piece}"))
        } else {
            None
        };
        address
            .and_then(|a| host_of(&a))
            .is_some_and(|named| !same_site(&named))
    });
    match foreign {
        true => format!("{label} ({target})"),
        false => label.to_string(),
    }
}

/// Length of a Slack-native `<…>` form at the start of `s` (a mention, a channel, a
/// special mention, a link), kept as written.
fn slack_form(s: &str) -> Option<usize> {
    let end = s.find('>')?;
    let inner = &s[1..end];
    let native = [
        "@U", "@W", "@B", "#C", "#G", "!", "http://", "https://", "mailto:",
    ]
    .iter()
    .any(|p| inner.starts_with(p));
    // A label may hold spaces; a bare form may not (`<!here> is` vs `a <b c>`).
    (native && (inner.contains('|') || !inner.contains(char::is_whitespace))).then_some(end + 1)
}

/// Emphasis opening at the start of `s`: its Slack delimiters, the inner text and the
/// bytes used. CommonMark's rule that delimiters hug the text is kept, so `2 * 3 * 4`
/// and `snake_case_names` stay as they are.
fn emphasis(s: &str) -> Option<(&'static str, &'static str, &str, usize)> {
    let c = s.as_bytes()[0];
    let run = s.bytes().take_while(|x| *x == c).count();
    let (open, close, width) = match (c, run) {
        (b'*', 3..) => ("*_", "_*", 3),
        (b'*', 2) | (b'_', 2) => ("*", "*", 2),
        (b'*', 1) | (b'_', 1) => ("_", "_", 1),
        (b'~', 2) => ("~", "~", 2),
        (b'~', 1) => ("~", "~", 1),
        _ => return None,
    };
    let delim = &s[..width];
    let body = &s[width..];
    if body.starts_with(char::is_whitespace) {
        return None;
    }
    let mut from = 0;
    while let Some(pos) = body[from..].find(delim) {
        let at = from + pos;
        let after = body[at + width..].chars().next();
        let before = body[..at].chars().last();
        let hugs = at > 0 && !before.is_some_and(char::is_whitespace);
        let run_ends = after != Some(c as char);
        // `_` closes only at a word's end, so `a_b_c` is not italic.
        let word_end = c != b'_' || !after.is_some_and(char::is_alphanumeric);
        if hugs && run_ends && word_end {
            return Some((open, close, &body[..at], width + at + width));
        }
        from = at + width;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{defuse_broadcasts, to_mrkdwn};

    #[test]
    fn broadcasts_from_model_text_notify_no_one() {
        assert_eq!(
            defuse_broadcasts(
                "<!here> and <!CHANNEL> or <!everyone|everyone>, <!subteam^S0OPS|@ops>, <!subteam^S1>"
            ),
            "@here and @channel or @everyone, @ops, @group"
        );
        assert_eq!(
            defuse_broadcasts("ask <@U123> in <#C0GEN|general> on <!date^1392734382^{date}|Feb 18>; a < b"),
            "ask <@U123> in <#C0GEN|general> on <!date^1392734382^{date}|Feb 18>; a < b"
        );
        // Unclosed: escaped, so a later piece of a stream cannot close it.
        assert_eq!(defuse_broadcasts("cut <!here"), "cut &lt;!here");
        let label = "x".repeat(300);
        let (first, second) = (format!("hi <!here|{label}"), format!("{label}> there"));
        let joined = format!("{}{}", defuse_broadcasts(&first), defuse_broadcasts(&second));
        assert!(!joined.contains("<!"), "{joined}");
        // A form inside another: the inner one is made plain too.
        assert_eq!(defuse_broadcasts("<!<!here>"), "&lt;!@here");
        assert_eq!(defuse_broadcasts("<!x <!channel> y>"), "&lt;!x @channel y>");
        assert_eq!(to_mrkdwn(&defuse_broadcasts("**Hi** <!here>")), "*Hi* @here");
        // Forms a conversion would make: a link to `!channel`, a heading's stars.
        let converted = |md: &str| defuse_broadcasts(&to_mrkdwn(md)).into_owned();
        for md in [
            "[team](!channel)",
            "[x](!subteam^S0ONCALL)",
            "# <!he**re>",
            "<!he**re>",
        ] {
            let out = converted(md);
            assert!(!out.contains("<!"), "{md} became {out}");
        }
        assert_eq!(
            converted("[site](https://example.com)"),
            "<https://example.com|site>"
        );
        assert_eq!(defuse_broadcasts("see [team](!here)"), "see [team] (!here)");
        // A label that names another site than the link's says where the link goes.
        assert_eq!(
            to_mrkdwn("[https://sso.corp/login](https://evil.example/x)"),
            "<https://evil.example/x|https://sso.corp/login (evil.example)>"
        );
        assert_eq!(
            to_mrkdwn("see <https://evil.example/x|www.sso.corp/login>"),
            "see <https://evil.example/x|www.sso.corp/login (evil.example)>"
        );
        // Markup, words around it, a port or a query do not hide it.
        for label in [
            "*https://sso.corp/login*",
            "`https://sso.corp`",
            "Login: https://sso.corp:443/login?x=1",
        ] {
            let out = to_mrkdwn(&format!("[{label}](https://evil.example/x)"));
            assert!(out.ends_with(" (evil.example)>"), "{label}: {out}");
        }
        // A label on the same site (either way round), or names and plain words, stays.
        assert_eq!(
            to_mrkdwn("[www.github.com](https://github.com/a)"),
            "<https://github.com/a|www.github.com>"
        );
        assert_eq!(
            to_mrkdwn("[README.md](https://github.com/o/r/blob/main/README.md)"),
            "<https://github.com/o/r/blob/main/README.md|README.md>"
        );
        assert_eq!(to_mrkdwn("[the doc](https://d.io/a)"), "<https://d.io/a|the doc>");
        assert_eq!(to_mrkdwn("[v1.2](https://d.io/r)"), "<https://d.io/r|v1.2>");
    }

    #[test]
    fn converts_the_markup_models_write() {
        let cases = [
            ("**bold** and __bold__", "*bold* and *bold*"),
            ("*italic* and _italic_", "_italic_ and _italic_"),
            ("***both***", "*_both_*"),
            ("~~gone~~", "~gone~"),
            ("# Title", "*Title*"),
            ("### **Bold** heading ###", "*Bold heading*"),
            (
                "[docs](https://example.com/a_b_c)",
                "<https://example.com/a_b_c|docs>",
            ),
            (
                "[snake_case_link](https://x.io/p)",
                "<https://x.io/p|snake_case_link>",
            ),
            (
                "see https://example.com/a_b_c_d.",
                "see https://example.com/a_b_c_d.",
            ),
            ("![chart](https://x.io/c.png)", "<https://x.io/c.png|chart>"),
            (
                "[w](https://en.wikipedia.org/wiki/Rust_(language))",
                "<https://en.wikipedia.org/wiki/Rust_(language)|w>",
            ),
            ("`a**b**c` stays", "`a**b**c` stays"),
            ("2 * 3 * 4", "2 * 3 * 4"),
            ("snake_case_name", "snake_case_name"),
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            (
                "ask <@U123> in <#C1|eng> <!here>",
                "ask <@U123> in <#C1|eng> <!here>",
            ),
            ("<https://x.io|x>", "<https://x.io|x>"),
            ("> quoted **text**", "> quoted *text*"),
            ("---", "──────────"),
            ("- [ ] todo\n- [x] done", "☐ todo\n☑ done"),
        ];
        for (md, want) in cases {
            assert_eq!(to_mrkdwn(md), want, "{md}");
        }
    }

    #[test]
    fn nested_lists_keep_their_depth() {
        let md = "- one\n  - one.a **b**\n    - deep\n- two\n1. first\n2) second\n   1. inner";
        let want = "• one\n    ◦ one.a *b*\n        ▪ deep\n• two\n1. first\n2. second\n    1. inner";
        assert_eq!(to_mrkdwn(md), want);
        assert_eq!(to_mrkdwn("* star item\n+ plus item"), "• star item\n• plus item");
    }

    #[test]
    fn code_blocks_are_copied_without_their_language() {
        let md = "Run:\n```rust\nlet x = **y** * 2; // <T>\n```\nafter _it_";
        assert_eq!(
            to_mrkdwn(md),
            "Run:\n```\nlet x = **y** * 2; // &lt;T&gt;\n```\nafter _it_"
        );
        // An unclosed fence runs to the end rather than swallowing nothing.
        assert_eq!(to_mrkdwn("```\ncode *x*"), "```\ncode *x*\n```");
    }

    #[test]
    fn tables_become_aligned_code() {
        let md = "| Name | Count |\n|---|--:|\n| **alpha** | 1 |\n| b | 22 |";
        assert_eq!(
            to_mrkdwn(md),
            "```\nName   Count\n-----  -----\nalpha  1\nb      22\n```"
        );
    }
}
