//! `scontrol`.
