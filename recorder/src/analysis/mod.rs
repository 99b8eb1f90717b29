//! The analysis the recorder needs: the epilog's summary of a job's file (`summary`) and what
//! it is computed from (`stalls`, `gpu_ledger`). The findings and advice built on them are
//! core's (`slurmwatch_core::analysis`, which re-exports these three).

pub mod gpu_ledger;
pub mod stalls;
pub mod summary;
