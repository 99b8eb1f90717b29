//! Typed errors of the library; each carries the path or value it is about.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot parse {path}: {what}")]
    Parse { path: PathBuf, what: String },
    #[error("{0}")]
    Store(String),
}

pub type Result<T> = std::result::Result<T, Error>;
