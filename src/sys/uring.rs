//! io_uring for the `uring` architecture and the load generator's ring engine: a safe face over
//! the io-uring crate. Pushing an operation is `unsafe` because the kernel uses the memory it
//! names until it completes; [`Ring`] makes that sound by owning every such piece of memory
//! (send buffers, timeouts, the provided-buffer ring, `msghdr`s) until the completion arrives.
//! Sockets may be registered in the ring's file table ([`Ring::fix`]) and named by slot
//! ([`Socket::Fixed`]).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::types::{BufRingEntry, CancelBuilder, Timespec};
use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// The buffer group id of the ring's provided buffers.
const BUFFER_GROUP: u16 = 0;
/// Most slots of the registered-file table (see [`Ring::fix`]).
const MAX_FIXED_FILES: u32 = 1 << 16;

/// A socket as an operation names it: its descriptor, or its slot in the ring's table of
/// registered files ([`Ring::fix`]), which spares the kernel a file lookup and reference
/// count per operation.
#[derive(Debug, Clone, Copy)]
pub enum Socket<'a> {
    Fd(BorrowedFd<'a>),
    Fixed(u32),
}

/// One completion, as the caller sees it.
#[derive(Debug)]
pub struct Completion {
    pub user_data: u64,
    /// The operation's result: a count, or a negated errno.
    pub result: i32,
    /// A multishot operation that stays armed (more completions will come).
    pub more: bool,
    /// A send's buffer, handed back.
    pub sent_buffer: Option<Vec<u8>>,
    /// A multishot accept's new connection.
    pub accepted: Option<TcpStream>,
    /// The completion filled a provided buffer, whose bytes went to the `on_data` callback.
    pub buffered: bool,
}

/// The control space of a timestamped receive: one `cmsghdr` (16 bytes) and a `timespec`.
const TIMESTAMP_CONTROL_BYTES: usize = 32;

/// Hashes a `user_data` with one multiplication: the keys are unique tags chosen by the
/// caller, not input an attacker picks, and SipHash on every send and completion shows up in
/// a profile of a server doing little else.
#[derive(Default)]
struct TagHasher(u64);

impl Hasher for TagHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        // The tag's high bits (kind, slot) and low bits (generation) both vary; fold them
        // so the table's index bits see every part.
        self.0 = (n ^ (n >> 32))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }
}

type TagMap<V> = HashMap<u64, V, BuildHasherDefault<TagHasher>>;

/// The registered ring of provided buffers receives are filled into.
struct ProvidedBuffers {
    entries: *mut BufRingEntry,
    entries_layout: Layout,
    memory: Vec<u8>,
    count: u16,
    size: usize,
    tail: u16,
}

impl ProvidedBuffers {
    fn tail(&self) -> &AtomicU16 {
        // SAFETY: `entries` points to `count` live, zeroed entries allocated in `Ring::new`
        // and freed only in `Drop`; the tail field lives inside the first entry, is u16
        // aligned, and the kernel only reads it, so an atomic view of it is sound.
        unsafe { AtomicU16::from_ptr(BufRingEntry::tail(self.entries) as *mut u16) }
    }

    /// Hands buffer `bid` (back) to the kernel, once [`publish`](Self::publish)ed.
    fn provide(&mut self, bid: u16) {
        let index = (self.tail & (self.count - 1)) as usize;
        // SAFETY: index < count, within the allocation; the kernel does not read an entry at
        // or past the published tail, so writing it before the release store of `publish`
        // races with nothing (and at most `count` buffers are ever out of the kernel's hands,
        // so an unpublished entry never laps one the kernel may still read).
        let entry = unsafe { &mut *self.entries.add(index) };
        let offset = bid as usize * self.size;
        entry.set_addr(self.memory[offset..].as_ptr() as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Lets the kernel see the buffers provided since the last call.
    fn publish(&self) {
        self.tail().store(self.tail, Ordering::Release);
    }
}

/// An io_uring with its provided buffers and the memory of its operations in flight.
///
/// A send's buffer and a timeout's `Timespec` are kept here, keyed by the operation's
/// `user_data`, until their completion arrives (a send's buffer is then handed back); the
/// caller encodes what an operation is for in its `user_data`, which must be unique among the
/// operations in flight that own memory (sends, timeouts). The provided-buffer ring that
/// multishot receives fill is allocated, registered and recycled here, and its bytes reach the
/// caller only as a borrowed slice inside [`Ring::reap`], after which the buffer goes back to
/// the kernel. An accepted descriptor becomes an owned `TcpStream` here, once. On drop every
/// operation still in flight is cancelled and waited for (bounded); memory the kernel might
/// still touch after that is leaked rather than freed.
///
/// A ring receives either with `recv` ([`Ring::recv_multi`], the server's) or with `recvmsg`
/// ([`Ring::recvmsg_multi`], the load generator's), whose completions also carry the socket's
/// kernel receive timestamp (`SO_TIMESTAMPNS`): when the bytes reached the socket, whenever the
/// caller gets to them. The table of registered files holds a reference of its own, so a slot
/// must be emptied ([`Ring::unfix`]) when its socket is closed.
pub struct Ring {
    ring: IoUring,
    buffers: ProvidedBuffers,
    sends: TagMap<Vec<u8>>,
    timespecs: TagMap<Box<Timespec>>,
    /// The `user_data` of the multishot accepts armed (one or two: a short list).
    accepts: Vec<u64>,
    /// Operations pushed and not yet finally completed.
    in_flight: usize,
    /// Slots in the registered-file table (0: none could be registered).
    fixed_files: u32,
    /// Set once the ring receives with `recvmsg`: the header every such receive names.
    recv_header: Option<Box<libc::msghdr>>,
}

/// Sets up the ring with the cheapest task-work mode the kernel has, falling back a step at
/// a time. Completions of socket operations are "task work" the kernel must run in this
/// thread: by default it interrupts the thread for that (a signal-like notification on every
/// completion); `COOP_TASKRUN` (5.19) drops the interruption and runs it at the next kernel
/// entry; `DEFER_TASKRUN` with `SINGLE_ISSUER` (6.1) keeps it queued until the thread asks for
/// completions, then runs the whole batch at once. `SUBMIT_ALL` (5.18) keeps submitting a
/// batch past an entry that fails at submission. A ring created with `DEFER_TASKRUN` must
/// only be entered by the thread that created it, which holds here: each ring lives and dies
/// on its own thread.
fn build(entries: u32) -> io::Result<IoUring> {
    // A completion queue 16 times the submission queue: multishot operations post many
    // completions per submission, and one that overflows ends (it is re-armed).
    let cq = entries * 16;
    IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_submit_all()
        .setup_cqsize(cq)
        .build(entries)
        .or_else(|_| {
            IoUring::builder()
                .setup_coop_taskrun()
                .setup_submit_all()
                .setup_cqsize(cq)
                .build(entries)
        })
        .or_else(|_| IoUring::builder().setup_cqsize(cq).build(entries))
}

impl Ring {
    /// A ring of `entries` submission slots with `buffers` provided buffers of `size` bytes
    /// (`buffers` a power of two). Fails where io_uring is unavailable: old kernel,
    /// `kernel.io_uring_disabled`, a seccomp profile, or too little lockable memory.
    pub fn new(entries: u32, buffers: u16, size: usize) -> io::Result<Ring> {
        assert!(buffers.is_power_of_two());
        let ring = build(entries)?;
        let entries_layout =
            Layout::from_size_align(buffers as usize * std::mem::size_of::<BufRingEntry>(), 4096)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout has a non-zero size (buffers >= 1).
        let entries = unsafe { alloc_zeroed(entries_layout) } as *mut BufRingEntry;
        if entries.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        let mut provided = ProvidedBuffers {
            entries,
            entries_layout,
            // Filled (not zeroed, which the allocator may leave untouched) so every page is
            // resident from the start: the kernel cycles through all the buffers, and the
            // server's memory should not appear to grow as it does.
            memory: vec![0xa5; buffers as usize * size],
            count: buffers,
            size,
            tail: 0,
        };
        // SAFETY: the entry array is page aligned, `buffers` entries long, and outlives the
        // registration: `Drop` unregisters (or leaks it) before freeing.
        let registered = unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, buffers, BUFFER_GROUP, 0)
        };
        if let Err(e) = registered {
            // SAFETY: allocated above with this layout, never registered.
            unsafe { dealloc(entries as *mut u8, entries_layout) };
            provided.entries = std::ptr::null_mut();
            return Err(e);
        }
        for bid in 0..buffers {
            provided.provide(bid);
        }
        provided.publish();
        // An empty table of registered files, as large as the descriptor limit allows (the
        // kernel refuses more). Without one (before 5.19) every socket is named by its fd.
        let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(0, |(soft, _)| soft);
        let fixed_files = limit.min(MAX_FIXED_FILES as u64) as u32;
        let fixed_files = match ring.submitter().register_files_sparse(fixed_files) {
            Ok(()) if fixed_files > 0 => fixed_files,
            _ => 0,
        };
        Ok(Ring {
            ring,
            buffers: provided,
            sends: TagMap::default(),
            timespecs: TagMap::default(),
            accepts: Vec::new(),
            in_flight: 0,
            fixed_files,
            recv_header: None,
        })
    }

    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        // SAFETY (for every caller): the memory `entry` names is owned by `self` (send
        // buffers, timespecs, provided buffers) until its final completion, or is none.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.ring.submit()?;
        }
        self.in_flight += 1;
        Ok(())
    }

    /// Arms a multishot accept on `listener`; each new connection completes with `accepted`.
    pub fn accept_multi(&mut self, listener: BorrowedFd<'_>, user_data: u64) -> io::Result<()> {
        if !self.accepts.contains(&user_data) {
            self.accepts.push(user_data);
        }
        let entry = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(user_data);
        self.push(entry)
    }

    /// Registers `socket` in slot `index` of the ring's file table, so operations can name it
    /// as [`Socket::Fixed`]`(index)`; false when there is no such slot or the kernel refused.
    /// The table holds its own reference to the socket: [`unfix`](Self::unfix) the slot
    /// before the socket is closed, or the connection outlives its descriptor.
    pub fn fix(&mut self, index: u32, socket: BorrowedFd<'_>) -> bool {
        index < self.fixed_files
            && self
                .ring
                .submitter()
                .register_files_update(index, &[socket.as_raw_fd()])
                .is_ok_and(|n| n == 1)
    }

    /// Empties slot `index` of the file table. Operations already under way keep their own
    /// reference; any still queued that name the slot fail with EBADF.
    pub fn unfix(&mut self, index: u32) -> io::Result<()> {
        self.ring
            .submitter()
            .register_files_update(index, &[-1])
            .map(drop)
    }

    /// Arms a multishot receive on `socket` into the provided buffers; the bytes reach the
    /// `on_data` callback of [`reap`](Self::reap).
    pub fn recv_multi(&mut self, socket: BorrowedFd<'_>, user_data: u64) -> io::Result<()> {
        let entry = opcode::RecvMulti::new(types::Fd(socket.as_raw_fd()), BUFFER_GROUP)
            .build()
            .user_data(user_data);
        self.push(entry)
    }

    /// Arms a multishot `recvmsg` on `socket` into the provided buffers: like
    /// [`recv_multi`](Self::recv_multi), and each receive also brings the socket's receive
    /// timestamp (the socket needs `SO_TIMESTAMPNS` on), which
    /// [`reap_stamped`](Self::reap_stamped) hands over with the bytes. A ring receives with
    /// `recvmsg` or with `recv`, not both.
    pub fn recvmsg_multi(&mut self, socket: Socket<'_>, user_data: u64) -> io::Result<()> {
        let header = self.recv_header.get_or_insert_with(|| {
            // SAFETY: msghdr is plain data (integers and raw pointers); all zeroes is the
            // empty header: no name, no data vector, no control buffer yet.
            let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
            // Only the lengths matter to a multishot recvmsg: the kernel lays the name, the
            // control messages and the bytes out in each provided buffer.
            header.msg_controllen = TIMESTAMP_CONTROL_BYTES as _;
            Box::new(header)
        });
        let header: *const libc::msghdr = &**header;
        let entry = match socket {
            Socket::Fd(fd) => {
                opcode::RecvMsgMulti::new(types::Fd(fd.as_raw_fd()), header, BUFFER_GROUP)
            }
            Socket::Fixed(index) => {
                opcode::RecvMsgMulti::new(types::Fixed(index), header, BUFFER_GROUP)
            }
        }
        .build()
        .user_data(user_data);
        self.push(entry)
    }

    /// Sends `buffer` on `socket`; the buffer comes back in the completion.
    pub fn send(&mut self, socket: Socket<'_>, buffer: Vec<u8>, user_data: u64) -> io::Result<()> {
        let len = buffer.len().min(u32::MAX as usize) as u32;
        // MSG_NOSIGNAL: a peer gone away is an error result, never a SIGPIPE.
        let entry = match socket {
            Socket::Fd(fd) => opcode::Send::new(types::Fd(fd.as_raw_fd()), buffer.as_ptr(), len),
            Socket::Fixed(index) => opcode::Send::new(types::Fixed(index), buffer.as_ptr(), len),
        }
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(user_data);
        // Moving the Vec does not move its heap bytes, which the entry points at.
        self.sends.insert(user_data, buffer);
        self.push(entry)
    }

    /// Waits for readiness of `fd` (`poll(2)` event bits), once.
    pub fn poll_once(&mut self, fd: RawFd, events: u32, user_data: u64) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fd(fd), events)
            .build()
            .user_data(user_data);
        self.push(entry)
    }

    /// Completes (with -ETIME) after `after`.
    pub fn timeout(&mut self, after: Duration, user_data: u64) -> io::Result<()> {
        let spec = Box::new(Timespec::from(after));
        let entry = opcode::Timeout::new(&*spec as *const Timespec)
            .build()
            .user_data(user_data);
        self.timespecs.insert(user_data, spec);
        self.push(entry)
    }

    /// Asks the kernel to cancel the operation tagged `target`; the request itself
    /// completes under `user_data`.
    pub fn cancel(&mut self, target: u64, user_data: u64) -> io::Result<()> {
        let entry = opcode::AsyncCancel::new(target)
            .build()
            .user_data(user_data);
        self.push(entry)
    }

    /// Submits everything pushed and waits up to `limit` until `want` completions are ready
    /// (fewer when the time runs out; a signal also ends the wait early).
    pub fn submit_and_wait_for(&mut self, want: usize, limit: Duration) -> io::Result<()> {
        let spec = Timespec::from(limit);
        let args = types::SubmitArgs::new().timespec(&spec);
        self.enter(want, &args)
    }

    /// Submits everything pushed and gathers completions: waits until `want` are ready, but
    /// once `gather` has passed returns with whatever is ready, and with none ready waits on up
    /// to `limit` for the first (a signal also ends the wait early). Kernels without
    /// `IORING_FEAT_MIN_TIMEOUT` (before 6.12) get the same from two waits: for one completion
    /// up to `limit`, then for `want` up to `gather` more.
    pub fn submit_and_gather(
        &mut self,
        want: usize,
        gather: Duration,
        limit: Duration,
    ) -> io::Result<()> {
        if !self.ring.params().is_feature_min_timeout() {
            self.submit_and_wait_for(1, limit)?;
            let ready = self.ready();
            if ready > 0 && ready < want {
                self.submit_and_wait_for(want, gather.min(limit))?;
            }
            return Ok(());
        }
        let spec = Timespec::from(limit);
        let gather_us = gather.min(limit).as_micros().clamp(1, u32::MAX as u128) as u32;
        let args = types::SubmitArgs::new()
            .timespec(&spec)
            .min_wait_usec(gather_us);
        self.enter(want, &args)
    }

    /// Submits and waits as `args` say; a wait that ran out of time or was interrupted is no
    /// error (the caller reaps what is there).
    fn enter(&mut self, want: usize, args: &types::SubmitArgs<'_, '_>) -> io::Result<()> {
        entered(self.ring.submitter().submit_with_args(want, args))
    }

    /// Operations pushed and not yet submitted.
    pub fn unsubmitted(&mut self) -> usize {
        self.ring.submission().len()
    }

    /// Completions waiting to be reaped.
    pub fn ready(&mut self) -> usize {
        self.ring.completion().len()
    }

    /// Submits everything pushed and posts the completions ready, without waiting for any: a
    /// deferred ring (`DEFER_TASKRUN`) posts them only for an enter that asks for events, here
    /// for none at least, so it returns at once.
    pub fn submit_and_take_ready(&mut self) -> io::Result<()> {
        let pending = self.unsubmitted() as u32;
        // SAFETY: no argument is passed (a null pointer of size 0, as `submit` passes), and
        // what is submitted was pushed by `push`, whose callers keep its memory alive until
        // the operation completes.
        entered(unsafe {
            self.ring.submitter().enter::<libc::sigset_t>(
                pending,
                0,
                io_uring::EnterFlags::GETEVENTS.bits(),
                None,
            )
        })
    }

    /// Submits everything pushed and waits for at least one completion.
    pub fn submit_and_wait(&mut self) -> io::Result<()> {
        entered(self.ring.submit_and_wait(1))
    }

    /// Moves the completions into `out`. The bytes of a receive are passed to `on_data`
    /// (with the receive's `user_data`) and their buffer goes straight back to the kernel.
    pub fn reap(&mut self, out: &mut Vec<Completion>, mut on_data: impl FnMut(u64, &[u8])) {
        self.reap_stamped(out, |user_data, bytes, _| on_data(user_data, bytes));
    }

    /// [`reap`](Self::reap), and a `recvmsg` receive's bytes come with the kernel's receive
    /// timestamp (since the Unix epoch, on the realtime clock), when the socket gave one.
    pub fn reap_stamped(
        &mut self,
        out: &mut Vec<Completion>,
        mut on_data: impl FnMut(u64, &[u8], Option<Duration>),
    ) {
        // Disjoint fields: the completion queue borrows the ring, the rest is read beside it.
        let Ring {
            ring,
            buffers,
            sends,
            timespecs,
            accepts,
            in_flight,
            recv_header,
            ..
        } = self;
        for cqe in ring.completion() {
            let user_data = cqe.user_data();
            let result = cqe.result();
            let flags = cqe.flags();
            let more = cqueue::more(flags);
            if !more {
                *in_flight = in_flight.saturating_sub(1);
            }
            let buffered = cqueue::buffer_select(flags);
            if let Some(bid) = buffered {
                let start = bid as usize * buffers.size;
                let len = (result.max(0) as usize).min(buffers.size);
                let filled = &buffers.memory[start..start + len];
                match recv_header.as_deref() {
                    None => on_data(user_data, filled, None),
                    Some(header) => match types::RecvMsgOut::parse(filled, header) {
                        Ok(message) => on_data(
                            user_data,
                            message.payload_data(),
                            receive_timestamp(message.control_data()),
                        ),
                        Err(()) => on_data(user_data, &[], None),
                    },
                }
                buffers.provide(bid);
            }
            let mut accepted = None;
            if accepts.contains(&user_data) {
                if result >= 0 {
                    // SAFETY: the kernel has just created this descriptor for us; nothing
                    // else in the process knows it, so it is owned here, once.
                    let fd = unsafe { OwnedFd::from_raw_fd(result) };
                    accepted = Some(TcpStream::from(fd));
                }
                if !more {
                    accepts.retain(|&a| a != user_data);
                }
            }
            let sent_buffer = if more {
                None
            } else {
                if !timespecs.is_empty() {
                    timespecs.remove(&user_data);
                }
                sends.remove(&user_data)
            };
            out.push(Completion {
                user_data,
                result,
                more,
                sent_buffer,
                accepted,
                buffered: buffered.is_some(),
            });
        }
        buffers.publish();
    }
}

/// An enter that ran out of its time (only one given a timeout), was interrupted by a signal
/// or found the completion queue full (`EBUSY`) is no error: the caller reaps what is there.
fn entered(result: io::Result<usize>) -> io::Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let _ = self
            .ring
            .submitter()
            .register_sync_cancel(None, CancelBuilder::any());
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        let mut done = Vec::new();
        while self.in_flight > 0 && std::time::Instant::now() < deadline {
            let _ = self.ring.submitter().submit_with_args(
                1,
                &types::SubmitArgs::new().timespec(&Timespec::new().nsec(10_000_000)),
            );
            done.clear();
            self.reap(&mut done, |_, _| {});
        }
        if self.in_flight > 0 {
            // The kernel may still write into these: never free them.
            std::mem::forget(std::mem::take(&mut self.buffers.memory));
            std::mem::forget(std::mem::take(&mut self.sends));
            std::mem::forget(std::mem::take(&mut self.timespecs));
            return;
        }
        let _ = self.ring.submitter().unregister_buf_ring(BUFFER_GROUP);
        if !self.buffers.entries.is_null() {
            // SAFETY: allocated in `new` with this layout and no longer registered (or the
            // ring is idle and about to be closed).
            unsafe { dealloc(self.buffers.entries as *mut u8, self.buffers.entries_layout) };
        }
    }
}

/// The `SCM_TIMESTAMPNS` message among a receive's control messages, as the time since the
/// Unix epoch. Control messages are read from the bytes, never cast in place: a `cmsghdr`
/// (length, level, type) then its data, each padded to 8 bytes.
fn receive_timestamp(control: &[u8]) -> Option<Duration> {
    const HEADER: usize = 16;
    let word = |at: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(
            control.get(at..at + 8)?.try_into().ok()?,
        ))
    };
    let int = |at: usize| -> Option<i32> {
        Some(i32::from_ne_bytes(
            control.get(at..at + 4)?.try_into().ok()?,
        ))
    };
    let mut at = 0;
    while at + HEADER <= control.len() {
        let len = word(at)? as usize;
        if len < HEADER {
            return None;
        }
        if int(at + 8)? == libc::SOL_SOCKET && int(at + 12)? == libc::SCM_TIMESTAMPNS {
            let seconds = word(at + HEADER)?;
            let nanos = word(at + HEADER + 8)?;
            return (nanos < 1_000_000_000).then(|| Duration::new(seconds, nanos as u32));
        }
        at += len.div_ceil(8) * 8;
    }
    None
}

/// Makes `command`'s child (and everything it starts) run under a seccomp filter that fails
/// `io_uring_setup` with EPERM, as Docker's default profile does, before the exec. It is how
/// the tests reach the real "io_uring is unavailable" path on a machine that has io_uring.
pub fn deny_io_uring_before_exec(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xC000_00B7;
    // io_uring_setup is 425 on every architecture with the unified syscall table.
    const IO_URING_SETUP: u32 = 425;
    const LD_W_ABS: u16 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS
    const JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    // seccomp_data: nr at offset 0, arch at offset 4.
    let filter = [
        op(LD_W_ABS, 0, 0, 4),
        op(JEQ_K, 0, 3, AUDIT_ARCH),
        op(LD_W_ABS, 0, 0, 0),
        op(JEQ_K, 0, 1, IO_URING_SETUP),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let hook = move || -> io::Result<()> {
        let program = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: runs in the forked child before exec, where only async-signal-safe calls
        // are allowed: prctl is a plain system call; `program` points at `filter`, which
        // lives in this closure for the whole call, and the kernel copies it.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &program as *const libc::sock_fprog,
                ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the hook above is async-signal-safe (see inside), as `pre_exec` requires.
    unsafe {
        command.pre_exec(hook);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{ErrorKind, Read};
    use std::net::TcpListener;
    use std::os::fd::AsFd;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    fn wait_for(ring: &mut Ring, user_data: u64) -> Completion {
        let mut done = Vec::new();
        for _ in 0..100 {
            ring.submit_and_wait().unwrap();
            ring.reap(&mut done, |_, _| {});
            if let Some(i) = done.iter().position(|c| c.user_data == user_data) {
                return done.swap_remove(i);
            }
        }
        panic!("no completion for {user_data}");
    }

    #[test]
    fn a_send_through_a_fixed_slot_arrives_and_hands_its_buffer_back() {
        let (mut client, server) = pair();
        let mut ring = Ring::new(8, 8, 64).unwrap();
        assert!(ring.fix(3, server.as_fd()));
        assert!(!ring.fix(MAX_FIXED_FILES, server.as_fd()), "past the table");
        ring.send(Socket::Fixed(3), b"via slot".to_vec(), 42)
            .unwrap();
        let c = wait_for(&mut ring, 42);
        assert_eq!(c.result, 8);
        assert_eq!(c.sent_buffer.as_deref(), Some(&b"via slot"[..]));
        let mut got = [0u8; 8];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"via slot");
    }

    #[test]
    fn a_fixed_socket_stays_open_past_its_descriptor_until_unfixed() {
        let (mut client, server) = pair();
        let mut ring = Ring::new(8, 8, 64).unwrap();
        assert!(ring.fix(0, server.as_fd()));
        drop(server);
        client
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut byte = [0u8; 1];
        let err = client
            .read(&mut byte)
            .expect_err("the table still holds the socket");
        assert!(
            matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{err}"
        );
        ring.unfix(0).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(client.read(&mut byte).unwrap(), 0, "closed once unfixed");
    }

    #[test]
    fn a_timestamped_receive_brings_the_bytes_and_when_they_arrived() {
        let (mut client, server) = pair();
        nix::sys::socket::setsockopt(
            &server,
            nix::sys::socket::sockopt::ReceiveTimestampns,
            &true,
        )
        .unwrap();
        let mut ring = Ring::new(8, 8, 256).unwrap();
        ring.recvmsg_multi(Socket::Fd(server.as_fd()), 7).unwrap();
        // The first socket to ask turns the kernel's timestamping on through a work queue, not
        // at once: until bytes come stamped, send more (a few milliseconds at most).
        let mut done = Vec::new();
        let mut stamped = false;
        for _ in 0..200 {
            std::io::Write::write_all(&mut client, b"w").unwrap();
            std::thread::sleep(Duration::from_millis(5));
            ring.submit_and_wait_for(1, Duration::from_millis(50))
                .unwrap();
            ring.reap_stamped(&mut done, |_, _, stamp| stamped |= stamp.is_some());
            if stamped {
                break;
            }
        }
        assert!(stamped, "SO_TIMESTAMPNS gives timestamps");
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        std::io::Write::write_all(&mut client, b"hello").unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let after = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let mut got = Vec::new();
        done.clear();
        for _ in 0..100 {
            ring.submit_and_wait_for(1, Duration::from_millis(50))
                .unwrap();
            ring.reap_stamped(&mut done, |tag, bytes, stamp| {
                got.push((tag, bytes.to_vec(), stamp))
            });
            if !got.is_empty() {
                break;
            }
        }
        assert_eq!(got.len(), 1, "{got:?}");
        let (tag, bytes, stamp) = &got[0];
        assert_eq!((*tag, bytes.as_slice()), (7, &b"hello"[..]));
        let stamp = stamp.expect("SO_TIMESTAMPNS gives a timestamp");
        // Stamped on arrival, before the 30 ms sleep ended, not when reaped after it.
        assert!(
            stamp >= before && stamp < after,
            "{before:?} <= {stamp:?} < {after:?}"
        );
        assert!(done[0].buffered && done[0].more);
        // The end of the stream: an empty receive that ends the multishot.
        drop(client);
        done.clear();
        got.clear();
        for _ in 0..100 {
            ring.submit_and_wait_for(1, Duration::from_millis(50))
                .unwrap();
            ring.reap_stamped(&mut done, |tag, bytes, _| {
                got.push((tag, bytes.to_vec(), None))
            });
            if done.iter().any(|c| !c.more) {
                break;
            }
        }
        let last = done.iter().find(|c| !c.more).expect("the receive ends");
        assert!(last.result >= 0, "{}", last.result);
        assert!(got.iter().all(|(_, bytes, _)| bytes.is_empty()), "{got:?}");
    }

    #[test]
    fn receive_timestamps_are_found_among_control_messages() {
        let message = |level: i32, kind: i32, seconds: u64, nanos: u64| {
            let mut bytes = Vec::new();
            bytes.extend_from_slice(&32u64.to_ne_bytes());
            bytes.extend_from_slice(&level.to_ne_bytes());
            bytes.extend_from_slice(&kind.to_ne_bytes());
            bytes.extend_from_slice(&seconds.to_ne_bytes());
            bytes.extend_from_slice(&nanos.to_ne_bytes());
            bytes
        };
        let stamp = message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, 5, 7);
        assert_eq!(receive_timestamp(&stamp), Some(Duration::new(5, 7)));
        let mut two = message(libc::IPPROTO_IP, 8, 1, 1);
        two.extend(message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, 9, 0));
        assert_eq!(receive_timestamp(&two), Some(Duration::new(9, 0)));
        assert_eq!(receive_timestamp(&[]), None);
        assert_eq!(receive_timestamp(&stamp[..20]), None, "truncated");
        let bad = message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, 1, 2_000_000_000);
        assert_eq!(receive_timestamp(&bad), None, "nanoseconds out of range");
        let mut zero_len = stamp.clone();
        zero_len[..8].copy_from_slice(&0u64.to_ne_bytes());
        assert_eq!(
            receive_timestamp(&zero_len),
            None,
            "a zero length cannot loop"
        );
    }

    #[test]
    fn a_gathering_wait_returns_with_what_came_in_its_window_or_waits_for_the_first() {
        let mut ring = Ring::new(8, 8, 64).unwrap();
        ring.timeout(Duration::from_millis(1), 1).unwrap();
        ring.timeout(Duration::from_millis(500), 2).unwrap();
        // Wants two, gathers for 20 ms: comes back with the one that completed by then.
        ring.submit_and_gather(2, Duration::from_millis(20), Duration::from_secs(5))
            .unwrap();
        assert_eq!(ring.ready(), 1);
        let mut done = Vec::new();
        ring.reap(&mut done, |_, _| {});
        assert_eq!(done.iter().map(|c| c.user_data).collect::<Vec<_>>(), [1]);
        // Nothing comes within the 1 ms window: it waits on for the first, not for five.
        ring.timeout(Duration::from_millis(30), 3).unwrap();
        ring.submit_and_gather(5, Duration::from_millis(1), Duration::from_secs(5))
            .unwrap();
        assert_eq!(ring.ready(), 1);
        done.clear();
        ring.reap(&mut done, |_, _| {});
        assert_eq!(done.iter().map(|c| c.user_data).collect::<Vec<_>>(), [3]);
        // The 500 ms one is still pending; dropping the ring cancels it.
    }
}
