//! The shim loaded into a real program (CPython, which calls libc's `connect`, `read` and
//! `recv` as Slurm's clients do), against the kernel's own socket state: `TCP_NODELAY` on the
//! connected socket, and the socket out of delayed-ACK ("pingpong") mode after a read, where
//! an exchange of small messages puts it without the shim. Both are asserted without the shim
//! too, so the test fails if the kernel or the probe stops showing the difference.

use std::path::PathBuf;
use std::process::Command;

/// Ten request/answer exchanges put the client socket in pingpong mode (the kernel counts
/// replies sent soon after data arrived); `TCP_QUICKACK` reads 1 outside that mode.
const PROBE: &str = r#"
import os, socket
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname()); s, _ = srv.accept()
nodelay = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
def after(read):
    for _ in range(10):
        c.send(b"q"); s.recv(1); s.send(b"a"); read()
    return c.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK)
by_read = after(lambda: os.read(c.fileno(), 1))
by_recv = after(lambda: c.recv(1))
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.connect(("127.0.0.1", 9))
print(nodelay, by_read, by_recv, open("/proc/self/comm").read().strip() != "")
"#;

fn shim() -> PathBuf {
    // target/<profile>/deps/shim-… → target/<profile>/examples/ (Cargo.toml says why)
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let p = dir.join("libquickack_under_test.so");
    assert!(p.is_file(), "{} not built", p.display());
    p
}

fn probe(preload: Option<&PathBuf>) -> String {
    let mut cmd = Command::new("python3");
    cmd.args(["-c", PROBE]).env_remove("LD_PRELOAD");
    if let Some(p) = preload {
        cmd.env("LD_PRELOAD", p);
    }
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn connected_tcp_sockets_get_nodelay_and_acknowledge_at_once() {
    // nodelay, quick-ACK after os.read, after socket.recv, the program otherwise unchanged
    // (a UDP connect and a file read work as before).
    assert_eq!(probe(None), "0 0 0 True", "the kernel's defaults");
    assert_eq!(probe(Some(&shim())), "1 1 1 True", "with the shim");
}
