//! sacct's answer cut into its header and records, as it streams in, by the delimiter the
//! query asked for.
//!
//! Why no text a user typed can start a record or a field (issue 37, attack 6):
//! - the delimiter is a fresh random string for each sacct call
//!   ([`Delimiter::fresh`]), so no stored field holds it: every occurrence in the answer is
//!   one of sacct's own field boundaries;
//! - a record is exactly as many fields as the header names, and its first and last columns
//!   are fixed-format (a job id; [`FIELDS`](super::FIELDS) keeps every free-text column
//!   between them), so a record ends at the first newline after its last delimiter. A newline
//!   anywhere else (a job name, a work dir, a SubmitLine) stays inside its field.
//!
//! Nothing here looks at what a field holds, so nothing a field holds can move a boundary.

use memchr::memmem;

/// Most bytes one record may take; a longer one is skipped (counted) without being held, and
/// the next record is still found. slurmdbd keeps each free-text field in a MySQL `TEXT`
/// (64 KiB at most) or `TINYTEXT`, so no record it answers comes near this.
const MAX_RECORD_BYTES: usize = 1 << 20;

/// The string between sacct's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delimiter(String);

impl Delimiter {
    /// A delimiter for one sacct call: the unit separator, 16 random hex digits, the unit
    /// separator. Drawn from the kernel's generator when the call is made, after every job it
    /// may list was submitted, so no job's text can hold it.
    pub fn fresh() -> Delimiter {
        let mut b = [0u8; 8];
        // getrandom(2) fails only on a kernel older than 3.17 (or a broken seccomp filter):
        // then there is no unguessable delimiter, and nothing to read sacct with safely.
        getrandom::fill(&mut b).expect("the kernel's random generator (getrandom) is available");
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        Delimiter(format!("\u{1f}{hex}\u{1f}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What [`Records`] hands on: the header's names, or one record with its fields' byte ranges
/// (relative to the record's text).
pub enum Cut<'a> {
    Header(Vec<String>),
    Record(&'a str, &'a [(usize, usize)]),
}

/// One answer's bytes in, its header and records out. Holds at most one record's bytes
/// (the one that straddles the chunks given so far).
pub struct Records {
    finder: memmem::Finder<'static>,
    /// The header's column count, once read.
    width: Option<usize>,
    /// Bytes not yet handed on; the current record, if one is open, starts at 0.
    buf: Vec<u8>,
    /// A record has begun (its first byte is `buf[0]`, or was dropped past the bound).
    open: bool,
    /// Where the search for the current record's next boundary resumes.
    scan: usize,
    /// Where the current field starts.
    field: usize,
    /// The current record's fields found so far.
    spans: Vec<(usize, usize)>,
    /// The current record passed [`MAX_RECORD_BYTES`]: its bytes are dropped as they come,
    /// its delimiters still counted.
    overflow: bool,
    /// Records that could not be read: too long, left unfinished at the end, or not UTF-8
    /// with a field count the lossy text no longer matches.
    pub skipped: usize,
    /// Header and records handed on.
    pub cuts: usize,
}

impl Records {
    /// For an answer whose fields are split by `delimiter` (not empty, no newline).
    pub fn new(delimiter: &str) -> Records {
        assert!(
            !delimiter.is_empty() && !delimiter.contains('\n'),
            "a delimiter: {delimiter:?}"
        );
        Records {
            finder: memmem::Finder::new(delimiter.as_bytes()).into_owned(),
            width: None,
            buf: Vec::new(),
            open: false,
            scan: 0,
            field: 0,
            spans: Vec::new(),
            overflow: false,
            skipped: 0,
            cuts: 0,
        }
    }

    /// The next bytes of the answer; each header or record they complete goes to `on_cut`.
    pub fn push(&mut self, chunk: &[u8], on_cut: &mut dyn FnMut(Cut<'_>)) {
        self.buf.extend_from_slice(chunk);
        let used = self.cut_all(on_cut);
        self.buf.drain(..used);
        self.scan -= used;
        self.field -= used;
    }

    /// The end of the answer: a record sacct ended without a newline is handed on; one left
    /// short of fields is counted as skipped.
    pub fn finish(&mut self, on_cut: &mut dyn FnMut(Cut<'_>)) {
        if self.open && !self.buf.ends_with(b"\n") {
            self.push(b"\n", on_cut);
        }
        if self.open {
            self.skipped += 1;
        }
        self.buf.clear();
        (self.open, self.scan, self.field, self.overflow) = (false, 0, 0, false);
        self.spans.clear();
    }

    /// Hands on every header or record complete in `buf`; returns the bytes they took.
    fn cut_all(&mut self, on_cut: &mut dyn FnMut(Cut<'_>)) -> usize {
        let mut start = 0;
        loop {
            if !self.open {
                // Between records: sacct's last newline, blank lines.
                while self
                    .buf
                    .get(start)
                    .is_some_and(|&b| b == b'\n' || b == b'\r')
                {
                    start += 1;
                }
                if start == self.buf.len() {
                    (self.scan, self.field) = (start, start);
                    return start;
                }
                (self.open, self.scan, self.field) = (true, start, start);
            }
            let Some(width) = self.width else {
                let Some(nl) = memchr::memchr(b'\n', &self.buf[self.scan..]) else {
                    self.scan = self.buf.len();
                    return start;
                };
                let end = self.scan + nl;
                let line = String::from_utf8_lossy(&self.buf[start..end]);
                let line = line.trim_end_matches('\r');
                let names: Vec<String> = split(&self.finder, line)
                    .map(|(a, b)| line[a..b].trim().to_string())
                    .collect();
                self.width = Some(names.len());
                self.cuts += 1;
                on_cut(Cut::Header(names));
                start = end + 1;
                self.open = false;
                continue;
            };
            // The fields before the last: up to each delimiter. Its first byte is looked for
            // (one SIMD search, a few nanoseconds a field: a whole-needle search costs more to
            // start than a short field takes to scan) and the rest compared.
            let needle = self.finder.needle();
            while self.spans.len() + 1 < width {
                let Some(i) = memchr::memchr(needle[0], &self.buf[self.scan..]) else {
                    self.scan = self.buf.len();
                    return self.hold(start);
                };
                let at = self.scan + i;
                let Some(candidate) = self.buf.get(at..at + needle.len()) else {
                    // The delimiter may straddle the chunks: look here again.
                    self.scan = at;
                    return self.hold(start);
                };
                if candidate != needle {
                    self.scan = at + 1;
                    continue;
                }
                self.spans.push((self.field - start, at - start));
                self.field = at + needle.len();
                self.scan = self.field;
            }
            // The last field: fixed-format, so the first newline ends it and the record.
            let Some(nl) = memchr::memchr(b'\n', &self.buf[self.scan..]) else {
                self.scan = self.buf.len();
                return self.hold(start);
            };
            let next = self.scan + nl + 1;
            let mut end = next - 1;
            if end > self.field && self.buf[end - 1] == b'\r' {
                end -= 1;
            }
            self.spans.push((self.field - start, end - start));
            if std::mem::take(&mut self.overflow) {
                self.skipped += 1;
            } else {
                self.hand_on(start, end, on_cut);
            }
            self.spans.clear();
            self.open = false;
            start = next;
        }
    }

    /// The current record is incomplete: keeps it (from `start`), or past the bound, drops
    /// what was scanned of it. Returns the bytes `buf` may drop.
    fn hold(&mut self, start: usize) -> usize {
        if !self.overflow && self.buf.len() - start <= MAX_RECORD_BYTES {
            return start;
        }
        self.overflow = true;
        self.field = self.scan;
        self.scan
    }

    /// `buf[start..end]` as a record, with `spans`.
    fn hand_on(&mut self, start: usize, end: usize, on_cut: &mut dyn FnMut(Cut<'_>)) {
        let raw = &self.buf[start..end];
        if let Ok(text) = std::str::from_utf8(raw) {
            self.cuts += 1;
            on_cut(Cut::Record(text, &self.spans));
            return;
        }
        // Invalid bytes become U+FFFD, which moves the fields: split the lossy text again
        // (the delimiter is ASCII, which the repair leaves as it is).
        let text = String::from_utf8_lossy(raw);
        let spans: Vec<(usize, usize)> = split(&self.finder, &text).collect();
        if spans.len() == self.spans.len() {
            self.cuts += 1;
            on_cut(Cut::Record(&text, &spans));
        } else {
            self.skipped += 1;
        }
    }
}

/// The byte ranges of `text`'s fields between `finder`'s delimiters.
fn split<'a>(
    finder: &'a memmem::Finder<'static>,
    text: &'a str,
) -> impl Iterator<Item = (usize, usize)> + 'a {
    let d = finder.needle().len();
    let mut from = Some(0);
    let mut at = finder.find_iter(text.as_bytes());
    std::iter::from_fn(move || {
        let f = from?;
        match at.next() {
            Some(i) => {
                from = Some(i + d);
                Some((f, i))
            }
            None => {
                from = None;
                Some((f, text.len()))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut_all(text: &[u8], d: &str, chunk: usize) -> (Vec<Vec<String>>, usize) {
        let mut r = Records::new(d);
        let mut out = Vec::new();
        let mut on = |c: Cut<'_>| match c {
            Cut::Header(h) => out.push(h),
            Cut::Record(t, s) => out.push(s.iter().map(|&(a, b)| t[a..b].to_string()).collect()),
        };
        for c in text.chunks(chunk.max(1)) {
            r.push(c, &mut on);
        }
        r.finish(&mut on);
        (out, r.skipped)
    }

    #[test]
    fn newlines_and_unit_separators_stay_in_their_field_at_every_chunk_size() {
        let s = "\u{1f}0123456789abcdef\u{1f}";
        // The job name forges a record as the unit separator alone would have let it.
        let text = format!(
            "JobID{s}JobName{s}JobIDRaw\n\
             7{s}a\n8\u{1f}evil\u{1f}8\nb{s}7\n\
             7.batch{s}batch{s}7.batch\n\
             9{s}{s}9"
        );
        for chunk in [1, 2, 3, 5, 17, 18, 19, 64, 4096] {
            let (got, skipped) = cut_all(text.as_bytes(), s, chunk);
            assert_eq!(skipped, 0, "chunk {chunk}");
            assert_eq!(got.len(), 4, "chunk {chunk}: {got:?}");
            assert_eq!(got[0], ["JobID", "JobName", "JobIDRaw"]);
            assert_eq!(
                got[1],
                ["7", "a\n8\u{1f}evil\u{1f}8\nb", "7"],
                "chunk {chunk}"
            );
            assert_eq!(got[2], ["7.batch", "batch", "7.batch"]);
            assert_eq!(got[3], ["9", "", "9"]);
        }
    }

    #[test]
    fn a_record_past_the_bound_is_skipped_and_the_next_is_found() {
        let s = "\u{1f}ff\u{1f}";
        let big = "x\n".repeat(MAX_RECORD_BYTES);
        let text = format!("JobID{s}JobName{s}JobIDRaw\n1{s}{big}{s}1\n2{s}b{s}2\n");
        for chunk in [7, 65536] {
            let (got, skipped) = cut_all(text.as_bytes(), s, chunk);
            assert_eq!(skipped, 1);
            assert_eq!(got.len(), 2, "{:?}", &got[1..]);
            assert_eq!(got[1], ["2", "b", "2"]);
        }
    }

    #[test]
    fn an_unfinished_record_is_skipped_and_invalid_utf8_is_repaired() {
        let d = "\u{1f}ab\u{1f}";
        let s = d.as_bytes();
        let mut text = b"JobID".to_vec();
        text.extend_from_slice(s);
        text.extend_from_slice(b"JobName\n1");
        text.extend_from_slice(s);
        text.extend_from_slice(b"a\xffb\n2");
        let (got, skipped) = cut_all(&text, d, 3);
        assert_eq!(got[1], ["1", "a\u{fffd}b"]);
        assert_eq!(got.len(), 2);
        assert_eq!(skipped, 1, "the `2` nothing finished");
    }

    #[test]
    fn fresh_delimiters_differ() {
        let a = Delimiter::fresh();
        assert_eq!(a.as_str().len(), 18);
        assert!(a.as_str().starts_with('\u{1f}') && a.as_str().ends_with('\u{1f}'));
        assert_ne!(a, Delimiter::fresh());
    }
}
