//! User text bound for a terminal, or for a mail that is read on one. A job name, a path, a
//! user or node name, a sacct error is whatever someone typed, and Slurm keeps control bytes
//! in it (DESIGN §10): `ESC ] 0 ; … BEL` retitles the reader's terminal, `ESC [ 2 J` clears
//! it, a newline or carriage return forges a line of the report. This module is the one place
//! that decides what of such text may reach a terminal: every control character (C0, DEL and
//! C1, where U+009B is CSI to an 8-bit terminal) and every bidirectional override or isolate
//! (which reorders what follows it on the line) is shown as `?`. Everything else, Unicode
//! included, is kept. JSON and CSV have their own escaping; this is for text.

use std::borrow::Cow;

/// What stands in for a character that may not reach the terminal.
pub const REPLACEMENT: char = '?';

/// Explicit bidirectional formatting: embeddings and overrides (U+202A–U+202E), isolates
/// (U+2066–U+2069).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn unsafe_char(c: char, keep_newlines: bool) -> bool {
    match c {
        '\n' | '\t' if keep_newlines => false,
        c => c.is_control() || is_bidi_control(c),
    }
}

fn replace(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| unsafe_char(c, keep_newlines)) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if unsafe_char(c, keep_newlines) {
                    REPLACEMENT
                } else {
                    c
                }
            })
            .collect(),
    )
}

/// One user-supplied value inside a line (a job name, a path, a node or user name): every
/// control character, newlines and tabs included, becomes `?`, so the value cannot move the
/// cursor, change the terminal's state or start a line of its own.
pub fn field(s: &str) -> Cow<'_, str> {
    replace(s, false)
}

/// A whole rendered text (a report, a history table) as the last step before it is printed:
/// its own line breaks and tabs are kept, every other control character becomes `?`. The
/// renderer still passes each user value through [`field`]; this catches any that reached a
/// sentence another way (a path inside a note, a command's error text).
pub fn text(s: &str) -> Cow<'_, str> {
    replace(s, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J";

    #[test]
    fn escapes_and_control_bytes_become_question_marks() {
        assert_eq!(field(HOSTILE), "?]0;pwned??[2J");
        assert_eq!(field("a\r\nb\tc\u{7f}d\u{9b}e"), "a??b?c?d?e");
        assert_eq!(field("x\u{202e}gpj.exe"), "x?gpj.exe");
        assert_eq!(
            text("line 1\n\tline\u{1b}[31m 2\r\n"),
            "line 1\n\tline?[31m 2?\n"
        );
    }

    #[test]
    fn plain_and_unicode_text_is_borrowed_unchanged() {
        for s in ["train-3", "Grüße λ 数据 ⏎ 🚀", "/home/a b/out.txt", ""] {
            assert!(matches!(field(s), Cow::Borrowed(_)), "{s}");
            assert_eq!(field(s), s);
        }
        assert!(matches!(text("a\nb\n"), Cow::Borrowed(_)));
    }
}
