//! The `summary(key, value)` table: what the epilog computed when the job ended.
//!
//! Optional: files written before the epilog ran (or by a plugin without one) have no such
//! table, and readers of schema 1 that do not know it ignore it, so adding it does not change
//! [`SCHEMA_VERSION`](super::SCHEMA_VERSION). Each value is JSON text (a number, `null`, a
//! list), so `sqlite3` shows plain numbers and typed readers parse without guessing.
//!
//! The epilog runs as root on a file owned by the job's user: [`write`] opens it only if it
//! is a regular file reached without a symlink (`O_NOFOLLOW`, then SQLite with
//! `SQLITE_OPEN_NOFOLLOW` and an inode check), turns off the user-editable parts of the schema
//! (`trusted_schema = OFF`, defensive mode) and refuses a file carrying triggers.

use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags};

use super::reader::{check_header, check_version, db_err};
use super::{sql_err, Reader};
use crate::error::{Error, Result};

const CREATE: &str = "CREATE TABLE IF NOT EXISTS summary (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);";

/// Replaces the summary of the job file at `path` with `pairs`, in one transaction.
pub fn write(path: &Path, pairs: &[(String, String)]) -> Result<()> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Error::Store(format!("cannot open {}: {e}", path.display())))?;
    let md = file.metadata().map_err(|e| sql_err(path, e))?;
    if !md.is_file() {
        return Err(sql_err(path, "not a regular file"));
    }
    check_header(path, md.len(), &file)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| db_err(path, e))?;
    let now = std::fs::symlink_metadata(path).map_err(|e| sql_err(path, e))?;
    if (md.dev(), md.ino()) != (now.dev(), now.ino()) {
        return Err(sql_err(path, "the file was replaced while being opened"));
    }
    harden(&conn, path)?;
    conn.busy_timeout(Duration::from_millis(500))
        .map_err(|e| db_err(path, e))?;
    check_version(&conn, path)?;
    let triggers: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| db_err(path, e))?;
    if triggers > 0 {
        return Err(sql_err(
            path,
            "the file carries triggers (slurmwatch never writes any): not written to",
        ));
    }
    let mut conn = conn;
    let tx = conn.transaction().map_err(|e| db_err(path, e))?;
    tx.execute_batch(CREATE).map_err(|e| db_err(path, e))?;
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
    // A file left in WAL mode by a writer that died: fold the WAL in so the file stands alone.
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    Ok(())
}

fn harden(conn: &Connection, path: &Path) -> Result<()> {
    use rusqlite::config::DbConfig;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
        .map_err(|e| db_err(path, e))?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)
        .map_err(|e| db_err(path, e))?;
    Ok(())
}

/// The summary's rows, or `None` when the file has no summary (the epilog has not run).
pub fn read(reader: &Reader) -> Result<Option<Vec<(String, String)>>> {
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
}
