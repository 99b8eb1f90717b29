//! The `output_sizes` table (schema 4): the size of the job's output files at stored rows,
//! which places the job's own progress lines in time (`analysis::throughput` in core). The
//! recorder notes only the knots of the file's growth (`recording::output`); the table holds
//! `(t_unix_ms, fd, bytes)`: `fd` 1 is the batch script's stdout, 2 its stderr when that is
//! another file.

use rusqlite::{params, Connection};
use std::path::Path;

use super::fault::db_err;
use crate::error::Result;

/// The table's DDL (part of `schema::create_sql` from schema 4 on).
pub(crate) const CREATE: &str = "CREATE TABLE output_sizes (
    t_unix_ms INTEGER NOT NULL,
    fd        INTEGER NOT NULL,  -- 1 stdout, 2 stderr (when it is another file)
    bytes     INTEGER NOT NULL   -- the file's size then, by stat (never read)
);";

/// One noted size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputSize {
    pub t_unix_ms: i64,
    pub fd: u8,
    pub bytes: u64,
}

pub(crate) fn insert(conn: &Connection, path: &Path, sizes: &[OutputSize]) -> Result<()> {
    if sizes.is_empty() {
        return Ok(());
    }
    let mut st = conn
        .prepare_cached("INSERT INTO output_sizes(t_unix_ms, fd, bytes) VALUES (?1, ?2, ?3)")
        .map_err(|e| db_err(path, e))?;
    for s in sizes {
        let bytes = i64::try_from(s.bytes).unwrap_or(i64::MAX);
        st.execute(params![s.t_unix_ms, s.fd, bytes])
            .map_err(|e| db_err(path, e))?;
    }
    Ok(())
}

/// Every noted size of `fd`, in time order; none in a file before schema 4.
pub(crate) fn read(
    conn: &Connection,
    path: &Path,
    version: i64,
    fd: u8,
) -> Result<Vec<OutputSize>> {
    if version < 4 {
        return Ok(Vec::new());
    }
    let mut st = conn
        .prepare(
            "SELECT t_unix_ms, bytes FROM output_sizes WHERE fd = ?1 ORDER BY t_unix_ms, rowid",
        )
        .map_err(|e| db_err(path, e))?;
    let rows = st
        .query_map([fd], |r| {
            Ok(OutputSize {
                t_unix_ms: r.get(0)?,
                fd,
                bytes: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
            })
        })
        .map_err(|e| db_err(path, e))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(|e| db_err(path, e))
}
