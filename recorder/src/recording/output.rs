//! Which output-file sizes a stored row notes (`store::output`): those that changed, and
//! the row before growth resumed after a pause, so that a byte of the log is placed between
//! the last row that saw the file shorter and the first that saw it long enough. After
//! [`EXACT_ROWS`] noted sizes a file is noted only every [`COARSE_EVERY`] stored rows, which
//! bounds the table for a week-long job that prints all the time (about 3,600 + 20,000 rows
//! at 5 s, under 0.5 MB) at the cost of coarser placement late in such a job.

use crate::store::OutputSize;

/// Sizes noted exactly (every row that saw a change) before noting turns coarse.
pub const EXACT_ROWS: u32 = 3600;
/// Past [`EXACT_ROWS`], a size is noted at most every this many stored rows.
pub const COARSE_EVERY: u32 = 6;

/// A file as `stat` saw it: which file, and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileSeen {
    pub dev: u64,
    pub ino: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    /// The last size noted and its row's time, and the row before this one (time, size).
    noted: Option<u64>,
    noted_at: i64,
    previous: Option<(i64, u64)>,
    rows_since_noted: u32,
}

/// The notes of the batch script's stdout (fd 1) and stderr (fd 2).
#[derive(Debug, Clone, Default)]
pub struct OutputNotes {
    streams: [Stream; 2],
    noted: u32,
}

impl OutputNotes {
    /// The sizes to store with the row at `t_unix_ms`, from what `stat` saw of fd 1 and 2
    /// (`None`: not a regular file, or unreadable). stderr that is stdout's file is not
    /// noted twice.
    pub fn at_row(
        &mut self,
        t_unix_ms: i64,
        out: Option<FileSeen>,
        err: Option<FileSeen>,
    ) -> Vec<OutputSize> {
        let same_file =
            matches!((out, err), (Some(o), Some(e)) if (o.dev, o.ino) == (e.dev, e.ino));
        let err = if same_file { None } else { err };
        let mut notes = Vec::new();
        for (i, seen) in [out, err].into_iter().enumerate() {
            let fd = i as u8 + 1;
            let coarse = self.noted >= EXACT_ROWS;
            let s = &mut self.streams[i];
            s.rows_since_noted += 1;
            let Some(seen) = seen else {
                s.previous = None;
                continue;
            };
            let changed = s.noted != Some(seen.bytes);
            if changed && (!coarse || s.rows_since_noted >= COARSE_EVERY) {
                // Growth resumed after a pause: the row before it bounds the new bytes.
                let paused = |p: &(i64, u64)| p.0 > s.noted_at && Some(p.1) == s.noted;
                if let Some((t, bytes)) = s.previous.filter(paused).filter(|_| !coarse) {
                    notes.push(OutputSize {
                        t_unix_ms: t,
                        fd,
                        bytes,
                    });
                }
                notes.push(OutputSize {
                    t_unix_ms,
                    fd,
                    bytes: seen.bytes,
                });
                s.noted = Some(seen.bytes);
                s.noted_at = t_unix_ms;
                s.rows_since_noted = 0;
            }
            s.previous = Some((t_unix_ms, seen.bytes));
        }
        self.noted = self.noted.saturating_add(notes.len() as u32);
        notes
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

    fn sizes(notes: &[OutputSize]) -> Vec<(i64, u8, u64)> {
        notes.iter().map(|n| (n.t_unix_ms, n.fd, n.bytes)).collect()
    }

    #[test]
    fn changes_are_noted_and_a_pause_keeps_its_last_row() {
        let mut n = OutputNotes::default();
        let mut all = Vec::new();
        for (t, b) in [(1, 0), (2, 100), (3, 200), (4, 200), (5, 200), (6, 300)] {
            all.extend(n.at_row(t, seen(b), None));
        }
        // Rows 4 and 5 saw no growth: row 5 is noted when row 6 sees the file grow, so the
        // bytes 201..300 are placed between 5 and 6, not between 3 and 6.
        assert_eq!(
            sizes(&all),
            [
                (1, 1, 0),
                (2, 1, 100),
                (3, 1, 200),
                (5, 1, 200),
                (6, 1, 300)
            ]
        );
    }

    #[test]
    fn stderr_in_stdouts_file_is_noted_once_and_its_own_file_apart() {
        let mut n = OutputNotes::default();
        let notes = n.at_row(1, seen(10), seen(10));
        assert_eq!(sizes(&notes), [(1, 1, 10)]);
        let other = Some(FileSeen {
            dev: 1,
            ino: 8,
            bytes: 4,
        });
        assert_eq!(sizes(&n.at_row(2, seen(10), other)), [(2, 2, 4)]);
    }

    #[test]
    fn past_the_exact_rows_a_busy_file_is_noted_every_few_rows() {
        let mut n = OutputNotes::default();
        let mut count = 0;
        for t in 0..(i64::from(EXACT_ROWS) + 600) {
            count += n.at_row(t, seen(t as u64 * 10), None).len();
        }
        assert_eq!(count, EXACT_ROWS as usize + 600 / COARSE_EVERY as usize);
    }
}
