//! Text from outside (a webhook's summary, a model's answer, a tool's error) made safe
//! for a terminal: control characters other than newline and tab are shown as `�`, so
//! an escape sequence in a Jira title cannot rewrite the screen, hide lines, set a link
//! (OSC 8) or the clipboard (OSC 52) in an operator's terminal.

use std::borrow::Cow;

/// `text` with every control character but `\n` and `\t` (C0, DEL, C1) as `�`.
pub fn plain(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| if unsafe_char(c) { '\u{FFFD}' } else { c })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn escape_sequences_do_not_reach_the_terminal() {
        assert_eq!(plain("line\n\tindented"), "line\n\tindented");
        assert_eq!(
            plain("\u{1b}]52;c;ZXZpbA==\u{7}title\u{1b}[2K\r\u{9b}31m"),
            "\u{FFFD}]52;c;ZXZpbA==\u{FFFD}title\u{FFFD}[2K\u{FFFD}\u{FFFD}31m"
        );
    }
}
