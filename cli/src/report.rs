//! `slurmwatch report JOB`: the post-mortem.

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Job id.
    pub job: String,
}

pub fn run(_args: ReportArgs) -> anyhow::Result<i32> {
    anyhow::bail!("the report is not built yet")
}
