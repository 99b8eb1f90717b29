//! The `summary(key, value)` table: what the epilog computed when the job ended.
//!
//! Optional: files written before the epilog ran (or by a plugin without one) have no such
//! table, and readers of schema 1 that do not know it ignore it, so adding it does not change
//! [`SCHEMA_VERSION`](super::SCHEMA_VERSION). Each value is JSON text (a number, `null`, a
//! list), so `sqlite3` shows plain numbers and typed readers parse without guessing.
//!
//! The epilog runs as root on a file a user may have written: [`write`] opens it hardened
//! (see `harden`: a regular file reached without a symlink, SQLite on that inode, defensive
//! mode, `trusted_schema` off, the schema exactly ours, every statement under a deadline).

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};

use super::fault::db_err;
use super::harden::{self, Deadline, Guard, WRITE_CALL_BUDGET};
use super::{schema, Reader};
use crate::error::Result;

/// Replaces the summary of the job file at `path` with `pairs`, in one transaction.
pub fn write(path: &Path, pairs: &[(String, String)]) -> Result<()> {
    write_with(path, pairs, None)
}

/// As [`write`], finished by `deadline` or not at all (the epilog's bound).
pub fn write_until(path: &Path, pairs: &[(String, String)], deadline: Deadline) -> Result<()> {
    write_with(path, pairs, Some(deadline))
}

fn write_with(path: &Path, pairs: &[(String, String)], deadline: Option<Deadline>) -> Result<()> {
    let guard = Guard::new(WRITE_CALL_BUDGET, deadline, "written");
    guard.call(path, || {
        let file = harden::open_file(path, true)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let mut conn = Connection::open_with_flags(path, flags).map_err(|e| db_err(path, e))?;
        harden::configure(&conn, &guard).map_err(|e| db_err(path, e))?;
        harden::same_inode(path, &file)?;
        conn.busy_timeout(Duration::from_millis(500))
            .map_err(|e| db_err(path, e))?;
        harden::check_schema(&conn, path)?;
        // The write lock at BEGIN: a step's writer may still be committing (see writer.rs).
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| db_err(path, e))?;
        tx.execute_batch(schema::SUMMARY_CREATE)
            .map_err(|e| db_err(path, e))?;
        tx.execute("DELETE FROM summary", [])
            .map_err(|e| db_err(path, e))?;
        {
            let mut ins = tx
                .prepare("INSERT INTO summary(key, value) VALUES (?1, ?2)")
                .map_err(|e| db_err(path, e))?;
            for (k, v) in pairs {
                ins.execute(params![k, v]).map_err(|e| db_err(path, e))?;
            }
        }
        tx.commit().map_err(|e| db_err(path, e))?;
        // A file left in WAL mode by a writer that died: fold the WAL in so the file stands
        // alone.
        let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        Ok(())
    })
}

/// The summary's rows, or `None` when the file has no summary (the epilog has not run).
pub fn read(reader: &Reader) -> Result<Option<Vec<(String, String)>>> {
    reader.guarded(|| {
        let conn = reader.conn();
        let path = reader.path();
        let exists: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'summary'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| db_err(path, e))?;
        if exists == 0 {
            return Ok(None);
        }
        let mut stmt = conn
            .prepare("SELECT key, value FROM summary ORDER BY key")
            .map_err(|e| db_err(path, e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<(String, String)>>>())
            .map_err(|e| db_err(path, e))?;
        Ok(Some(rows))
    })
}
