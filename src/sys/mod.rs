//! The only home of `unsafe` in sweetspot: the few system calls no safe crate covers here, each
//! block with why it is sound, -1 turned into `io::Error::last_os_error()`. Processes ([`fork`],
//! [`join_cgroup_before_exec`]), a counter forked workers share ([`SharedCounter`]), waits with
//! precise timeouts ([`poll`], [`epoll_wait_precise`], [`watched_idle_timer`]), a static file opened
//! beneath the root ([`open_beneath`]), the load engine's per-thread resources
//! ([`thread_cpu_seconds`], [`pin_current_thread`], [`set_thread_nice`], [`raise_fd_limit`]),
//! a TUN device for the network path ([`open_tun`]), io_uring ([`uring`]) and the server's
//! prompt stop ([`stop`]).

pub mod stop;
pub mod uring;

use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

pub use nix::unistd::ForkResult;

/// Forks the calling process.
///
/// The caller must be single-threaded at the time of the call (the forking and preforked
/// servers fork from their main thread before starting any other thread), so the child does
/// not inherit locks held by threads that do not exist in it.
///
/// Every child sweetspot forks is a worker of the server that forked it, so it dies with it:
/// the child asks for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`), then checks the parent
/// did not die before that request took effect. Without it, killing only the parent (SIGKILL,
/// nothing to clean up) leaves orphan workers serving the port, and a restart finds the address
/// in use. The signal is tied to the thread that forked; sweetspot forks from the main thread,
/// which lives as long as the server.
pub fn fork() -> io::Result<ForkResult> {
    let parent = nix::unistd::getpid();
    // SAFETY: sweetspot forks only from single-threaded processes (see above), and the child
    // either serves with its own fresh state and leaves through `_exit`, or runs the same
    // single-threaded accept loop; no lock can be held by another thread at the fork.
    let forked = unsafe { nix::unistd::fork() }.map_err(io::Error::from)?;
    if let ForkResult::Child = forked {
        let asked = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
        if asked.is_err() || nix::unistd::getppid() != parent {
            exit_child(1);
        }
    }
    Ok(forked)
}

/// Ends a forked child at once: no destructors, no atexit handlers, no flushing of stdio
/// buffers inherited from the parent (which would print the parent's output twice).
pub fn exit_child(code: i32) -> ! {
    // SAFETY: _exit(2) is async-signal-safe and takes no pointers; it never returns.
    unsafe { libc::_exit(code) }
}

/// A `u64` counter that forked children share with their parent.
pub struct SharedCounter {
    ptr: NonNull<AtomicU64>,
}

// SAFETY: the pointee is an `AtomicU64`, which is `Sync`; the mapping lives as long as `self`.
unsafe impl Send for SharedCounter {}
// SAFETY: as above: every access goes through atomic operations.
unsafe impl Sync for SharedCounter {}

impl SharedCounter {
    /// Maps one page of anonymous shared memory holding a zeroed counter.
    pub fn new() -> io::Result<SharedCounter> {
        let len = NonZeroUsize::new(std::mem::size_of::<AtomicU64>()).expect("non-zero size");
        // SAFETY: an anonymous mapping with no address hint aliases nothing; the kernel
        // zero-fills it, and a zeroed AtomicU64 is a valid 0. The page is page-aligned, so
        // the AtomicU64 is aligned.
        let ptr = unsafe {
            nix::sys::mman::mmap_anonymous(
                None,
                len,
                nix::sys::mman::ProtFlags::PROT_READ | nix::sys::mman::ProtFlags::PROT_WRITE,
                nix::sys::mman::MapFlags::MAP_SHARED,
            )
        }
        .map_err(io::Error::from)?;
        Ok(SharedCounter { ptr: ptr.cast() })
    }

    fn atomic(&self) -> &AtomicU64 {
        // SAFETY: `ptr` points to a live, aligned, initialised AtomicU64 mapping owned by self.
        unsafe { self.ptr.as_ref() }
    }

    /// Adds `n` and returns nothing; visible to every process sharing the mapping.
    pub fn add(&self, n: u64) {
        self.atomic().fetch_add(n, Ordering::Relaxed);
    }

    /// Adds `n` and returns the value before: a number no other process sharing the
    /// mapping is handed.
    pub fn fetch_add(&self, n: u64) -> u64 {
        self.atomic().fetch_add(n, Ordering::Relaxed)
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.atomic().load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for SharedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SharedCounter").field(&self.get()).finish()
    }
}

impl Drop for SharedCounter {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by `new` with this length and is not used after drop.
        let _ =
            unsafe { nix::sys::mman::munmap(self.ptr.cast(), std::mem::size_of::<AtomicU64>()) };
    }
}

/// A wait's timeout as the kernel takes it, to the nanosecond: a timer of an event loop
/// stands for an I/O completion, which has no millisecond tick.
fn timespec(timeout: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    }
}

/// Waits on `fds` for up to `timeout` (`None`: forever), to the nanosecond (ppoll(2)), and
/// returns how many have events. An interrupted call returns `Ok(0)` so callers re-check their
/// shutdown flag. A plain `pollfd` array, because the poll architecture rebuilds it on every
/// call (as the study's server does), which nix's borrow-checked `PollFd` cannot hold.
pub fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(timespec);
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a valid, exclusively borrowed slice of `pollfd` for the whole call and
    // its length is passed alongside; ppoll(2) writes only the `revents` fields within it.
    // `ts_ptr` is null or points at `ts`, alive until the call returns; no signal mask.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    ready_count(n)
}

/// Waits on the epoll instance `epoll` for up to `timeout`, to the nanosecond (epoll_pwait2(2),
/// Linux 5.11; before it, epoll_wait(2) with the timeout rounded up to a millisecond, so a
/// timer is never early), filling `events` from the front; returns how many are ready. An
/// interrupted call returns `Ok(0)`. Here, not in nix, whose waits are in milliseconds: a
/// loop's timers would be rounded to ticks.
pub fn epoll_wait_precise(
    epoll: BorrowedFd<'_>,
    events: &mut [nix::sys::epoll::EpollEvent],
    timeout: Duration,
) -> io::Result<usize> {
    static NO_PWAIT2: AtomicBool = AtomicBool::new(false);
    let max = events.len().min(i32::MAX as usize) as libc::c_int;
    // `EpollEvent` is `#[repr(transparent)]` over `libc::epoll_event`.
    let buffer = events.as_mut_ptr().cast::<libc::epoll_event>();
    let n = if NO_PWAIT2.load(Ordering::Relaxed) {
        -1
    } else {
        let ts = timespec(timeout);
        // SAFETY: `epoll` is an open epoll descriptor for the whole call; `buffer` points at
        // `max` exclusively borrowed, layout-compatible `epoll_event`s the kernel may fill;
        // `ts` lives until the call returns; a null signal mask leaves the mask alone.
        unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                epoll.as_raw_fd(),
                buffer,
                max,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            ) as libc::c_int
        }
    };
    let n = if n < 0 && (NO_PWAIT2.load(Ordering::Relaxed) || last_errno() == libc::ENOSYS) {
        NO_PWAIT2.store(true, Ordering::Relaxed);
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: as above, without the timespec.
        unsafe { libc::epoll_wait(epoll.as_raw_fd(), buffer, max, ms) }
    } else {
        n
    };
    ready_count(n)
}

/// A wait's result: how many are ready, an interruption as none (callers re-check their stop
/// flag), or the error.
fn ready_count(n: libc::c_int) -> io::Result<usize> {
    if n < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(err);
    }
    Ok(n as usize)
}

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Opens `path` (relative, no `..`) for reading beneath the directory `dir`, resolving it in
/// one system call that refuses to leave `dir` (openat2(2) with `RESOLVE_BENEATH`, Linux 5.6:
/// a symlink or component that escapes fails with `EXDEV`, an absolute symlink too). `ENOSYS`
/// on an older kernel: the caller resolves another way.
pub fn open_beneath(dir: BorrowedFd<'_>, path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `open_how` is a plain C struct of integers, all-zero valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: `dir` is an open descriptor for the call; `path` is a NUL-terminated string and
    // `how` an initialized `open_how` of the size passed, both alive until the call returns.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor, open and owned by no one else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd as libc::c_int) })
}

/// A timerfd, owned, for tokio's reactor to watch.
pub struct TimerHandle(pub nix::sys::timerfd::TimerFd);

impl AsRawFd for TimerHandle {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsFd;
        self.0.as_fd().as_raw_fd()
    }
}

/// A non-blocking timerfd, not yet armed, watched by the current tokio runtime's reactor
/// (whose registration of a raw descriptor is `unsafe`): the async architecture's one timer
/// for all its waits, at the event loops' precision. Must be called inside a runtime.
pub fn watched_idle_timer() -> io::Result<tokio::io::unix::AsyncFd<TimerHandle>> {
    use nix::sys::timerfd::{ClockId, TimerFd, TimerFlags};
    let fd = TimerFd::new(
        ClockId::CLOCK_MONOTONIC,
        TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
    )?;
    // SAFETY: `TimerHandle` owns the open timerfd; `as_raw_fd` returns that descriptor for
    // as long as the handle lives, and nothing closes or replaces it while the `AsyncFd`
    // owns the handle (it is closed when the `AsyncFd` drops it).
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(
            TimerHandle(fd),
            tokio::io::Interest::READABLE,
        )
    }
    .map_err(|e| e.into_parts().1)
}

/// Whole seconds since the Unix epoch from the coarse realtime clock: the time of the last
/// tick (a few ms old), read without touching the hardware clock; what a once-a-second
/// value such as the `Date` header needs.
pub fn coarse_unix_seconds() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    match clock_gettime(ClockId::CLOCK_REALTIME_COARSE) {
        Ok(t) => t.tv_sec().max(0) as u64,
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

/// CPU time (user, system) in seconds used by this process plus its reaped children.
pub fn cpu_times() -> (f64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    let mut user = 0.0;
    let mut system = 0.0;
    for who in [UsageWho::RUSAGE_SELF, UsageWho::RUSAGE_CHILDREN] {
        if let Ok(u) = getrusage(who) {
            user += tv(u.user_time());
            system += tv(u.system_time());
        }
    }
    (user, system)
}

/// Makes `command`'s child write `0` to `procs_file` (a cgroup's `cgroup.procs`) after the fork
/// and before the exec, which moves it into that cgroup; the spawn fails if the write does.
pub fn join_cgroup_before_exec(
    command: &mut std::process::Command,
    procs_file: &std::path::Path,
) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let path = std::ffi::CString::new(procs_file.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a cgroup path"))?;
    let hook = move || -> io::Result<()> {
        // SAFETY: runs in the forked child before exec, where only async-signal-safe calls
        // are allowed: open, write and close are, `path` was allocated before the fork and is
        // only read, and `io::Error::last_os_error` only reads errno (no allocation).
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let written = libc::write(fd, b"0".as_ptr().cast(), 1);
            let error = io::Error::last_os_error();
            libc::close(fd);
            if written != 1 {
                return Err(error);
            }
        }
        Ok(())
    };
    // SAFETY: the hook above is async-signal-safe (see inside), as `pre_exec` requires.
    unsafe {
        command.pre_exec(hook);
    }
    Ok(())
}

/// Makes `command`'s child die with this process: after the fork it asks for SIGKILL on its
/// parent's death (`PR_SET_PDEATHSIG`, kept across exec), then exits if the parent already died
/// between the fork and that request (its parent is then no longer this process). The signal
/// follows the thread that spawned: spawn from a thread that lives as long as the child.
pub fn die_with_parent_before_exec(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = nix::unistd::getpid();
    let hook = move || -> io::Result<()> {
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
            .map_err(io::Error::from)?;
        if nix::unistd::getppid() != parent {
            exit_child(1);
        }
        Ok(())
    };
    // SAFETY: prctl(2), getppid(2) and _exit(2) are async-signal-safe, as `pre_exec` requires;
    // the hook allocates nothing (`parent` is a copied integer).
    unsafe {
        command.pre_exec(hook);
    }
}

/// Makes `command`'s child the leader of a new session (setsid(2)) before it execs: no signal
/// for this process's group or terminal reaches it.
pub fn new_session_before_exec(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let hook = || -> io::Result<()> { nix::unistd::setsid().map(drop).map_err(io::Error::from) };
    // SAFETY: setsid(2) is async-signal-safe and the hook allocates nothing.
    unsafe {
        command.pre_exec(hook);
    }
}

/// Makes the Layer 3 TUN device `name` (IFF_TUN, no packet-information prefix) and returns its
/// descriptor, non-blocking: what is read is an IP packet the kernel routed to it, what is
/// written is a packet the kernel receives from it. Not persistent: the device vanishes with
/// the descriptor, so a killed run leaves none behind. Here rather than from a TUN crate: one
/// ioctl, where those crates bring their own layer of addresses and routes (`ip` sets those).
pub fn open_tun(name: &str) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::OwnedFd;
    use std::os::unix::fs::OpenOptionsExt;
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a device name of 1 to 15 bytes",
        ));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    // SAFETY: `ifreq` is plain old data, valid zeroed; the name is copied within its
    // IFNAMSIZ bytes (checked above, so a NUL stays at the end).
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(name.bytes()) {
        *slot = byte as libc::c_char;
    }
    request.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `ifreq`, which lives on this stack for the call;
    // the descriptor is open (owned by `file`).
    let done = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut request) };
    if done < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(OwnedFd::from(file))
}

/// Clock ticks per second of the times in `/proc/PID/stat` (USER_HZ), 100 if unknown.
pub fn clock_ticks_per_second() -> f64 {
    use nix::unistd::{sysconf, SysconfVar};
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(ticks)) if ticks > 0 => ticks as f64,
        _ => 100.0,
    }
}

/// The CPUs this process may run on (its affinity mask), in order; empty if it cannot be read.
pub fn usable_cpus() -> Vec<usize> {
    match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Raises the soft limit on open files to the hard limit, so a server can hold thousands of
/// connections; returns the new soft limit.
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) => {
            if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Err(_) => 0,
    }
}

/// CPU time (user + system) of the calling thread, in seconds; 0 if it cannot be read.
pub fn thread_cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(usage) => {
            let seconds =
                |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            seconds(usage.user_time()) + seconds(usage.system_time())
        }
        Err(_) => 0.0,
    }
}

/// Seconds the calling thread has waited on a run queue for a CPU (the scheduler's
/// `schedstat`, second field); 0 where the kernel does not keep it.
pub fn thread_runqueue_wait_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Sets the calling thread's nice value (Linux keeps one a thread; threads it starts later
/// inherit it, threads and processes started before keep theirs). Lowering it below the
/// process's needs root (`CAP_SYS_NICE`): `PermissionDenied` otherwise.
pub fn set_thread_nice(nice: i32) -> io::Result<()> {
    let tid = nix::unistd::gettid().as_raw();
    // SAFETY: setpriority(2) takes plain integers and touches no memory of ours; PRIO_PROCESS
    // with a thread id names that one thread on Linux.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a thread of this process may set its nice value to `nice` (tried on a thread of
/// its own, which ends at once: no other thread's, nor a child's, changes).
pub fn may_set_thread_nice(nice: i32) -> bool {
    std::thread::spawn(move || set_thread_nice(nice).is_ok())
        .join()
        .unwrap_or(false)
}

/// Pins the calling thread to one CPU; a failure only loses the pinning.
pub fn pin_current_thread(cpu: usize) {
    pin_current_thread_to(&[cpu]);
}

/// Pins the calling thread to these CPUs; a failure only loses the pinning.
pub fn pin_current_thread_to(cpus: &[usize]) {
    use nix::sched::{sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    if cpus.iter().all(|cpu| set.set(*cpu).is_ok()) {
        let _ = sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nice field of /proc/thread-self/stat (the 19th; the name before it may hold spaces).
    fn own_nice() -> i32 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        after_name
            .split_whitespace()
            .nth(16)
            .unwrap()
            .parse()
            .unwrap()
    }

    #[test]
    fn a_threads_nice_value_is_its_own() {
        let before = own_nice();
        let (set, other) = std::thread::scope(|scope| {
            let set = scope.spawn(|| {
                set_thread_nice(before + 3).unwrap();
                own_nice()
            });
            let set = set.join().unwrap();
            (set, scope.spawn(own_nice).join().unwrap())
        });
        assert_eq!((set, other, own_nice()), (before + 3, before, before));
        // Lower than the process's only as root.
        let root = nix::unistd::geteuid().is_root();
        assert_eq!(may_set_thread_nice(before - 1), root);
        assert_eq!(own_nice(), before);
    }

    #[test]
    fn shared_counter_is_shared_with_a_forked_child() {
        let counter = SharedCounter::new().unwrap();
        counter.add(2);
        match fork().unwrap() {
            ForkResult::Child => {
                counter.add(40);
                exit_child(0);
            }
            ForkResult::Parent { child } => {
                nix::sys::wait::waitpid(child, None).unwrap();
            }
        }
        assert_eq!(counter.get(), 42);
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let before = thread_cpu_seconds();
        let mut x = 0u64;
        let until = std::time::Instant::now() + std::time::Duration::from_millis(50);
        while std::time::Instant::now() < until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let used = thread_cpu_seconds() - before;
        assert!(used > 0.0, "spun 50 ms, thread CPU time grew by {used}");
    }
}
