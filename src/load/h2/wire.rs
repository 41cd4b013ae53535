//! The client's side of one HTTP/2 connection, sans IO: what to write (the preface, a request's
//! HEADERS and DATA, acknowledgements, window updates) and what the bytes read mean for each
//! request in flight (RFC 9113). The engine's [`super::conn`] moves the bytes.
//!
//! Written here rather than driven through the `h2` crate because a load generator's client
//! is the product, and its cost per request is what the `h2` crate made too high: against h2o
//! at 10 connections x 10 streams it spent 4.2 us of CPU a request to h2load's 2.2 (perf: a
//! tenth in copies, then its header maps, HPACK and its stream store's locking), where this
//! one copies a request's HEADERS frame from a block encoded once per line, keeps no header
//! map, and decodes a response's head only for `:status` and `grpc-status` ([`super::hpack`]).
//! benches/h2_cost.txt has the figures.
//!
//! What it does not do, as a client of a load test need not: server push (refused by its
//! SETTINGS), priorities (ignored), and HPACK indexing of its own requests (every header is a
//! literal without indexing, so the block needs no state and the server's table is left
//! alone).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use bytes::Bytes;

use super::hpack::{Decoder, Encoder, Head, Heads};

/// What a client writes first (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEAD: usize = 9;
/// The largest frame payload we accept: the default, never raised by our SETTINGS.
pub const MAX_FRAME: usize = 16_384;
/// The longest header block we read (HEADERS and its CONTINUATIONs)...
const MAX_BLOCK: usize = 256 * 1024;
/// ... and the most we hold to write: a server that sends pings and settings faster than it
/// reads our answers is refused rather than buffered for.
const MAX_PENDING: usize = 4 * 1024 * 1024;
/// Flow-control windows we grant the server: wide, so the client never throttles a response.
pub const STREAM_WINDOW: u32 = 1 << 24;
pub const CONNECTION_WINDOW: u32 = 1 << 30;
/// The window both ends start from (RFC 9113 §6.9.2).
const DEFAULT_WINDOW: i64 = 65_535;
const MAX_STREAM_ID: u32 = (1 << 31) - 1;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

const SETTINGS_HEADER_TABLE_SIZE: u16 = 1;
const SETTINGS_ENABLE_PUSH: u16 = 2;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 3;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 4;
const SETTINGS_MAX_FRAME_SIZE: u16 = 5;

/// RST_STREAM's code for a request given up (a timeout, the run's end).
const CANCEL: u32 = 0x8;

/// How a request in flight ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// The server reset its stream.
    Reset,
    /// The server's GOAWAY left it unprocessed.
    GoAway,
    /// The connection closed or failed under it.
    Closed,
    /// The server broke the protocol.
    Protocol,
}

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No request, or one given up.
    Idle,
    Waiting,
    /// Its response ended: the status and any `grpc-status`.
    Answered {
        status: u16,
        grpc: Option<u32>,
    },
    Lost(Lost),
}

/// One sender's request: at most one in flight at a time.
#[derive(Debug, Clone)]
struct Slot {
    id: u32,
    outcome: Outcome,
    /// Its final (not 1xx) head came.
    headed: bool,
    status: u16,
    grpc: Option<u32>,
    /// Bytes of its response read since its window was last topped up.
    unacked: u32,
    /// What it may still send (the server's window for it).
    send_window: i64,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            id: 0,
            outcome: Outcome::Idle,
            headed: false,
            status: 0,
            grpc: None,
            unacked: 0,
            send_window: 0,
        }
    }
}

/// A request body waiting for flow-control window.
struct Body {
    slot: usize,
    id: u32,
    bytes: Bytes,
    sent: usize,
}

/// A header block being read across HEADERS and CONTINUATION frames (its bytes in
/// [`Session::block_bytes`]).
struct Block {
    stream: u32,
    end_stream: bool,
}

/// Stream ids are distinct odd numbers: one multiply spreads them over the table.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The connection failed as a whole (the peer broke the protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolError;

/// One connection's state (see the module header).
pub struct Session {
    out: Vec<u8>,
    /// `out[..written]` has gone.
    written: usize,
    next_id: u32,
    slots: Vec<Slot>,
    ids: HashMap<u32, usize, BuildHasherDefault<IdHasher>>,
    /// Slots whose outcome changed since [`Session::take_woken`].
    woken: Vec<usize>,
    decoder: Decoder,
    encoder: Encoder,
    /// What the requests' fields take of the server's table.
    need: usize,
    /// A request's head, encoded before it is framed.
    head: Vec<u8>,
    block: Option<Block>,
    block_bytes: Vec<u8>,
    bodies: VecDeque<Body>,
    /// The server's settings as they stand.
    max_streams: Option<u32>,
    initial_window: i64,
    max_frame: usize,
    settled: bool,
    send_window: i64,
    /// Bytes read on the connection since its window was last topped up.
    unacked: u32,
    /// The server's GOAWAY: the last stream it will process.
    goaway: Option<u32>,
    /// Why no request may go any more (the connection failed, or its ids ran out).
    refused: Option<Lost>,
}

impl Session {
    /// A connection for `slots` senders of requests whose fields take `need` of a table
    /// ([`Heads::table_size`]), its preface, SETTINGS and window already queued.
    pub fn new(slots: usize, need: usize) -> Session {
        let mut out = Vec::with_capacity(16 * 1024);
        out.extend_from_slice(PREFACE);
        let settings: [(u16, u32); 2] = [
            (SETTINGS_ENABLE_PUSH, 0),
            (SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW),
        ];
        frame_head(&mut out, settings.len() * 6, SETTINGS, 0, 0);
        for (id, value) in settings {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&value.to_be_bytes());
        }
        window_update(&mut out, 0, CONNECTION_WINDOW - DEFAULT_WINDOW as u32);
        Session {
            out,
            written: 0,
            next_id: 1,
            slots: vec![Slot::new(); slots],
            ids: HashMap::default(),
            woken: Vec::new(),
            decoder: Decoder::new(),
            encoder: Encoder::default(),
            need,
            head: Vec::new(),
            block: None,
            block_bytes: Vec::new(),
            bodies: VecDeque::new(),
            max_streams: None,
            initial_window: DEFAULT_WINDOW,
            max_frame: MAX_FRAME,
            settled: false,
            send_window: DEFAULT_WINDOW,
            unacked: 0,
            goaway: None,
            refused: None,
        }
    }

    /// Bytes waiting to be written.
    pub fn pending(&self) -> &[u8] {
        &self.out[self.written..]
    }

    /// `n` bytes of [`Session::pending`] were written.
    pub fn wrote(&mut self, n: usize) {
        self.written += n;
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        }
    }

    /// The server's SETTINGS came.
    pub fn settled(&self) -> bool {
        self.settled
    }

    /// Streams the server lets us open at once: 1 until its SETTINGS came (as the `h2` crate
    /// does), `usize::MAX` where it set no cap.
    pub fn cap(&self) -> usize {
        match (self.settled, self.max_streams) {
            (false, _) => 1,
            (true, None) => usize::MAX,
            (true, Some(n)) => n as usize,
        }
    }

    pub fn went_away(&self) -> bool {
        self.goaway.is_some()
    }

    /// Why a new request cannot go on this connection, if it cannot.
    pub fn refusal(&self) -> Option<Lost> {
        self.refused.or(self.goaway.map(|_| Lost::GoAway))
    }

    /// Requests still in flight.
    #[cfg(test)]
    pub fn open_streams(&self) -> usize {
        self.ids.len()
    }

    /// Opens a stream for `slot`: its HEADERS (line `line` of `heads`), then `body` (none: the
    /// HEADERS end the stream).
    pub fn open(
        &mut self,
        slot: usize,
        heads: &Heads,
        line: usize,
        body: &Bytes,
    ) -> Result<(), Lost> {
        if let Some(why) = self.refusal() {
            return Err(why);
        }
        let id = self.next_id;
        self.next_id += 2;
        if self.next_id > MAX_STREAM_ID {
            self.refused = Some(Lost::Closed);
        }
        let s = &mut self.slots[slot];
        debug_assert!(!matches!(s.outcome, Outcome::Waiting));
        *s = Slot {
            id,
            outcome: Outcome::Waiting,
            send_window: self.initial_window,
            ..Slot::new()
        };
        self.ids.insert(id, slot);
        let end = if body.is_empty() { END_STREAM } else { 0 };
        let mut block = std::mem::take(&mut self.head);
        block.clear();
        self.encoder.encode(heads, line, &mut block);
        let mut rest = &block[..];
        let mut kind = HEADERS;
        loop {
            let n = rest.len().min(self.max_frame);
            let last = n == rest.len();
            let flags = if kind == HEADERS { end } else { 0 } | if last { END_HEADERS } else { 0 };
            frame_head(&mut self.out, n, kind, flags, id);
            self.out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            kind = CONTINUATION;
            if last {
                break;
            }
        }
        self.head = block;
        if !body.is_empty() {
            self.bodies.push_back(Body {
                slot,
                id,
                bytes: body.clone(),
                sent: 0,
            });
            self.pump_bodies();
        }
        Ok(())
    }

    /// Sends what the windows allow of the bodies waiting, in order.
    fn pump_bodies(&mut self) {
        let mut i = 0;
        while i < self.bodies.len() && self.send_window > 0 {
            let body = &mut self.bodies[i];
            let slot = &mut self.slots[body.slot];
            if slot.id != body.id || !matches!(slot.outcome, Outcome::Waiting) {
                self.bodies.remove(i);
                continue;
            }
            while body.sent < body.bytes.len() && slot.send_window > 0 && self.send_window > 0 {
                let n = (body.bytes.len() - body.sent)
                    .min(self.max_frame)
                    .min(slot.send_window as usize)
                    .min(self.send_window as usize);
                let end = body.sent + n == body.bytes.len();
                frame_head(
                    &mut self.out,
                    n,
                    DATA,
                    if end { END_STREAM } else { 0 },
                    body.id,
                );
                self.out
                    .extend_from_slice(&body.bytes[body.sent..body.sent + n]);
                body.sent += n;
                slot.send_window -= n as i64;
                self.send_window -= n as i64;
            }
            if body.sent == body.bytes.len() {
                self.bodies.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// `slot`'s outcome, taken once it is not waiting (then the slot is idle again).
    pub fn outcome(&mut self, slot: usize) -> Outcome {
        let s = &mut self.slots[slot];
        match s.outcome {
            Outcome::Waiting | Outcome::Idle => s.outcome,
            done => {
                s.outcome = Outcome::Idle;
                done
            }
        }
    }

    /// `slot`'s request is given up: its stream is reset, and anything still coming for it
    /// is read and dropped.
    pub fn cancel(&mut self, slot: usize) {
        let s = &mut self.slots[slot];
        if matches!(s.outcome, Outcome::Waiting) {
            let id = s.id;
            self.ids.remove(&id);
            if self.refused.is_none() {
                frame_head(&mut self.out, 4, RST_STREAM, 0, id);
                self.out.extend_from_slice(&CANCEL.to_be_bytes());
            }
        }
        s.outcome = Outcome::Idle;
    }

    /// The slots whose outcome changed since the last call.
    pub fn take_woken(&mut self, into: &mut Vec<usize>) {
        into.append(&mut self.woken);
    }

    /// The connection ended under its requests (`why`): every one in flight is lost.
    pub fn fail(&mut self, why: Lost) {
        if self.refused.is_none() || self.refused == Some(Lost::Closed) {
            self.refused = Some(why);
        }
        for (_, slot) in self.ids.drain() {
            self.slots[slot].outcome = Outcome::Lost(why);
            self.woken.push(slot);
        }
        self.bodies.clear();
    }

    /// Reads the whole frames at the start of `input`; returns how many bytes they took (the
    /// rest is a frame not yet complete). A protocol error fails the connection.
    pub fn receive(&mut self, input: &[u8]) -> Result<usize, ProtocolError> {
        let mut at = 0;
        while input.len() - at >= FRAME_HEAD {
            let head = &input[at..at + FRAME_HEAD];
            let len =
                (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            if len > MAX_FRAME {
                return self.broken();
            }
            if input.len() - at < FRAME_HEAD + len {
                break;
            }
            let (kind, flags) = (head[3], head[4]);
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & MAX_STREAM_ID;
            let payload = &input[at + FRAME_HEAD..at + FRAME_HEAD + len];
            at += FRAME_HEAD + len;
            if self.frame(kind, flags, stream, payload).is_err()
                || self.pending().len() > MAX_PENDING
            {
                return self.broken();
            }
        }
        Ok(at)
    }

    fn broken(&mut self) -> Result<usize, ProtocolError> {
        self.fail(Lost::Protocol);
        Err(ProtocolError)
    }

    fn frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<(), ()> {
        if self.block.is_some() && kind != CONTINUATION {
            return Err(());
        }
        match kind {
            DATA => self.data(flags, stream, payload),
            HEADERS => {
                let fragment = unpad(flags, payload)?;
                let fragment = if flags & PRIORITY != 0 {
                    fragment.get(5..).ok_or(())?
                } else {
                    fragment
                };
                if stream == 0 {
                    return Err(());
                }
                self.block = Some(Block {
                    stream,
                    end_stream: flags & END_STREAM != 0,
                });
                self.block_bytes.clear();
                self.block_bytes.extend_from_slice(fragment);
                self.end_block(flags)
            }
            CONTINUATION => {
                let block = self.block.as_ref().ok_or(())?;
                if block.stream != stream {
                    return Err(());
                }
                if self.block_bytes.len() + payload.len() > MAX_BLOCK {
                    return Err(());
                }
                self.block_bytes.extend_from_slice(payload);
                self.end_block(flags)
            }
            RST_STREAM => {
                if payload.len() != 4 || stream == 0 {
                    return Err(());
                }
                self.end(stream, Outcome::Lost(Lost::Reset));
                Ok(())
            }
            SETTINGS => self.settings(flags, stream, payload),
            PUSH_PROMISE => Err(()),
            PING => {
                if payload.len() != 8 || stream != 0 {
                    return Err(());
                }
                if flags & ACK == 0 {
                    frame_head(&mut self.out, 8, PING, ACK, 0);
                    self.out.extend_from_slice(payload);
                }
                Ok(())
            }
            GOAWAY => {
                let last = payload.get(..4).ok_or(())?;
                let last = u32::from_be_bytes([last[0], last[1], last[2], last[3]]) & MAX_STREAM_ID;
                self.goaway = Some(self.goaway.map_or(last, |l| l.min(last)));
                let unprocessed: Vec<u32> =
                    self.ids.keys().copied().filter(|&id| id > last).collect();
                for id in unprocessed {
                    self.end(id, Outcome::Lost(Lost::GoAway));
                }
                Ok(())
            }
            WINDOW_UPDATE => {
                let raw = payload.get(..4).ok_or(())?;
                let add =
                    i64::from(u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) & MAX_STREAM_ID);
                if stream == 0 {
                    self.send_window += add;
                } else if let Some(&slot) = self.ids.get(&stream) {
                    self.slots[slot].send_window += add;
                }
                self.pump_bodies();
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn data(&mut self, flags: u8, stream: u32, payload: &[u8]) -> Result<(), ()> {
        if stream == 0 {
            return Err(());
        }
        unpad(flags, payload)?;
        let len = payload.len() as u32;
        self.unacked += len;
        if self.unacked >= CONNECTION_WINDOW / 2 {
            window_update(&mut self.out, 0, self.unacked);
            self.unacked = 0;
        }
        let Some(&slot) = self.ids.get(&stream) else {
            return Ok(());
        };
        if flags & END_STREAM != 0 {
            let s = &self.slots[slot];
            let answered = Outcome::Answered {
                status: s.status,
                grpc: s.grpc,
            };
            let outcome = if s.headed {
                answered
            } else {
                Outcome::Lost(Lost::Protocol)
            };
            self.end(stream, outcome);
            return Ok(());
        }
        let s = &mut self.slots[slot];
        s.unacked += len;
        if s.unacked >= STREAM_WINDOW / 2 {
            window_update(&mut self.out, stream, s.unacked);
            s.unacked = 0;
        }
        Ok(())
    }

    /// A header block ended with `flags`: decoded (always, to keep HPACK's table in step)
    /// and given to its stream.
    fn end_block(&mut self, flags: u8) -> Result<(), ()> {
        if flags & END_HEADERS == 0 {
            return Ok(());
        }
        let block = self.block.take().ok_or(())?;
        let Head { status, grpc } = self.decoder.decode(&self.block_bytes).map_err(|_| ())?;
        let Some(&slot) = self.ids.get(&block.stream) else {
            return Ok(());
        };
        let s = &mut self.slots[slot];
        if !s.headed {
            let status = status.ok_or(())?;
            if (100..200).contains(&status) && !block.end_stream {
                return Ok(());
            }
            s.status = status as u16;
            s.headed = true;
        }
        if grpc.is_some() {
            s.grpc = grpc;
        }
        if block.end_stream {
            let outcome = Outcome::Answered {
                status: s.status,
                grpc: s.grpc,
            };
            self.end(block.stream, outcome);
        }
        Ok(())
    }

    fn settings(&mut self, flags: u8, stream: u32, payload: &[u8]) -> Result<(), ()> {
        if stream != 0 || !payload.len().is_multiple_of(6) {
            return Err(());
        }
        if flags & ACK != 0 {
            return Ok(());
        }
        let mut table = None;
        for setting in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([setting[0], setting[1]]);
            let value = u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
            match id {
                SETTINGS_MAX_CONCURRENT_STREAMS => self.max_streams = Some(value),
                SETTINGS_INITIAL_WINDOW_SIZE => {
                    let delta = i64::from(value) - self.initial_window;
                    self.initial_window = i64::from(value);
                    for &slot in self.ids.values() {
                        self.slots[slot].send_window += delta;
                    }
                }
                SETTINGS_MAX_FRAME_SIZE => {
                    self.max_frame = (value as usize).clamp(MAX_FRAME, (1 << 24) - 1)
                }
                SETTINGS_HEADER_TABLE_SIZE => table = Some(value),
                _ => {}
            }
        }
        self.settled = true;
        self.encoder.settle(self.need, table);
        frame_head(&mut self.out, 0, SETTINGS, ACK, 0);
        self.pump_bodies();
        Ok(())
    }

    /// Stream `id` ended with `outcome`: its slot is told, its id forgotten.
    fn end(&mut self, id: u32, outcome: Outcome) {
        if let Some(slot) = self.ids.remove(&id) {
            self.slots[slot].outcome = outcome;
            self.woken.push(slot);
        }
    }
}

/// The payload of a frame with `flags` without its padding.
fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], ()> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let pad = usize::from(*payload.first().ok_or(())?);
    payload
        .get(1..payload.len().checked_sub(pad).ok_or(())?)
        .ok_or(())
}

fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = len as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

fn window_update(out: &mut Vec<u8>, stream: u32, add: u32) {
    frame_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&add.to_be_bytes());
}

#[cfg(test)]
mod tests;
