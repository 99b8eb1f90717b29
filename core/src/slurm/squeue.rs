//! `squeue`.
