//! `sacct`.
