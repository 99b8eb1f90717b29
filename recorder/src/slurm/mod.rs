//! What the recorder reads of Slurm without running a command: job ids (`job_id`) and the
//! plugstack configuration slurmstepd reads (`conf`, `plugstack`). Slurm's commands are
//! core's (`slurmwatch_core::slurm`, which re-exports these three).

pub mod conf;
pub mod job_id;
pub mod plugstack;
