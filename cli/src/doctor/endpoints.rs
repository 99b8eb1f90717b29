//! `slurmwatch doctor --endpoints`, on the slurmctld host as SlurmUser or root: does every
//! node's summary endpoint answer the controller? Each node is asked, all at once, for a job
//! no node records ([`PROBE_JOB`]) exactly as the EpilogSlurmctld asks (the site's `[summary]`
//! url, the controller's own munge credential): a 404 is the answer of an endpoint that is up
//! and accepts that credential; anything else names what a real job's summary would meet.

use std::time::{Duration, Instant};

use slurmwatch_core::analysis::admin_comment::Incarnation;
use slurmwatch_core::export::admin_comment_store::{self, NodeAnswer, Query, Verifier};

use super::checks::{Check, Verdict};

/// A job id no node records: Slurm never hands it out (its largest is far below).
pub const PROBE_JOB: u32 = u32::MAX;
/// How long each node may take, as the EpilogSlurmctld allows one try.
const PER_NODE: Duration = admin_comment_store::NODE_TIMEOUT;

/// One check per node (`endpoint`), in the nodes' order.
pub fn check_endpoints(url: &str, nodes: &[String], verifier: &Verifier) -> Vec<Check> {
    let q = Query {
        template: url,
        job_id: PROBE_JOB,
        run: Incarnation {
            uid: 0,
            start_unix: 0,
        },
        nodes,
        verifier,
    };
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let asked: Vec<_> = nodes
            .iter()
            .map(|n| {
                let q = &q;
                s.spawn(move || {
                    let a = admin_comment_store::ask(q, n, PER_NODE);
                    (a, t0.elapsed())
                })
            })
            .collect();
        nodes
            .iter()
            .zip(asked)
            .map(|(node, h)| match h.join() {
                Ok((a, took)) => verdict(node, &a, took),
                Err(_) => verdict(
                    node,
                    &NodeAnswer::Failed("internal error".into()),
                    t0.elapsed(),
                ),
            })
            .collect()
    })
}

/// What one node's answer to the probe means.
fn verdict(node: &str, a: &NodeAnswer, took: Duration) -> Check {
    let (verdict, finding, fix) = match a {
        NodeAnswer::NotRecorded => (
            Verdict::Ok,
            format!("{node} answers the controller ({} ms)", took.as_millis()),
            "",
        ),
        NodeAnswer::Busy(why) => (
            Verdict::Note,
            format!("{node} is busy: {why}"),
            "asked again within the bound at a job's end; if it stays busy, look for clients holding its connections",
        ),
        NodeAnswer::Refused(why) => (
            Verdict::Fail,
            format!("{node} refuses the controller: {why}"),
            "SlurmUser and the munge key must be the same here and on the node, and both run the same slurmwatch",
        ),
        NodeAnswer::Failed(why) => (
            Verdict::Fail,
            format!("{node} gives no answer: {why}"),
            "systemctl enable --now slurmwatch-node on the node, and let this host reach its port",
        ),
        // A summary for a job no node records: not ours to trust.
        NodeAnswer::Recorded(_) => (
            Verdict::Fail,
            format!("{node} answered a summary for job {PROBE_JOB}, which no node records"),
            "check what listens on the node's port",
        ),
    };
    Check {
        name: "endpoint",
        verdict,
        finding,
        fix: fix.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_answer_has_its_verdict() {
        let ms = Duration::from_millis(12);
        let ok = verdict("c01", &NodeAnswer::NotRecorded, ms);
        assert_eq!(
            (ok.verdict, ok.finding.as_str()),
            (Verdict::Ok, "c01 answers the controller (12 ms)")
        );
        let down = verdict(
            "c02",
            &NodeAnswer::Failed("c02:9944: Connection refused (os error 111)".into()),
            ms,
        );
        assert_eq!(down.verdict, Verdict::Fail);
        assert!(down.fix.contains("slurmwatch-node"), "{}", down.fix);
        let refused = verdict(
            "c03",
            &NodeAnswer::Refused("the node answered HTTP 403: not root".into()),
            ms,
        );
        assert_eq!(refused.verdict, Verdict::Fail);
        assert_eq!(
            verdict("c04", &NodeAnswer::Busy("HTTP 503".into()), ms).verdict,
            Verdict::Note
        );
    }
}
