//! The harness itself, where its promise is about the cluster.

use slurmwatch_tests::*;
use std::time::Duration;

/// A test that fails cancels the jobs it submitted: a `Job` dropped while its thread unwinds
/// is `scancel`led, so one failure does not leave a job holding the node for the tests after
/// it. Performed: a thread submits a 5-min job, sees it running and panics.
#[cluster_test]
fn a_failing_test_cancels_its_running_job() {
    let _p = shared_plugstack();
    let payload = std::thread::spawn(|| {
        let job = Submit::new("unwinds", "sleep 300").submit();
        job.wait_running(Duration::from_secs(120));
        std::panic::panic_any((job.id, job.dir.clone()));
    })
    .join()
    .expect_err("the thread panics");
    let (id, dir) = *payload
        .downcast::<(u32, std::path::PathBuf)>()
        .expect("the job's id and directory");
    let job = Job {
        id,
        dir,
        log_offset: 0,
    };
    let end = job.wait(Duration::from_secs(60));
    assert_eq!(end.state, "CANCELLED", "job {id}");
    assert!(
        end.elapsed_seconds < 60,
        "job {id} ran {} s",
        end.elapsed_seconds
    );
}
