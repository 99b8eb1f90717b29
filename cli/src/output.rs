//! Writing a command's answer to stdout, one rule for every subcommand: a closed pipe
//! (`| head`) is a clean end; any other failure (a full disk, a vanished terminal) is an
//! error the caller reports with exit 2, never a silent success.

use std::io::Write;

/// Writes `text` to stdout and flushes it; `Err` is one sentence for the user.
pub fn print(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(format!("cannot write the output: {e}.")),
    }
}
