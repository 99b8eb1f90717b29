//! Snapshot → text for machines and people: JSON (strict, units in key names), CSV (escaped
//! against formula injection) and sparkline marks. Pure functions; number formats are
//! [`crate::units`]'s.

pub mod csv;
pub mod json;
pub mod spark;
