//! Which output-file sizes are noted (`store::output`): the knots of the file's growth over
//! time, enough to place any byte of the log between the last row that saw the file shorter
//! and the first that saw it long enough, to within [`TOLERANCE_MS`] of what every row saw.
//!
//! A bar redrawn at a steady pace grows the file at a steady rate, so most rows lie on the
//! line between two knots and need no note: a row is noted only when the line from the last
//! knot can no longer pass within the tolerance of every row since (a "swinging door": the
//! slopes the skipped rows allow are kept as two bounds). A pause keeps its first and last
//! rows (bytes written after it are placed after its end), a truncation restarts. After
//! [`EXACT_ROWS`] notes a file is noted at most every [`COARSE_EVERY`] rows, which bounds the
//! table for a week-long job whose output grows unevenly all the time.

use crate::store::OutputSize;

/// How far (ms) a byte's interpolated time may be from what the rows around it saw.
pub const TOLERANCE_MS: i64 = 250;
/// Notes taken exactly before noting turns coarse.
pub const EXACT_ROWS: u32 = 3600;
/// Past [`EXACT_ROWS`], a note is taken at most every this many rows.
pub const COARSE_EVERY: u32 = 6;

/// A file as `stat` saw it: which file, and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSeen {
    pub dev: u64,
    pub ino: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    t: i64,
    b: u64,
}

/// One stream's door: the last knot noted, the latest row not noted, and the slopes (ms per
/// byte from the knot) that every row since allows.
#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    knot: Option<Point>,
    pending: Option<Point>,
    lo: f64,
    hi: f64,
    rows_since_note: u32,
}

impl Stream {
    fn open_door(&mut self) {
        (self.lo, self.hi) = (f64::NEG_INFINITY, f64::INFINITY);
    }

    /// The notes a row `p` makes (`coarse`: only every [`COARSE_EVERY`] rows).
    fn see(&mut self, p: Point, coarse: bool, out: &mut Vec<Point>) {
        self.rows_since_note += 1;
        let Some(knot) = self.knot else {
            return self.note(p, out);
        };
        let Some(pending) = self.pending else {
            self.pending = Some(p);
            return;
        };
        let allowed = !coarse || self.rows_since_note >= COARSE_EVERY;
        if p.b < pending.b {
            // Truncated or replaced: what came before is another content.
            self.note(pending, out);
            return self.note(p, out);
        }
        let paused = pending.b == knot.b;
        let bounds_a_pause = if p.b == pending.b {
            // A pause begins: the first row at this size is where its bytes were seen.
            !paused
        } else {
            // A pause ends: its last row is where the bytes after it begin.
            paused
        };
        if bounds_a_pause || p.b == pending.b {
            if bounds_a_pause && allowed {
                self.note(pending, out);
            }
            self.pending = Some(p);
            return;
        }
        let slope = |q: Point, dt: i64| (q.t + dt - knot.t) as f64 / (q.b - knot.b) as f64;
        let (lo, hi) = (
            self.lo.max(slope(pending, -TOLERANCE_MS)),
            self.hi.min(slope(pending, TOLERANCE_MS)),
        );
        if (lo..=hi).contains(&slope(p, 0)) || !allowed {
            (self.lo, self.hi) = (lo, hi);
        } else {
            self.note(pending, out);
        }
        self.pending = Some(p);
    }

    fn note(&mut self, p: Point, out: &mut Vec<Point>) {
        if self.knot != Some(p) {
            out.push(p);
        }
        self.knot = Some(p);
        self.pending = None;
        self.rows_since_note = 0;
        self.open_door();
    }
}

/// The notes of the batch script's stdout (fd 1) and stderr (fd 2).
#[derive(Debug, Clone, Default)]
pub struct OutputNotes {
    streams: [Stream; 2],
    noted: u32,
}

impl OutputNotes {
    /// The sizes to store for a read at `t_unix_ms` of fd 1 and 2 (`None`: not a regular
    /// file, or unreadable). stderr that is stdout's file is not noted twice.
    pub fn at_row(
        &mut self,
        t_unix_ms: i64,
        out: Option<FileSeen>,
        err: Option<FileSeen>,
    ) -> Vec<OutputSize> {
        let same_file =
            matches!((out, err), (Some(o), Some(e)) if (o.dev, o.ino) == (e.dev, e.ino));
        let err = if same_file { None } else { err };
        let coarse = self.noted >= EXACT_ROWS;
        let mut notes = Vec::new();
        for (i, seen) in [out, err].into_iter().enumerate() {
            let Some(seen) = seen else { continue };
            let mut points = Vec::new();
            self.streams[i].see(
                Point {
                    t: t_unix_ms,
                    b: seen.bytes,
                },
                coarse,
                &mut points,
            );
            notes.extend(points.into_iter().map(|p| size(i, p)));
        }
        self.noted = self.noted.saturating_add(notes.len() as u32);
        notes
    }

    /// The rows not yet noted, at the step's end: the last one seen of each stream.
    pub fn finish(&mut self) -> Vec<OutputSize> {
        let mut notes = Vec::new();
        for (i, s) in self.streams.iter_mut().enumerate() {
            if let Some(p) = s.pending.take() {
                notes.push(size(i, p));
            }
        }
        notes
    }
}

fn size(stream: usize, p: Point) -> OutputSize {
    OutputSize {
        t_unix_ms: p.t,
        fd: stream as u8 + 1,
        bytes: p.b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(bytes: u64) -> Option<FileSeen> {
        Some(FileSeen {
            dev: 1,
            ino: 7,
            bytes,
        })
    }

    fn run(rows: &[(i64, u64)]) -> Vec<(i64, u64)> {
        let mut n = OutputNotes::default();
        let mut all: Vec<OutputSize> = Vec::new();
        for &(t, b) in rows {
            all.extend(n.at_row(t, seen(b), None));
        }
        all.extend(n.finish());
        all.iter().map(|s| (s.t_unix_ms, s.bytes)).collect()
    }

    /// Where a byte is placed from the notes (as `analysis::throughput` does): the time the
    /// line between the notes around it gives.
    fn placed(notes: &[(i64, u64)], b: u64) -> f64 {
        let i = notes.partition_point(|n| n.1 < b);
        let (t1, b1) = notes[i];
        if i == 0 || b1 == b {
            return t1 as f64;
        }
        let (t0, b0) = notes[i - 1];
        t0 as f64 + (b - b0) as f64 / (b1 - b0) as f64 * (t1 - t0) as f64
    }

    #[test]
    fn a_steady_writer_needs_two_notes_and_every_row_stays_placed() {
        let rows: Vec<(i64, u64)> = (0..1000).map(|i| (i * 1000, i as u64 * 800)).collect();
        let notes = run(&rows);
        assert_eq!(notes, [(0, 0), (999_000, 799_200)]);
    }

    #[test]
    fn a_change_of_pace_and_a_pause_are_kept_within_the_tolerance() {
        // 800 B/s for 20 s, 200 B/s for 20 s, nothing for 10 s, 800 B/s again.
        let mut rows = Vec::new();
        let mut b = 0u64;
        for i in 0..70i64 {
            rows.push((i * 1000, b));
            b += match i {
                0..20 => 800,
                20..40 => 200,
                40..50 => 0,
                _ => 800,
            };
        }
        let notes = run(&rows);
        assert!(notes.len() <= 6, "{notes:?}");
        // Every row's bytes are placed within the tolerance of the first row that saw them.
        for w in rows.windows(2) {
            let ((t0, b0), (t1, b1)) = (w[0], w[1]);
            if b1 > b0 {
                let t = placed(&notes, b1);
                assert!(
                    t <= t1 as f64 + TOLERANCE_MS as f64,
                    "{b1} at {t} vs {t1}: {notes:?}"
                );
                assert!(
                    t >= t0 as f64 - TOLERANCE_MS as f64,
                    "{b1} at {t} vs {t0}: {notes:?}"
                );
            }
        }
        // Bytes written after the pause are placed after its end (49 s), not within it.
        assert!(placed(&notes, rows[50].1 + 1) >= 49_000.0, "{notes:?}");
    }

    #[test]
    fn stderr_in_stdouts_file_is_noted_once_and_its_own_file_apart() {
        let mut n = OutputNotes::default();
        let notes = n.at_row(1, seen(10), seen(10));
        assert_eq!(notes.len(), 1);
        let other = Some(FileSeen {
            dev: 1,
            ino: 8,
            bytes: 4,
        });
        let notes = n.at_row(2, seen(10), other);
        assert_eq!((notes[0].fd, notes[0].bytes), (2, 4));
    }

    #[test]
    fn a_truncation_restarts_the_notes() {
        let notes = run(&[(0, 0), (1000, 500), (2000, 1000), (3000, 10), (4000, 500)]);
        assert!(
            notes.contains(&(2000, 1000)) && notes.contains(&(3000, 10)),
            "{notes:?}"
        );
    }

    #[test]
    fn an_uneven_writer_is_noted_coarsely_past_the_exact_notes() {
        // A pace drawn anew at every row (a smooth curve needs few knots: 10·i² over 7,200
        // rows takes 121): nearly every row is a knot until the coarse bound.
        let mut x = 12345u64;
        let mut b = 0u64;
        let rows: Vec<(i64, u64)> = (0..(i64::from(EXACT_ROWS) * 2))
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                b += 1 + (x >> 33) % 4000;
                (i * 1000, b)
            })
            .collect();
        let notes = run(&rows);
        let exact = EXACT_ROWS as usize;
        assert!(
            notes.len() <= exact + exact / COARSE_EVERY as usize + 2,
            "{}",
            notes.len()
        );
        assert!(notes.len() > exact, "{}", notes.len());
    }
}
