//! `slurmwatch [JOB]`: the live dashboard and the scripting interface.

#[derive(clap::Args, Default)]
pub struct WatchArgs {
    /// Job id (12345, 12345_3, 12345.0); none lists your running and pending jobs.
    pub job: Option<String>,
}

pub fn run(_args: WatchArgs) -> anyhow::Result<i32> {
    anyhow::bail!("the live view is not built yet")
}
