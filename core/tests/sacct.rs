//! sacct parsing, from output captured on the test cluster (Slurm 22.05.8) and hand-made
//! files for the traps this cluster cannot produce (docs/design.md §4). Plus the runner's bounded
//! wait and its one-sentence errors, with a fake `sacct`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use slurmwatch_core::slurm::sacct::{self, parse, Query, ReqMem, SacctError, DELIMITER};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sacct")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn rec(name: &str) -> sacct::JobAccounting {
    parse(&fixture(name), DELIMITER).unwrap_or_else(|| panic!("{name}: no job line"))
}

#[test]
fn completed_job_with_srun_step() {
    let r = rec("completed.txt");
    assert_eq!(r.job.job_id, "94");
    assert_eq!(r.job.state.name, "COMPLETED");
    assert_eq!(r.job.exit_code.map(|e| (e.code, e.signal)), Some((0, 0)));
    assert_eq!(r.job.elapsed_seconds, Some(7));
    assert_eq!(r.job.timelimit_minutes, Some(10));
    assert_eq!(r.job.alloc_tres.cpus, Some(2));
    assert_eq!(r.job.alloc_tres.memory_bytes, Some(GIB));
    assert_eq!(r.job.req_mem, Some(ReqMem::Node { bytes: GIB }));
    let names: Vec<_> = r.steps.iter().map(|s| s.step.clone().unwrap()).collect();
    assert_eq!(names, ["batch", "extern", "0"]);
    // MaxRSS only on steps, never on the job line.
    assert_eq!(r.job.max_rss_bytes, None);
    assert!(r.max_rss_bytes().is_some());
    assert!(
        r.steps_total_cpu_seconds().unwrap() > 3.5,
        "the 4-s burn in step 0"
    );
    assert_eq!(r.skipped_lines, 0);
    assert!(!r.is_open());
    assert!(r.job.start_unix.unwrap() <= r.job.end_unix.unwrap());
    assert_eq!(r.job.end_unix.unwrap() - r.job.start_unix.unwrap(), 7);
}

#[test]
fn failed_with_127() {
    let r = rec("failed_127.txt");
    assert_eq!(r.job.state.name, "FAILED");
    assert_eq!(r.job.exit_code.map(|e| e.code), Some(127));
}

#[test]
fn out_of_memory() {
    let r = rec("oom.txt");
    assert_eq!(r.job.state.name, "OUT_OF_MEMORY");
    assert_eq!(r.job.exit_code.map(|e| e.signal), Some(125));
    assert_eq!(r.job.alloc_tres.memory_bytes, Some(300 * MIB));
    assert_eq!(r.max_rss_bytes(), Some(105460 * 1024));
}

#[test]
fn timeout_batch_step_is_cancelled() {
    let r = rec("timeout.txt");
    assert_eq!(r.job.state.name, "TIMEOUT");
    assert_eq!(r.job.timelimit_minutes, Some(1));
    assert_eq!(r.job.elapsed_seconds, Some(71));
    let b = r
        .steps
        .iter()
        .find(|s| s.step.as_deref() == Some("batch"))
        .unwrap();
    assert_eq!(b.state.name, "CANCELLED");
    assert_eq!(b.exit_code.map(|e| e.signal), Some(15));
}

#[test]
fn cancelled_by_root_running_and_pending() {
    let r = rec("cancelled.txt");
    assert_eq!(r.job.state.name, "CANCELLED");
    assert_eq!(r.job.state.cancelled_by_uid, Some(0));
    assert_eq!(r.job.uid, Some(1001));
    let p = rec("cancelled_pending.txt");
    assert_eq!(p.job.state.cancelled_by_uid, Some(0));
    assert_eq!(p.job.start_unix, None, "Start=None: never ran");
    assert_eq!(p.queue_wait_seconds(), None);
    assert!(p.steps.is_empty());
    let h = rec("pending_held.txt");
    assert_eq!(h.job.state.name, "PENDING");
    assert_eq!(h.job.node_list, None, "'None assigned' is no node");
    assert!(h.is_open());
}

#[test]
fn running_record_is_open() {
    let r = rec("running_cancel_98.txt");
    assert_eq!(r.job.state.name, "RUNNING");
    assert_eq!(r.job.end_unix, None, "End=Unknown");
    assert!(r.is_open());
    let s = rec("trap_running_stale.txt");
    assert!(s.is_open());
    assert_eq!(s.job.elapsed_seconds, Some(999_999));
}

#[test]
fn array_task_keeps_raw_id() {
    let r = rec("array_task.txt");
    assert_eq!(r.job.job_id, "103_1");
    assert_eq!(r.job.fields["JobIDRaw"], "106");
    // The task's own id is its file's name, not its array's.
    assert_eq!(r.raw_id(), Some(106));
    assert_eq!(r.key(), slurmwatch_core::slurm::job_id::Key::Raw(106));
    assert_eq!(r.steps.len(), 2);
}

#[test]
fn reqmem_0n_is_whole_node_and_alloc_mem_is_a_total() {
    let r = rec("trap_reqmem_0n_multinode_gres.txt");
    let m = r.job.req_mem.unwrap();
    assert!(m.is_whole_node(), "0n is all of the node's memory, not 0");
    assert_eq!(r.job.alloc_tres.memory_bytes, Some(500 * GIB));
    assert_eq!(r.job.memory_per_node_bytes(), Some(250 * GIB));
    // gres/gpu=8 and gres/gpu:a100=8 are the same 8 cards.
    assert_eq!(r.job.gpus_allocated(), Some(8));
    assert_eq!(r.job.alloc_tres.gpu_types, ["a100"]);
    assert_eq!(r.max_rss_bytes(), Some(30 * GIB));
    assert_eq!(r.job.timelimit_minutes, Some(1440));
    assert_eq!(r.queue_wait_seconds(), Some(300));
    assert_eq!(r.job.planned_seconds, Some(300.0));
}

#[test]
fn typed_gres_only_sum() {
    let r = rec("trap_gres_typed_only.txt");
    assert_eq!(r.job.gpus_allocated(), Some(3));
}

#[test]
fn old_allocgres_and_per_cpu_reqmem() {
    let r = rec("trap_allocgres_old.txt");
    assert_eq!(r.job.gpus_allocated(), Some(4));
    assert_eq!(r.job.req_mem, Some(ReqMem::Cpu { bytes: 4000 * MIB }));
}

#[test]
fn planned_replaces_reserved() {
    let r = rec("trap_planned_2302.txt");
    assert_eq!(r.job.planned_seconds, Some(450.0));
}

#[test]
fn header_only_is_unknown_job() {
    assert!(parse("JobID\u{1f}State\n", DELIMITER).is_none());
    assert!(parse("", DELIMITER).is_none());
}

#[test]
fn unpinned_time_formats_are_not_misread() {
    assert_eq!(sacct::parse_time("Ystday 10:44"), None);
    assert_eq!(sacct::parse_time("Unknown"), None);
    assert_eq!(sacct::parse_time("None"), None);
}

// --- the runner, with a fake sacct ----------------------------------------------------

/// A fake sacct running `script`, with `$d` the delimiter it was asked for (as sacct, `|`
/// when none).
fn fake(script: &str) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("sacct");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nd='|'\nfor a in \"$@\"; do case \"$a\" in --delimiter=*) d=\"${{a#--delimiter=}}\";; esac; done\n{script}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    (d, p)
}

#[test]
fn missing_sacct_is_one_sentence() {
    let q = Query {
        program: "/nonexistent/sacct".into(),
        timeout: Duration::from_secs(2),
        ..Query::default()
    };
    let e = q.job("1").unwrap_err();
    assert!(matches!(e, SacctError::Missing(_)), "{e}");
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn hanging_sacct_is_cut_off() {
    let (_d, p) = fake("sleep 30");
    let q = Query {
        program: p,
        timeout: Duration::from_millis(500),
        ..Query::default()
    };
    let t = Instant::now();
    let e = q.job("1").unwrap_err();
    assert!(matches!(e, SacctError::TimedOut(_)), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn pinned_environment_and_invalid_field_retry() {
    // Refuses SubmitLine as a release before 20.11 would; prints the env it saw in the job
    // name column. The field is dropped and the query asked again.
    let (_d, p) = fake(
        r#"case "$*" in *SubmitLine*) echo 'sacct: error: Invalid field requested: "SubmitLine"' >&2; exit 1;; esac
printf 'JobID%sJobName%sState%sReserved\n1%s%s-%s%sCOMPLETED%s00:00:09\n' "$d" "$d" "$d" "$d" "$SLURM_TIME_FORMAT" "$LC_ALL" "$d" "$d""#,
    );
    let q = Query {
        program: p,
        timeout: Duration::from_secs(5),
        ..Query::default()
    };
    let r = q.job("1").unwrap();
    assert_eq!(r.job.job_name, "standard-C");
    assert_eq!(r.job.planned_seconds, Some(9.0));
    assert_eq!(r.job.submit_line, None);
}

/// The report's one slurmdbd round trip: `q.job` asks sacct once, with a field list every
/// supported release accepts (no `Planned`, which 22.05 refuses, nor `Reserved`, which 23.02+
/// renamed), and the answer carries what the report used to ask a second query for.
#[test]
fn one_job_is_one_sacct_call() {
    let d = tempfile::tempdir().unwrap();
    let calls = d.path().join("calls");
    let (_f, p) = fake(&format!(
        r#"echo "$*" >> {calls}
case "$*" in *Planned*|*Reserved*) echo 'sacct: error: Invalid field requested: "Planned"' >&2; exit 1;; esac
printf 'JobID%sState%sEligible%sStart%sSubmitLine%sAdminComment%sJobIDRaw\n' "$d" "$d" "$d" "$d" "$d" "$d"
printf '5%sCOMPLETED%s2026-12-01T10:00:00%s2026-12-01T10:00:07%ssbatch -o out.%%j job.sh%sSW1:x%s5\n' "$d" "$d" "$d" "$d" "$d" "$d""#,
        calls = calls.display()
    ));
    let q = Query {
        program: p,
        timeout: Duration::from_secs(5),
        ..Query::default()
    };
    let r = q.job("5").unwrap();
    let asked = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(asked.lines().count(), 1, "{asked}");
    assert_eq!(r.job.planned_seconds, Some(7.0));
    assert_eq!(
        r.job.submit_line.as_deref(),
        Some("sbatch -o out.%j job.sh")
    );
    assert_eq!(r.job.admin_comment.as_deref(), Some("SW1:x"));
}

/// A newline typed into a field (here the job name and the SubmitLine) stays in its field,
/// and the next record still parses.
#[test]
fn a_newline_inside_a_field_does_not_lose_the_record() {
    let text = "JobID\x1fJobName\x1fState\x1fSubmitLine\x1fAdminComment\x1fJobIDRaw\n\
                7\x1fa\nb\x1fCOMPLETED\x1fsbatch --comment=x\ny job.sh\x1f\x1f7\n\
                7.batch\x1fbatch\x1fCOMPLETED\x1f\x1f\x1f7.batch\n";
    let r = slurmwatch_core::slurm::sacct::parse(text, "\x1f").unwrap();
    assert_eq!(r.skipped_lines, 0);
    assert_eq!(r.job.job_name, "a\nb");
    assert_eq!(
        r.job.submit_line.as_deref(),
        Some("sbatch --comment=x\ny job.sh")
    );
    assert_eq!(r.steps.len(), 1);
}

/// Without a delimiter no user can type, sacct's text cannot be read safely: a sacct that
/// refuses `--delimiter` is one sentence, never a fallback to `|`.
#[test]
fn a_refused_delimiter_is_an_error() {
    let (_d, p) = fake(
        r#"case "$*" in *delimiter*) echo 'sacct: unrecognized option --delimiter' >&2; exit 1;; esac
printf 'JobID|State\n7|FAILED\n'"#,
    );
    let q = Query {
        program: p,
        timeout: Duration::from_secs(5),
        ..Query::default()
    };
    let e = q.job("7").unwrap_err();
    assert!(
        matches!(&e, SacctError::Failed(m) if m.contains("--delimiter")),
        "{e}"
    );
}

#[test]
fn unknown_job_and_bad_ids() {
    let (_d, p) = fake(r#"printf 'JobID\037State\n'"#);
    let q = Query {
        program: p,
        timeout: Duration::from_secs(5),
        ..Query::default()
    };
    assert!(matches!(q.job("424242"), Err(SacctError::UnknownJob(_))));
    assert!(matches!(q.job("1;rm -rf /"), Err(SacctError::Failed(_))));
}

// --- memory of multi-task steps, CPU without step lines (issue 17) --------------------------

const KIB: u64 = 1 << 10;

/// Captured on the test cluster: `sbatch -n 4 -O --mem=2G`, `srun -n 4 -O`, each task
/// holding ~300 MiB. MaxRSS is one task's; `TRESUsageInTot` `mem=` is the four summed.
#[test]
fn multitask_step_memory_is_the_sum_of_its_tasks() {
    let r = rec("multitask_4x300m.txt");
    let s0 = r
        .steps
        .iter()
        .find(|s| s.step.as_deref() == Some("0"))
        .unwrap();
    assert_eq!(s0.tasks, Some(4));
    assert_eq!(s0.nodes, Some(1));
    assert_eq!(s0.max_rss_bytes, Some(310008 * KIB));
    assert_eq!(s0.tres_usage_in_max_mem_bytes, Some(310008 * KIB));
    assert_eq!(s0.tres_usage_in_tot_mem_bytes, Some(1240004 * KIB));
    let m = r.memory_per_node().unwrap();
    assert_eq!(m.bytes_per_node, 1240004 * KIB);
    assert_eq!(m.basis, sacct::StepMemoryBasis::TasksSum { tasks: 4 });
    assert_eq!(
        m.basis.describe(),
        "sacct: sum of 4 tasks' peaks (TRESUsageInTot)"
    );
    // The largest task alone would say a quarter of it.
    assert_eq!(r.max_rss_bytes(), Some(310008 * KIB));
    // The batch step's one task: its MaxRSS.
    let b = r
        .steps
        .iter()
        .find(|s| s.step.as_deref() == Some("batch"))
        .unwrap();
    assert_eq!(
        b.memory_per_node().map(|m| m.basis),
        Some(sacct::StepMemoryBasis::OneTask)
    );
}

/// The same tasks freed their 300 MiB 4 s before exiting: `TRESUsageInTot` still sums each
/// task's peak, not its last reading (Slurm 22.05.8, jobacct_gather/cgroup).
#[test]
fn tasks_sum_is_of_peaks_not_of_last_readings() {
    let r = rec("multitask_4x300m_freed.txt");
    let m = r.memory_per_node().unwrap();
    assert_eq!(m.basis, sacct::StepMemoryBasis::TasksSum { tasks: 4 });
    assert!(m.bytes_per_node > 4 * 300 * MIB, "{}", m.bytes_per_node);
}

/// Captured on the two-node test cluster: `-N2 --ntasks-per-node=2`, `srun -n 4`, each task
/// ~300 MiB. 22.05.8's `TRESUsageInTot` for the step is `mem=613.50M`, one node's two tasks,
/// not four (and `AveRSS` is it ÷ 4); per node: ⌈4/2⌉ × the largest task.
#[test]
fn multinode_step_memory_is_tasks_per_node_times_the_largest() {
    let r = rec("multinode_2x2_tasks_300m.txt");
    let s0 = r
        .steps
        .iter()
        .find(|s| s.step.as_deref() == Some("0"))
        .unwrap();
    assert_eq!((s0.tasks, s0.nodes), (Some(4), Some(2)));
    assert_eq!(s0.max_rss_bytes, Some(314116 * KIB));
    assert_eq!(
        s0.tres_usage_in_tot_mem_bytes,
        Some((613.5 * MIB as f64) as u64),
        "one node's sum"
    );
    let m = r.memory_per_node().unwrap();
    assert_eq!(m.bytes_per_node, 2 * 314116 * KIB);
    assert_eq!(
        m.basis,
        sacct::StepMemoryBasis::TasksPerNode { tasks: 4, nodes: 2 }
    );
    assert!(
        m.basis.describe().contains("2 tasks per node"),
        "{}",
        m.basis.describe()
    );
    // One task per node: exactly the largest task.
    let h = "JobID\u{1f}NNodes\u{1f}NTasks\u{1f}MaxRSS\u{1f}TRESUsageInTot\u{1f}TRESUsageInMax";
    let text = format!(
        "{h}\n8\u{1f}2\u{1f}\u{1f}\u{1f}\u{1f}\n8.0\u{1f}2\u{1f}2\u{1f}300M\u{1f}mem=500M\u{1f}mem=300M\n"
    );
    let m = parse(&text, DELIMITER).unwrap().memory_per_node().unwrap();
    assert_eq!(m.bytes_per_node, 300 * MIB);
    // No sum printed (an older sacct): the largest task, called a floor.
    let text =
        format!("{h}\n9\u{1f}1\u{1f}\u{1f}\u{1f}\u{1f}\n9.0\u{1f}1\u{1f}8\u{1f}2G\u{1f}\u{1f}\n");
    let m = parse(&text, DELIMITER).unwrap().memory_per_node().unwrap();
    assert_eq!(m.bytes_per_node, 2 * GIB);
    assert_eq!(
        m.basis,
        sacct::StepMemoryBasis::LargestTask { tasks: Some(8) }
    );
    assert!(m.basis.describe().contains("floor"));
}

/// A record with its step lines gone (hand-made from completed.txt's job line): CPU from
/// the job line's TotalCPU, said so.
#[test]
fn no_step_lines_takes_cpu_from_the_job_line() {
    let r = rec("trap_no_step_lines.txt");
    assert!(r.steps.is_empty());
    assert_eq!(r.steps_total_cpu_seconds(), None);
    assert_eq!(
        r.cpu_seconds(),
        Some((4.135, sacct::CpuBasis::JobLineTotalCpu))
    );
    assert!(sacct::CpuBasis::JobLineTotalCpu
        .describe()
        .contains("job line"));
    // With step lines, the steps' sum.
    let r = rec("completed.txt");
    assert_eq!(r.cpu_seconds().unwrap().1, sacct::CpuBasis::StepsTotalCpu);
    assert_eq!(
        r.memory_per_node().unwrap().basis,
        sacct::StepMemoryBasis::OneTask
    );
}

/// The report of the captured sacct-only `srun -n 4` job: memory efficiency from the four
/// tasks together (not one task's 15 %), MaxRSS ÷ request beside it, CPU and time from
/// sacct's own figures; no GPUs is a reason, not 0.
#[test]
fn sacct_only_report_efficiencies() {
    use slurmwatch_core::report;
    let r = rec("multitask_4x300m.txt");
    let rep = report::build("639", &[], Some(&r), None, None);
    let e = &rep.efficiency;
    let sum = 1240004.0 * 1024.0;
    let mem = e.memory.percent.unwrap();
    assert!(
        (mem - sum * 100.0 / (2.0 * GIB as f64)).abs() < 1e-6,
        "{e:?}"
    );
    assert!(
        e.memory.basis.contains("sum of 4 tasks' peaks"),
        "{}",
        e.memory.basis
    );
    let rss = e.memory_max_rss.as_ref().unwrap().percent.unwrap();
    assert!((rss - 310008.0 * 1024.0 * 100.0 / (2.0 * GIB as f64)).abs() < 1e-6);
    // TotalCPU of the steps (0.013 + 0.001 + 1.901 s) over 9 s × 1 CPU.
    let cpu = e.cpu.percent.unwrap();
    assert!((cpu - 1.915 * 100.0 / 9.0).abs() < 1e-6, "{e:?}");
    assert!(
        e.cpu.basis.contains("summed over the steps"),
        "{}",
        e.cpu.basis
    );
    assert!((e.time.percent.unwrap() - 9.0 * 100.0 / 300.0).abs() < 1e-9);
    assert_eq!(e.gpu_utilization.percent, None);
    assert_eq!(
        e.gpu_utilization.reason.as_deref(),
        Some("the job has no GPUs")
    );
    let v: serde_json::Value = serde_json::from_str(&rep.to_json()).unwrap();
    assert_eq!(
        v["memory"]["sacct_memory_per_node_bytes"],
        1240004u64 * 1024
    );
    assert!(v["efficiency"]["memory_efficiency_percent"].is_number());
    assert!(v["efficiency"]["gpu_memory_efficiency_percent"].is_null());
    assert!(v["efficiency"]["gpu_memory_efficiency_percent_reason"].is_string());
    let text = report::text::render(&rep, false);
    assert!(text.contains("EFFICIENCY"), "{text}");
    assert!(text.contains("sum of 4 tasks' peaks"), "{text}");
    // Without step lines: CPU from the job line, said in the basis and a note.
    let r = rec("trap_no_step_lines.txt");
    let rep = report::build("94", &[], Some(&r), None, None);
    assert!(
        rep.efficiency.cpu.basis.contains("job line"),
        "{:?}",
        rep.efficiency.cpu
    );
    assert!(rep.notes.iter().any(|n| n.contains("job line's TotalCPU")));
    assert!((rep.efficiency.cpu.percent.unwrap() - 4.135 * 100.0 / (7.0 * 2.0)).abs() < 1e-6);
}

/// Without a recording the text report says `n/a` once for an unknown peak, never `n/an/a`.
#[test]
fn sacct_only_text_has_no_doubled_na() {
    use slurmwatch_core::report;
    let r = rec("multitask_4x300m.txt");
    let text = report::text::render(&report::build("639", &[], Some(&r), None, None), false);
    assert!(!text.contains("n/an/a"), "{text}");
    assert!(text.contains("sacct per node 1.18 GiB"), "{text}");
}

/// The same through the multi-job path: a record holding a newline keeps its steps; a record
/// sacct left short of fields at the end is counted as skipped.
#[test]
fn a_newline_inside_a_field_in_a_window_answer() {
    let text = "JobID\x1fJobName\x1fState\x1fSubmitLine\x1fJobIDRaw\n\
                7\x1fa\nb\x1fCOMPLETED\x1fsbatch job.sh\x1f7\n\
                7.batch\x1fbatch\x1fCOMPLETED\x1f\x1f7.batch\n\
                9\x1fz\x1fFAILED\x1fsbatch\x1f9\n\
                8\x1fbroken\n";
    let b = slurmwatch_core::slurm::sacct::parse_many(text, "\x1f");
    let names: Vec<&str> = b.records.iter().map(|r| r.job.job_name.as_str()).collect();
    assert_eq!(names, ["a\nb", "z"]);
    assert_eq!(b.records[0].steps.len(), 1);
    assert_eq!(b.skipped_lines, 1);
}

#[test]
fn many_jobs_in_one_call_each_once() {
    // An array's id and one of its tasks name the same job: sacct answers it twice.
    let t = fixture("array_task.txt");
    let body: String = t.lines().skip(1).map(|l| format!("{l}\n")).collect();
    let d = tempfile::tempdir().unwrap();
    let ans = d.path().join("answer");
    std::fs::write(&ans, format!("{t}\n{body}")).unwrap();
    let (_d, p) = fake(&format!(
        "echo \"$@\" > {0}.args\n{1}",
        ans.display(),
        slurmwatch_core::history::fixture::replay(&ans, DELIMITER)
    ));
    let q = Query {
        program: p,
        ..Query::default()
    };
    let b = q.jobs(&["103".into(), "103_1".into()]).unwrap();
    assert_eq!(b.records.len(), 1);
    assert_eq!(
        b.records[0].steps.len(),
        t.lines().count() - 2,
        "the steps, once"
    );
    let args = std::fs::read_to_string(format!("{}.args", ans.display())).unwrap();
    assert!(args.starts_with("-j 103,103_1 "), "{args}");
    assert!(q.jobs(&["1;ls".into()]).is_err());
    assert!(q.jobs(&[]).unwrap().records.is_empty());
}

/// slurmdbd's stand-in record, captured on the test cluster 0.3 s after a 1-s job ended
/// (job 3382, 3 of 40 polls) and the same job's record 1 s later: the end reached slurmdbd
/// before the start (slurmctld sends starts of jobs without a db index in batches), so the
/// row says `allocation`, UID 0, no partition, limit or request. The mail of a short job
/// carried that name (CI, 2 of 2 mail tests in one run).
#[test]
fn a_partial_record_is_told_apart_and_its_placeholders_are_not_the_jobs() {
    use slurmwatch_core::report;
    let partial = rec("partial_record_before_start.txt");
    assert!(partial.is_partial());
    assert_eq!(partial.job.job_name, "allocation");
    assert_eq!(partial.job.uid, Some(0));
    assert_eq!(partial.job.timelimit_minutes, None);
    assert_eq!(
        partial.job.req_mem,
        None,
        "ReqMem printed as {:?}",
        partial.job.fields.get("ReqMem")
    );
    assert_eq!(partial.job.alloc_tres.memory_bytes, Some(256 * MIB));
    let whole = rec("partial_record_filled_in.txt");
    assert!(!whole.is_partial());
    assert_eq!(whole.job.job_name, "capt2");
    assert!(!rec("completed.txt").is_partial());
    // History: not a finished run yet (no workload `allocation`), the whole record is.
    use slurmwatch_core::history::Run;
    assert!(Run::from_record(&partial).is_none());
    assert_eq!(
        Run::from_record(&whole).map(|r| r.name),
        Some("capt2".into())
    );

    let rep = report::build("3382", &[], Some(&partial), None, None);
    assert_eq!(rep.job.name, None);
    assert_eq!(rep.job.uid, None);
    assert_eq!(rep.job.timelimit_seconds, None);
    assert_eq!(rep.state.as_deref(), Some("COMPLETED"));
    assert!(
        rep.notes.iter().any(|n| n.contains("partial record")),
        "{:?}",
        rep.notes
    );
    let text = report::text::render(&rep, false);
    assert!(text.starts_with("Job 3382  user swuser1"), "{text}");
    // The jobs table: no name rather than slurmdbd's placeholder.
    let row = slurmwatch_core::jobs::row::Row::new(&partial, &rep);
    assert_eq!(row.job_name, "");
    assert_eq!(row.state.as_deref(), Some("COMPLETED"));
    let rep = report::build("3382", &[], Some(&whole), None, None);
    assert_eq!(rep.job.name.as_deref(), Some("capt2"));
    assert_eq!(rep.job.timelimit_seconds, Some(300));
    assert_eq!(
        slurmwatch_core::jobs::row::Row::new(&whole, &rep).job_name,
        "capt2"
    );
    assert!(!rep.notes.iter().any(|n| n.contains("partial record")));
}

// --- forged jobs through sacct's text (issue 37, attack 6) ---------------------------------

/// The delimiter of the `hostile_forging_*` captures (any the reader never asks is as good).
const FORGING_DELIMITER: &str = "\u{1f}3f9c2a7be1d40856\u{1f}";

/// Captured on the test cluster (Slurm 22.05.8, 2026-12-06): swuser2's job 11 was submitted
/// with `--comment=$'x\n<R>\ny'` and job 12 with `-J $'x\n<R>\ny'`, where `<R>` is a whole
/// record of the field list (`FIELDS`) joined by `\x1f`: job 4000000001 of swuser1, COMPLETED
/// on node n1, named `forged`. Job 10 is swuser1's own. Slurm kept the bytes: they are in
/// job 11's SubmitLine and in job 12's JobName and SubmitLine. The answers are
/// `sacct -j 10,11,12` (`_jobs`; the window `-S -E --allusers` over the three printed the same
/// bytes), `-j 11` (`_comment`) and `-j 12` (`_name`), each `--parsable2 -o <FIELDS>
/// --delimiter=` [`FORGING_DELIMITER`]. The fake prints them with the delimiter it is asked
/// for: the same capture with `--delimiter=$'\x1f'` was this text with the delimiter swapped,
/// byte for byte.
fn replaying(capture: &str) -> ([tempfile::TempDir; 2], Query) {
    let d = tempfile::tempdir().unwrap();
    let ans = d.path().join("answer");
    std::fs::write(&ans, fixture(capture)).unwrap();
    let (f, p) = fake(&slurmwatch_core::history::fixture::replay(
        &ans,
        FORGING_DELIMITER,
    ));
    (
        [d, f],
        Query {
            program: p,
            timeout: Duration::from_secs(10),
            ..Query::default()
        },
    )
}

/// The three jobs as sacct holds them: the attackers' two keep their names and SubmitLines
/// byte for byte, nobody's job 4000000001 appears, every step stays with its job.
fn assert_no_forged_job(records: &[sacct::JobAccounting], want: &[&str]) {
    let ids: Vec<&str> = records.iter().map(|r| r.job.job_id.as_str()).collect();
    assert_eq!(ids, want, "the jobs read");
    for r in records {
        let (id, user) = (&r.job.job_id, r.job.user.as_deref());
        assert_eq!(user, Some(if id == "10" { "swuser1" } else { "swuser2" }));
        assert_eq!(r.job.node_list.as_deref(), Some("vm"), "job {id}");
        assert_eq!(r.job.fields["JobIDRaw"], *id);
        let steps: Vec<&str> = r.steps.iter().map(|s| s.job_id.as_str()).collect();
        assert_eq!(steps, [format!("{id}.batch"), format!("{id}.extern")]);
        assert!(r.steps.iter().all(|s| s.node_list.as_deref() == Some("vm")));
        assert_eq!(r.skipped_lines, 0);
        let forged = |s: &str| s.starts_with("x\n4000000001\u{1f}") && s.ends_with("\ny");
        match id.as_str() {
            "10" => assert_eq!(r.job.job_name, "victim"),
            "11" => {
                assert_eq!(r.job.job_name, "wrap");
                let line = r.job.submit_line.as_deref().unwrap();
                let comment = line
                    .strip_prefix("sbatch --parsable -o /dev/null --comment=")
                    .and_then(|c| c.strip_suffix(" --wrap=true"))
                    .unwrap_or_else(|| panic!("{line:?}"));
                assert!(forged(comment), "{comment:?}");
            }
            _ => {
                assert!(forged(&r.job.job_name), "{:?}", r.job.job_name);
                assert_eq!(r.job.job_name.matches('\u{1f}').count(), FIELDS.len() - 1);
            }
        }
    }
}

use slurmwatch_core::slurm::sacct::FIELDS;

#[test]
fn a_comment_or_job_name_forges_no_job_in_a_window() {
    let (_d, q) = replaying("hostile_forging_jobs.txt");
    let w = sacct::Window {
        since_unix: 1_796_593_600,
        until_unix: 1_796_593_600 + 3600,
        all_users: true,
        ..sacct::Window::default()
    };
    let b = q.window(&w).unwrap();
    assert_no_forged_job(&b.records, &["10", "11", "12"]);
    assert_eq!((b.skipped_lines, b.orphan_steps), (0, 0));
    // What `history --all-users` makes of them: no run of job 4000000001, none named `forged`.
    let (runs, _) = slurmwatch_core::history::runs_from(&b.records);
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r.name != "forged"));
}

#[test]
fn a_comment_or_job_name_forges_no_job_in_jobs_and_report() {
    let (_d, q) = replaying("hostile_forging_jobs.txt");
    let b = q.jobs(&["10".into(), "11".into(), "12".into()]).unwrap();
    assert_no_forged_job(&b.records, &["10", "11", "12"]);
    assert_eq!((b.skipped_lines, b.orphan_steps), (0, 0));
    for (id, capture) in [
        ("11", "hostile_forging_comment.txt"),
        ("12", "hostile_forging_name.txt"),
    ] {
        let (_d, q) = replaying(capture);
        let r = q.job(id).unwrap();
        assert_no_forged_job(std::slice::from_ref(&r), &[id]);
    }
}
