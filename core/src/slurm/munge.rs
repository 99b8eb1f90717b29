//! Munge credentials that authenticate a node's summary reply to the controller.
//!
//! The node's `slurmwatch metrics --listen` runs as root on an unprivileged port: where users
//! log in to compute nodes and the endpoint is down, a user could bind the port and serve a
//! forged summary. So the endpoint signs each summary reply with `munge` (which every Slurm
//! cluster runs, with one key cluster-wide) over [`summary_payload`] — the job, the node, the
//! controller's nonce for this one request and the SHA-256 of the exact body sent — and sends
//! the credential in [`HEADER`]. The controller runs `unmunge` on it and accepts the body only
//! when munge says the credential is valid (not expired, not replayed), root made it, and its
//! payload is exactly the one expected for that job, node, nonce and the body received
//! ([`check`]). Anything else is a [`Refusal`], one sentence.
//!
//! The nonce ([`new_nonce`], sent as `?nonce=`) is what makes a real reply worthless to keep:
//! anyone may fetch a signed reply from the running endpoint, and munge refuses a credential
//! only on its *second* decode — without the nonce, such a reply never decoded could be
//! served, within munge's 5-minute TTL, by a user who later holds the port.
//!
//! Both programs run through the bounded runner (`slurm::command`), input on stdin.

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::command::{self, Finished};

/// The response header that carries the credential.
pub const HEADER: &str = "X-Slurmwatch-Munge";
/// How long `munge` or `unmunge` may take (munged answers in milliseconds).
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The longest credential accepted (one for a ~130-byte payload is ~250 bytes).
pub const MAX_CREDENTIAL_BYTES: usize = 4096;
/// The uid whose credential is trusted on a reply: the node's endpoint runs as root.
pub const TRUSTED_UID: u32 = 0;

/// Hex digits in a nonce (16 random bytes).
pub const NONCE_HEX_DIGITS: usize = 32;

/// What the node signs for one summary reply: versioned, and binding the reply to its job,
/// its node (the node name the summary itself records), the request's nonce and its body.
pub fn summary_payload(job_id: u32, node: &str, nonce: &str, body: &[u8]) -> String {
    let hash = Sha256::digest(body);
    format!(
        "slurmwatch-summary v2 job={job_id} node={node} nonce={nonce} sha256={}",
        hex(&hash)
    )
}

/// What the controller signs for one summary request (sent in [`HEADER`] of the request):
/// the job, the incarnation it asks for (the job's uid and Slurm's start time) and the
/// nonce the reply must sign. A node serves a summary only to a valid, unreplayed
/// credential of root or SlurmUser over exactly this text (`export::http`).
pub fn request_payload(job_id: u32, uid: u32, start_unix: i64, nonce: &str) -> String {
    format!("slurmwatch-summary-request v1 job={job_id} uid={uid} start={start_unix} nonce={nonce}")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh nonce for one summary request: 16 bytes from the kernel's CSPRNG, in hex.
pub fn new_nonce() -> Result<String, String> {
    let mut b = [0u8; NONCE_HEX_DIGITS / 2];
    // SAFETY: the buffer is ours and its length is passed.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(format!(
            "no random nonce for the summary request: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(hex(&b))
}

/// Whether `s` is a nonce as [`new_nonce`] makes them (what a node signs is only that).
pub fn is_nonce(s: &str) -> bool {
    s.len() == NONCE_HEX_DIGITS && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether `s` looks like a munge credential and is safe in an HTTP header: `MUNGE:` then
/// base64 and a closing `:`, bounded.
pub fn is_credential(s: &str) -> bool {
    s.len() <= MAX_CREDENTIAL_BYTES
        && s.strip_prefix("MUNGE:").is_some_and(|rest| {
            rest.ends_with(':')
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+/=:".contains(&b))
        })
}

/// A credential over `payload` from `program` (`munge`); `Err` is one sentence.
pub fn sign(program: &str, payload: &str, timeout: Duration) -> Result<String, String> {
    let f = command::run_with_input(program, &[], payload.as_bytes(), timeout)
        .map_err(|e| format!("cannot sign with munge: {e}"))?;
    if !f.success {
        return Err(format!("cannot sign with munge: {program}: {}", f.reason()));
    }
    let cred = f.stdout.trim();
    if !is_credential(cred) {
        return Err(format!(
            "cannot sign with munge: {program} printed no credential"
        ));
    }
    Ok(cred.to_string())
}

/// What `unmunge -k status,uid` printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmunged {
    /// munge's status code (0: valid).
    pub status_code: u32,
    /// Its text, e.g. `Replayed credential (17)`.
    pub status: String,
    pub uid: u32,
    pub payload: String,
}

/// The trailing `(N)` of an unmunge value such as `root (0)`.
fn code_in(value: &str) -> Option<u32> {
    value
        .trim()
        .strip_suffix(')')
        .and_then(|v| v.rsplit_once('('))
        .and_then(|(_, n)| n.parse().ok())
}

/// Parses `unmunge -k status,uid`'s output: `KEY: value` lines, a blank line, the payload
/// as made (any bytes its maker chose: compared, never interpreted).
pub fn parse_unmunge(out: &str) -> Result<Unmunged, String> {
    let (meta, payload) = out
        .split_once("\n\n")
        .ok_or("unmunge printed no metadata")?;
    let (mut status, mut uid) = (None, None);
    for line in meta.lines() {
        match line.split_once(':') {
            Some(("STATUS", v)) => status = Some(v.trim().to_string()),
            Some(("UID", v)) => uid = code_in(v),
            _ => {}
        }
    }
    let status = status.ok_or("unmunge printed no STATUS")?;
    let status_code = code_in(&status).ok_or_else(|| format!("unmunge's STATUS {status:?}"))?;
    Ok(Unmunged {
        status_code,
        status,
        uid: uid.ok_or("unmunge printed no numeric UID")?,
        payload: payload.to_string(),
    })
}

/// Why a credential (on a node's reply, or on the controller's request) is refused. Each
/// `Display` is one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the reply carries no munge credential ({HEADER}): not the node's slurmwatch, or one too old to sign")]
    NoCredential,
    #[error("the {HEADER} header is not a munge credential")]
    NotACredential,
    #[error("munge refused the credential: {0}")]
    Invalid(String),
    #[error("the credential was made by uid {uid}, not {who}")]
    Untrusted { uid: u32, who: &'static str },
    #[error("the credential signs {got:?}, not this reply ({want:?})")]
    WrongPayload { got: String, want: String },
    #[error("cannot check the credential: {0}")]
    Unchecked(String),
}

/// Whose credentials are accepted: the uids, and how a refusal names them.
#[derive(Debug, Clone, Copy)]
pub struct Trusted<'a> {
    pub uids: &'a [u32],
    pub who: &'static str,
}

/// A node's reply: root only (the node's endpoint runs as root).
pub const ROOT_ONLY: Trusted<'static> = Trusted {
    uids: &[TRUSTED_UID],
    who: "root: not the node's root-run endpoint",
};

/// The verdict on what `unmunge` said of a credential whose payload must be `want` and whose
/// maker one of `trusted`.
pub fn judge(f: &Finished, want: &str, trusted: Trusted) -> Result<(), Refusal> {
    let u = match parse_unmunge(&f.stdout) {
        Ok(u) => u,
        // A credential munge cannot read at all (bad armor, wrong key): no metadata.
        Err(_) if !f.success => return Err(Refusal::Invalid(f.reason())),
        Err(e) => return Err(Refusal::Unchecked(e)),
    };
    if u.status_code != 0 || !f.success {
        return Err(Refusal::Invalid(u.status));
    }
    if !trusted.uids.contains(&u.uid) {
        return Err(Refusal::Untrusted {
            uid: u.uid,
            who: trusted.who,
        });
    }
    if u.payload != want {
        return Err(Refusal::WrongPayload {
            got: u.payload.chars().take(160).collect(),
            want: want.to_string(),
        });
    }
    Ok(())
}

/// Checks a credential (`None`: the header was absent) with `program` (`unmunge`).
pub fn check(
    program: &str,
    credential: Option<&str>,
    want: &str,
    trusted: Trusted,
    timeout: Duration,
) -> Result<(), Refusal> {
    let cred = credential.ok_or(Refusal::NoCredential)?;
    if !is_credential(cred) {
        return Err(Refusal::NotACredential);
    }
    let f = command::run_with_input(program, &["-k", "status,uid"], cred.as_bytes(), timeout)
        .map_err(|e| Refusal::Unchecked(e.to_string()))?;
    judge(&f, want, trusted)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONCE: &str = "00112233445566778899aabbccddeeff";
    /// The payload in the fixtures: job 42 on n1, nonce [`NONCE`], body `foo`.
    const FOO_PAYLOAD: &str = "slurmwatch-summary v2 job=42 node=n1 \
nonce=00112233445566778899aabbccddeeff \
sha256=2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";

    fn out(stdout: &str, code: i32, stderr: &str) -> Finished {
        Finished {
            success: code == 0,
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    const ROOT: &str = include_str!("../../tests/fixtures/slurm/munge/unmunge_root.txt");

    #[test]
    fn the_payload_binds_job_node_nonce_and_body() {
        assert_eq!(summary_payload(42, "n1", NONCE, b"foo"), FOO_PAYLOAD);
        assert_ne!(summary_payload(43, "n1", NONCE, b"foo"), FOO_PAYLOAD);
        assert_ne!(summary_payload(42, "n2", NONCE, b"foo"), FOO_PAYLOAD);
        assert_ne!(summary_payload(42, "n1", NONCE, b"fooo"), FOO_PAYLOAD);
        let other = "ffeeddccbbaa99887766554433221100";
        assert_ne!(summary_payload(42, "n1", other, b"foo"), FOO_PAYLOAD);
    }

    #[test]
    fn nonces_are_fresh_hex() {
        let (a, b) = (new_nonce().unwrap(), new_nonce().unwrap());
        assert!(is_nonce(&a) && is_nonce(&b), "{a} {b}");
        assert_ne!(a, b);
        for bad in [
            "",
            "0011",
            &NONCE.to_uppercase(),
            &format!("{NONCE}0"),
            "0011223344556677889g",
        ] {
            assert!(!is_nonce(bad), "{bad}");
        }
    }

    /// Real `unmunge -k status,uid` output (munge 0.5.15), captured on the test cluster.
    #[test]
    fn unmunge_output_is_parsed() {
        let u = parse_unmunge(ROOT).unwrap();
        assert_eq!(
            u,
            Unmunged {
                status_code: 0,
                status: "Success (0)".into(),
                uid: 0,
                payload: FOO_PAYLOAD.into()
            }
        );
        let user = parse_unmunge(include_str!(
            "../../tests/fixtures/slurm/munge/unmunge_user.txt"
        ))
        .unwrap();
        assert_eq!((user.status_code, user.uid), (0, 1001));
        assert!(parse_unmunge("").is_err());
        assert!(parse_unmunge("UID: root (0)\n\nx").is_err());
        assert!(parse_unmunge("STATUS: Success (0)\nUID: root\n\nx").is_err());
    }

    #[test]
    fn only_a_valid_root_credential_over_this_reply_is_accepted() {
        assert_eq!(judge(&out(ROOT, 0, ""), FOO_PAYLOAD, ROOT_ONLY), Ok(()));
        let other = summary_payload(42, "n2", NONCE, b"foo");
        assert!(matches!(
            judge(&out(ROOT, 0, ""), &other, ROOT_ONLY),
            Err(Refusal::WrongPayload { .. })
        ));
        let user = include_str!("../../tests/fixtures/slurm/munge/unmunge_user.txt");
        assert!(matches!(
            judge(&out(user, 0, ""), FOO_PAYLOAD, ROOT_ONLY),
            Err(Refusal::Untrusted { uid: 1001, .. })
        ));
        let slurm_user = Trusted {
            uids: &[0, 1001],
            who: "test",
        };
        let users_payload = parse_unmunge(user).unwrap().payload;
        assert_eq!(judge(&out(user, 0, ""), &users_payload, slurm_user), Ok(()));
        let replayed = include_str!("../../tests/fixtures/slurm/munge/unmunge_replayed.txt");
        assert_eq!(
            judge(&out(replayed, 17, ""), FOO_PAYLOAD, ROOT_ONLY),
            Err(Refusal::Invalid("Replayed credential (17)".into()))
        );
        let expired = include_str!("../../tests/fixtures/slurm/munge/unmunge_expired.txt");
        assert_eq!(
            judge(&out(expired, 15, ""), FOO_PAYLOAD, ROOT_ONLY),
            Err(Refusal::Invalid("Expired credential (15)".into()))
        );
        // A success status with a failing exit is not trusted either.
        assert!(matches!(
            judge(&out(ROOT, 1, ""), FOO_PAYLOAD, ROOT_ONLY),
            Err(Refusal::Invalid(_))
        ));
        let garbage = include_str!("../../tests/fixtures/slurm/munge/unmunge_garbage.stderr");
        assert_eq!(
            judge(&out("", 8, garbage), FOO_PAYLOAD, ROOT_ONLY),
            Err(Refusal::Invalid(
                "unmunge: Error: Failed to base64-decode credential".into()
            ))
        );
        for r in [
            Refusal::NoCredential,
            Refusal::Untrusted {
                uid: 1001,
                who: ROOT_ONLY.who,
            },
            Refusal::Invalid("Replayed credential (17)".into()),
        ] {
            let s = r.to_string();
            assert!(!s.contains('\n') && s.len() < 200, "{s}");
        }
    }

    #[test]
    fn header_values_are_checked_before_use() {
        assert!(is_credential("MUNGE:AwQFAACpRHom4dd+/=:"));
        for bad in [
            "",
            "MUNGE:",
            "MUNGE:abc",
            "munge:abc:",
            "MUNGE:a b:",
            "MUNGE:a\r\nX: y:",
        ] {
            assert!(!is_credential(bad), "{bad:?}");
        }
        assert!(!is_credential(&format!(
            "MUNGE:{}:",
            "A".repeat(MAX_CREDENTIAL_BYTES)
        )));
        assert_eq!(
            check("unmunge", None, FOO_PAYLOAD, ROOT_ONLY, TIMEOUT),
            Err(Refusal::NoCredential)
        );
        assert_eq!(
            check("unmunge", Some("bogus"), FOO_PAYLOAD, ROOT_ONLY, TIMEOUT),
            Err(Refusal::NotACredential)
        );
    }
}
