//! Snapshot → text for machines and people: JSON (strict, units in key names), CSV (escaped
//! against formula injection), sparkline marks, and user text made safe for a terminal. Pure functions; number formats are
//! [`crate::units`]'s.

pub mod csv;
pub mod json;
pub mod spark;
pub mod terminal;
