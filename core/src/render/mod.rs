//! Snapshot → text for machines and people: JSON (strict, units in key names), CSV (escaped
//! against formula injection) and the number formats the dashboard shares. Pure functions.

pub mod csv;
pub mod json;
pub mod spark;
pub mod text;
