//! Slurm hostlists: expansion as `scontrol show hostnames` prints it and compression as
//! `scontrol show hostlist` prints it (both checked against Slurm 22.05.8; the captured output
//! is in core/tests/fixtures/slurm/hostlist).
//!
//! Written here rather than taken from the hostlist-parser crate: 0.1.6 refuses `cn_[01-02]`
//! (an underscore before the bracket) and drops the repeated `vm1` of `vm[1-2],vm1`, where
//! Slurm expands both as written.
//!
//! Expansion follows Slurm: names separated by `,` or whitespace; each `[...]` is a list of
//! numbers and ranges whose width is the width of the range's first bound (`[01-3]` →
//! `01 02 03`, `[1-03]` → `1 2 3`); several brackets multiply out in Slurm's order (the last
//! bracket fastest, then the first, second, …: see `slurm_order`); order and repeats are
//! kept. Text after the last bracket (`node[0001-0010]-int`), which 22.05 refuses, is
//! accepted as newer tools print it; a `:` inside a bracket (`node[1-7:2]`) is refused, as
//! `scontrol show hostnames` refuses it ("Invalid range").
//!
//! Compression follows Slurm too: the trailing digits of a name are its number; a name joins
//! the previous bracket when the prefix matches, the number is the next one and the widths
//! agree (Slurm's `_width_equiv`: equal widths, or an unpadded number beside another); order
//! and repeats are kept (`n3,n1,n2` → `n[3,1-2]`). Sort and dedup before calling it for a
//! canonical list.

/// Why a hostlist could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid hostlist {list:?}: {why}")]
pub struct HostlistError {
    pub list: String,
    pub why: String,
}

/// Most names one expansion may produce: a typo like `n[0-99999999]` must not eat memory.
pub const MAX_HOSTS: usize = 1 << 20;

/// `a[1-3],b5` → `a1 a2 a3 b5`.
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    let err = |why: &str| HostlistError {
        list: list.chars().take(200).collect(),
        why: why.to_string(),
    };
    let mut out = Vec::new();
    for item in split_top(list).map_err(|w| err(&w))? {
        // The item as literal text before each bracket, the bracket's numbers, and the
        // text after the last bracket.
        let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
        let mut rest = item.as_str();
        while let Some(i) = rest.find('[') {
            let close = rest[i..].find(']').ok_or_else(|| err("unclosed '['"))? + i;
            let nums = ranges(&rest[i + 1..close]).map_err(|w| err(&w))?;
            groups.push((&rest[..i], nums));
            rest = &rest[close + 1..];
        }
        let count = groups
            .iter()
            .try_fold(1usize, |n, (_, v)| n.checked_mul(v.len()))
            .filter(|n| n.saturating_add(out.len()) <= MAX_HOSTS)
            .ok_or_else(|| err("more than a million names"))?;
        for k in 0..count {
            let idx = slurm_order(&groups, k);
            let mut name = String::new();
            for ((lit, nums), &j) in groups.iter().zip(&idx) {
                name.push_str(lit);
                name.push_str(&nums[j]);
            }
            name.push_str(rest);
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    Ok(out)
}

/// The bracket positions of the `k`-th name, in Slurm's order (checked against
/// `scontrol show hostnames` of 22.05.8, core/tests/fixtures/slurm/hostlist): the last
/// bracket varies fastest, then the first, the second, … up to the one before the last
/// (`a[1-2]b[1-2]c[1-2]` → `a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 …`). With one or two
/// brackets that is plain left-to-right nesting.
fn slurm_order(groups: &[(&str, Vec<String>)], mut k: usize) -> Vec<usize> {
    let n = groups.len();
    let mut idx = vec![0; n];
    if n == 0 {
        return idx;
    }
    let fastest_first = std::iter::once(n - 1).chain(0..n - 1);
    for g in fastest_first {
        let len = groups[g].1.len();
        idx[g] = k % len;
        k /= len;
    }
    idx
}

/// Splits at `,` and whitespace outside brackets.
fn split_top(list: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    for c in list.chars() {
        match c {
            '[' => {
                depth += 1;
                if depth > 1 {
                    return Err("nested '['".into());
                }
                cur.push(c);
            }
            ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err("']' without '['".into());
                }
                cur.push(c);
            }
            ',' if depth == 0 => items.push(std::mem::take(&mut cur)),
            c if c.is_whitespace() && depth == 0 => items.push(std::mem::take(&mut cur)),
            c if c.is_whitespace() => return Err("space inside brackets".into()),
            c => cur.push(c),
        }
    }
    if depth != 0 {
        return Err("unclosed '['".into());
    }
    items.push(cur);
    Ok(items.into_iter().filter(|s| !s.is_empty()).collect())
}

/// `01-03,7,9-13:2` → the zero-padded numbers, in order.
fn ranges(body: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in body.split(',') {
        let part = part.trim();
        // `node[1-7:2]` is not Slurm syntax: scontrol refuses it ("Invalid range").
        if part.contains(':') {
            return Err(format!("bad range {part:?}: ':' is not hostlist syntax"));
        }
        let range = part;
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(format!("bad range {part:?}"));
        }
        let width = lo.len();
        let (a, b): (u64, u64) = (lo.parse().unwrap_or(0), hi.parse().unwrap_or(0));
        if b < a {
            return Err(format!("bad range {part:?}: it runs backwards"));
        }
        if b - a > MAX_HOSTS as u64 {
            return Err("more than a million names".into());
        }
        out.extend((a..=b).map(|x| format!("{x:0width$}")));
    }
    Ok(out)
}

/// A name split into its prefix and trailing number (`unit0rack12` → `unit0rack`, 12, 2).
struct Host<'a> {
    prefix: &'a str,
    num: Option<(u64, usize)>,
}

fn split_host(name: &str) -> Host<'_> {
    let digits = name
        .bytes()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    // More than 18 digits would overflow: treat the name as having no number.
    if digits == 0 || digits > 18 {
        return Host {
            prefix: name,
            num: None,
        };
    }
    let (p, d) = name.split_at(name.len() - digits);
    Host {
        prefix: p,
        num: d.parse().ok().map(|n| (n, digits)),
    }
}

fn num_digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

fn zero_padded(n: u64, width: usize) -> usize {
    width.saturating_sub(num_digits(n))
}

/// Slurm's `_width_equiv`: may `n` (printed `wn` wide) and `m` (`wm` wide) share one
/// bracket? Returns the width they share.
fn width_equiv(n: u64, wn: usize, m: u64, wm: usize) -> Option<usize> {
    if wn == wm {
        return Some(wn);
    }
    let npad = zero_padded(n, wn);
    let nmpad = zero_padded(n, wm);
    let mpad = zero_padded(m, wm);
    let mnpad = zero_padded(m, wn);
    if npad != nmpad && mpad != mnpad {
        return None;
    }
    if npad != nmpad {
        Some(wn)
    } else {
        Some(wm)
    }
}

/// `n1,n2,n3,n5` → `n[1-3,5]`, as `scontrol show hostlist` prints it.
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    // Runs of one prefix: (prefix, width, [(lo, hi)]) or a plain name.
    enum Part<'a> {
        Plain(&'a str),
        Ranges(&'a str, usize, Vec<(u64, u64)>),
    }
    let mut parts: Vec<Part> = Vec::new();
    for name in names {
        let h = split_host(name.as_ref());
        let Some((n, w)) = h.num else {
            parts.push(Part::Plain(h.prefix));
            continue;
        };
        if let Some(Part::Ranges(p, width, rs)) = parts.last_mut() {
            if *p == h.prefix {
                if let Some(last) = rs.last_mut() {
                    // Slurm compares against the range's first number.
                    if let Some(nw) = width_equiv(last.0, *width, n, w) {
                        if last.1.checked_add(1) == Some(n) {
                            last.1 = n;
                            *width = nw;
                            continue;
                        }
                    }
                }
                // Same prefix, not the next number: a new item inside the same bracket when
                // the widths agree, as Slurm does (`n[1,02]` keeps each width by padding).
                if width_equiv(rs[0].0, *width, n, w) == Some(*width) && w == *width {
                    rs.push((n, n));
                    continue;
                }
            }
        }
        parts.push(Part::Ranges(h.prefix, w, vec![(n, n)]));
    }
    // Slurm brackets a prefix's numbers even across widths (`n[1,02]`): merge neighbouring
    // parts of one prefix into one bracket, each range printed at its own width.
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < parts.len() {
        match &parts[i] {
            Part::Plain(p) => {
                out.push((*p).to_string());
                i += 1;
            }
            Part::Ranges(p, _, _) => {
                let mut items = Vec::new();
                let mut j = i;
                while let Some(Part::Ranges(q, w, rs)) = parts.get(j) {
                    if q != p {
                        break;
                    }
                    for &(lo, hi) in rs {
                        items.push(if lo == hi {
                            format!("{lo:0w$}")
                        } else {
                            format!("{lo:0w$}-{hi:0w$}")
                        });
                    }
                    j += 1;
                }
                let single = items.len() == 1 && !items[0].contains('-');
                out.push(if single {
                    format!("{p}{}", items[0])
                } else {
                    format!("{p}[{}]", items.join(","))
                });
                i = j;
            }
        }
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors() {
        assert_eq!(expand("a[1-3],b5").unwrap(), ["a1", "a2", "a3", "b5"]);
        assert_eq!(expand("n[01-3]").unwrap(), ["n01", "n02", "n03"]);
        assert_eq!(expand("n[1-03]").unwrap(), ["n1", "n2", "n3"]);
        assert!(expand("node[1-7:2]").is_err());
        assert_eq!(
            expand("a[1-2]b[1-2]c[1-2]").unwrap(),
            ["a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"]
        );
        assert!(expand("n[3-1]").is_err());
        assert!(expand("n[1-2").is_err());
        assert!(expand("n[]").is_err());
        assert!(expand("n[0-99999999999]").is_err());
        assert_eq!(compress(&["n1", "n2", "n3", "n5"]), "n[1-3,5]");
        assert_eq!(compress(&["a9", "a10", "a11"]), "a[9-11]");
        assert_eq!(compress(&["x1", "y", "x2"]), "x1,y,x2");
        assert_eq!(compress(&["vm1"]), "vm1");
        assert_eq!(compress::<&str>(&[]), "");
    }
}
