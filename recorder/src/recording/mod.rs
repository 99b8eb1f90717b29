//! The sampler's decisions that need neither SPANK nor the job's processes: what a step
//! records (`step`), which series each reading stores (`rows`), when it reads, stores,
//! flushes and archives (`cadence`), how its GPUs are noted (`gpus`), and the job's phase
//! marks (`marks`). The plugin's
//! recorder is the shell that feeds them Slurm's values, the clock and the writer's view of
//! the steps table; here they are unit-tested with real values.

pub mod cadence;
pub mod gpus;
pub mod marks;
pub mod output;
pub mod rows;
pub mod step;
