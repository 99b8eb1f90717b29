//! The store's errors: one sentence naming the file, for every way a job file can fail.
//! Every store module maps its SQLite errors through here.

use std::path::Path;

use rusqlite::ErrorCode;

use crate::error::Error;

/// A store error with the file's path in front.
pub(crate) fn sql_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Store(format!("{}: {e}", path.display()))
}

/// Maps SQLite's errors on a job file to one clear sentence with the path.
pub(crate) fn db_err(path: &Path, e: rusqlite::Error) -> Error {
    // SQLite parses the whole schema on a connection's first query: an entry beyond our
    // limits (see `harden`) or that is not SQL at all fails it, whichever query that is.
    let text = e.to_string();
    if let Some(rest) = text.strip_prefix("malformed database schema (") {
        let what = match rest.split_once(") - ") {
            Some((name, why)) => {
                format!("`{name}` does not parse within slurmwatch's limits: {why}")
            }
            None => text.clone(),
        };
        return unexpected_schema(path, &what);
    }
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => sql_err(
            path,
            "not an SQLite database (truncated, or another kind of file)",
        ),
        Some(ErrorCode::DatabaseCorrupt) => sql_err(
            path,
            format!("the file is damaged (truncated or partly overwritten): {e}"),
        ),
        _ => sql_err(path, e),
    }
}

/// The one sentence for a file whose schema is not ours.
pub(crate) fn unexpected_schema(path: &Path, what: &str) -> Error {
    Error::Store(format!(
        "{} has an unexpected schema ({what}): not opened",
        path.display()
    ))
}
