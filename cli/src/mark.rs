//! `slurmwatch mark LABEL`: inside a recorded job, tell the step's recorder that a new phase
//! begins now. The rules and the wire are `slurmwatch_core::recording::marks`; this is the
//! shell. A mark never holds the job: when it cannot be taken the command says why and exits
//! 1 (2 for an empty label), and a job script that ignores the status goes on as before.

use anyhow::Result;
use clap::Args;
use slurmwatch_core::recording::marks::{self, MARK_SOCKET_ENV};

#[derive(Args, Clone)]
pub struct MarkArgs {
    /// The phase that begins now (e.g. "epoch 3"); at most 200 bytes are kept.
    pub label: String,
}

pub fn run(args: MarkArgs) -> Result<i32> {
    let socket = std::env::var_os(MARK_SOCKET_ENV).map(std::path::PathBuf::from);
    match marks::send(socket.as_deref(), &args.label) {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("slurmwatch mark: {e}");
            Ok(if matches!(e, marks::SendError::EmptyLabel) {
                2
            } else {
                1
            })
        }
    }
}
