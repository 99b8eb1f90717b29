//! Slurm command runner (bounded time, pinned SLURM_TIME_FORMAT=standard, LC_ALL=C).
