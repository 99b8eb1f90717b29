//! Prints the generated 10,000-job history of the `history` bench (`history::fixture`) with
//! every column the fixture knows, so a fake `sacct` can answer any `--format` from it
//! (`scripts/bench-vs-slurmpast.sh`): JSON `{"t0", "fields": [...], "rows": [[...], ...]}`,
//! a job line then its `.batch` step, times as sacct's `standard` format in this process's
//! time zone (run it under the same `TZ` as the tools that read it).

use slurmwatch_core::history::fixture;

fn main() {
    let rows = fixture::rows(&fixture::ten_thousand_jobs(), fixture::T0, 1);
    let v = serde_json::json!({
        "t0": fixture::T0,
        "fields": fixture::wide(),
        "rows": rows,
    });
    println!("{v}");
}
