//! Writing a command's answer to stdout, one rule for every subcommand: a closed pipe
//! (`| head`) is a clean end; any other failure (a full disk, a vanished terminal) is an
//! error the caller reports with exit 2, never a silent success.

use std::io::Write;

/// Writes `text` to stdout and flushes it; `Err` is one sentence for the user.
/// `v` as pretty JSON and a newline on stdout, written as it is serialized: a history of a
/// million jobs has tens of megabytes of patterns, never copied into a `Value` or a `String`
/// first. A closed pipe is not an error (as [`print`]).
pub fn print_json<T: serde::Serialize>(v: &T) -> Result<(), String> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let r = serde_json::to_writer_pretty(&mut out, v)
        .map_err(std::io::Error::from)
        .and_then(|_| out.write_all(b"\n"))
        .and_then(|_| out.flush());
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(format!("cannot write the output: {e}.")),
    }
}

pub fn print(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(format!("cannot write the output: {e}.")),
    }
}
