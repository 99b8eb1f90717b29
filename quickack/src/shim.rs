// The interposed calls; lib.rs says what and why.

use std::ffi::{c_int, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use libc::{size_t, sockaddr, socklen_t, ssize_t};

/// Descriptors below this are remembered as connected TCP sockets in a bitmap; one above it
/// (rare in a command-line client) gets the `setsockopt` on every read, which fails harmlessly
/// where it is not TCP.
const TRACKED_FDS: usize = 4096;
static TCP_FDS: [AtomicU64; TRACKED_FDS / 64] = [const { AtomicU64::new(0) }; TRACKED_FDS / 64];

static REAL_CONNECT: AtomicPtr<c_void> = AtomicPtr::new(null_mut());
static REAL_READ: AtomicPtr<c_void> = AtomicPtr::new(null_mut());
static REAL_RECV: AtomicPtr<c_void> = AtomicPtr::new(null_mut());

/// The next definition of `name` after this library (libc's), looked up once.
fn real(slot: &AtomicPtr<c_void>, name: &CStr) -> *mut c_void {
    let p = slot.load(Ordering::Relaxed);
    if !p.is_null() {
        return p;
    }
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name only reads the name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    slot.store(p, Ordering::Relaxed);
    p
}

/// Sets a TCP option to 1, keeping `errno`: true when the socket took it (it is TCP).
fn set_tcp_option(fd: c_int, option: c_int) -> bool {
    let one: c_int = 1;
    // SAFETY: errno is this thread's; setsockopt reads `one` for the length given.
    unsafe {
        let errno = *libc::__errno_location();
        let ok = libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            option,
            (&one as *const c_int).cast(),
            std::mem::size_of::<c_int>() as socklen_t,
        ) == 0;
        *libc::__errno_location() = errno;
        ok
    }
}

fn mark_tcp(fd: c_int) {
    if let Ok(i) = usize::try_from(fd) {
        if i < TRACKED_FDS {
            TCP_FDS[i / 64].fetch_or(1 << (i % 64), Ordering::Relaxed);
        }
    }
}

fn maybe_tcp(fd: c_int) -> bool {
    match usize::try_from(fd) {
        Ok(i) if i < TRACKED_FDS => TCP_FDS[i / 64].load(Ordering::Relaxed) & (1 << (i % 64)) != 0,
        Ok(_) => true,
        Err(_) => false,
    }
}

fn before_read(fd: c_int) {
    if maybe_tcp(fd) {
        set_tcp_option(fd, libc::TCP_QUICKACK);
    }
}

/// Fails as libc would with no such function (never expected: libc defines all three).
fn missing() -> c_int {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

/// # Safety
/// As `connect(2)`: `addr` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let p = real(&REAL_CONNECT, c"connect");
    if p.is_null() {
        return missing();
    }
    // SAFETY: p is libc's connect.
    let f: unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int =
        unsafe { std::mem::transmute(p) };
    let family = if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        None
    } else {
        // SAFETY: addr holds at least the family, which every sockaddr starts with.
        Some(c_int::from(unsafe { (*addr).sa_family }))
    };
    // Only TCP takes TCP_NODELAY: a UDP socket refuses it and is not marked.
    if matches!(family, Some(libc::AF_INET | libc::AF_INET6))
        && set_tcp_option(fd, libc::TCP_NODELAY)
    {
        mark_tcp(fd);
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f(fd, addr, len) }
}

/// # Safety
/// As `read(2)`: `buf` has room for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let p = real(&REAL_READ, c"read");
    if p.is_null() {
        return missing() as ssize_t;
    }
    // SAFETY: p is libc's read.
    let f: unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t =
        unsafe { std::mem::transmute(p) };
    before_read(fd);
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f(fd, buf, count) }
}

/// # Safety
/// As `recv(2)`: `buf` has room for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    let p = real(&REAL_RECV, c"recv");
    if p.is_null() {
        return missing() as ssize_t;
    }
    // SAFETY: p is libc's recv.
    let f: unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t =
        unsafe { std::mem::transmute(p) };
    before_read(fd);
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { f(fd, buf, len, flags) }
}
