//! SPANK plugin.
