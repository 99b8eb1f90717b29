//! An `LD_PRELOAD` shim for the Slurm clients slurmwatch runs (`sacct`, `sacctmgr`): it takes
//! TCP's delayed-acknowledgement stalls out of their slurmdbd requests and changes nothing
//! else — no byte sent or received, no call's result.
//!
//! Why (docs/admin.md, "slurmdbd round trips"): Slurm writes a message's 4-byte length and its
//! body in two `write`s on a socket without `TCP_NODELAY`. Nagle's algorithm holds the body
//! until the length is acknowledged, and the receiver, in delayed-ACK mode, waits ~40 ms to
//! acknowledge it: once for the request, once for the answer, so every slurmdbd request
//! costs ~90 ms of waiting (a report's sacct makes two). The shim
//! - sets `TCP_NODELAY` on each TCP socket the program connects (the request goes out whole);
//! - re-arms `TCP_QUICKACK` on such a socket before each `read`/`recv` (the kernel leaves
//!   quick-ACK mode by itself; re-arming acknowledges at once what has arrived, so slurmdbd's
//!   body is not held behind its length).
//!
//! It only ever adds a `setsockopt` whose failure is ignored, and keeps `errno` as it was, so
//! the interposed call behaves as the real one. Written against libc directly: nothing on the
//! interposed path allocates, locks or can panic (it runs inside another program's `read`).
//!
//! The code is in `shim.rs`, shared with the example that tests/shim.rs loads.

mod shim;
