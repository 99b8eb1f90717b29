//! The shim built as a cdylib example, for tests/shim.rs (Cargo.toml says why).

#[path = "../src/shim.rs"]
mod shim;
