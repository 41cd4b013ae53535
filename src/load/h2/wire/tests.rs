use super::*;
use crate::load::h2::hpack::Line;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame_head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let payload: Vec<u8> = pairs
        .iter()
        .flat_map(|(id, v)| id.to_be_bytes().into_iter().chain(v.to_be_bytes()))
        .collect();
    frame(SETTINGS, 0, 0, &payload)
}

/// The frames in `bytes`: (kind, flags, stream, payload).
fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut all = Vec::new();
    while !bytes.is_empty() {
        let len =
            (usize::from(bytes[0]) << 16) | (usize::from(bytes[1]) << 8) | usize::from(bytes[2]);
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        all.push((bytes[3], bytes[4], stream, bytes[9..9 + len].to_vec()));
        bytes = &bytes[9 + len..];
    }
    all
}

/// What the session wrote since last asked.
fn written(s: &mut Session) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let out = s.pending().to_vec();
    s.wrote(out.len());
    frames(&out)
}

/// A session past its preface, with the server's SETTINGS (`pairs`) read.
fn session(slots: usize, pairs: &[(u16, u32)]) -> Session {
    let mut s = Session::new(slots, 64);
    let preface = s.pending().to_vec();
    s.wrote(preface.len());
    let input = settings(pairs);
    assert_eq!(s.receive(&input), Ok(input.len()));
    assert_eq!(written(&mut s), [(SETTINGS, ACK, 0, vec![])]);
    s
}

fn head(encoder: &mut loona_hpack::Encoder<'_>, fields: &[(&str, &str)]) -> Vec<u8> {
    encoder.encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
}

/// One request line's heads.
fn heads(method: &str, path: &str) -> Heads {
    Heads::new(&[Line {
        method,
        scheme: "http",
        authority: "h",
        path,
        headers: &[],
    }])
}

fn get() -> Heads {
    heads("GET", "/")
}

fn woken(s: &mut Session) -> Vec<usize> {
    let mut w = Vec::new();
    s.take_woken(&mut w);
    w
}

#[test]
fn the_preface_grants_wide_windows_and_refuses_push() {
    let s = Session::new(1, 64);
    let out = s.pending().to_vec();
    assert!(out.starts_with(PREFACE));
    let sent = frames(&out[PREFACE.len()..]);
    let mut want = Vec::new();
    want.extend(0x2u16.to_be_bytes());
    want.extend(0u32.to_be_bytes());
    want.extend(0x4u16.to_be_bytes());
    want.extend(STREAM_WINDOW.to_be_bytes());
    assert_eq!(sent[0], (SETTINGS, 0, 0, want));
    let add = (CONNECTION_WINDOW - 65_535).to_be_bytes().to_vec();
    assert_eq!(sent[1], (WINDOW_UPDATE, 0, 0, add));
    assert_eq!(sent.len(), 2);
    // One stream until the server's SETTINGS say otherwise; none said is no cap.
    assert_eq!((s.cap(), s.settled()), (1, false));
    assert_eq!(session(1, &[(3, 7)]).cap(), 7);
    assert_eq!(session(1, &[]).cap(), usize::MAX);
}

#[test]
fn a_request_is_its_block_on_odd_streams_and_its_answer_wakes_its_slot() {
    let mut s = session(2, &[(3, 100)]);
    let hello = heads("GET", "/hello");
    s.open(1, &hello, 0, &Bytes::new()).unwrap();
    s.open(0, &hello, 0, &Bytes::new()).unwrap();
    let sent = written(&mut s);
    let flags = END_STREAM | END_HEADERS;
    assert_eq!((sent[0].0, sent[0].1, sent[0].2), (HEADERS, flags, 1));
    assert_eq!((sent[1].0, sent[1].1, sent[1].2), (HEADERS, flags, 3));
    // The first indexed the authority and the path in the server's table, the second
    // refers to them: GET, http, then indexes 63 and 62, a byte each.
    assert_eq!(sent[1].3, [0x82, 0x86, 0xbf, 0xbe]);
    let mut server = loona_hpack::Decoder::new();
    for (_, _, _, block) in &sent {
        let fields = server.decode(block).unwrap();
        let text: Vec<_> = fields
            .iter()
            .map(|(n, v)| (String::from_utf8_lossy(n), String::from_utf8_lossy(v)))
            .collect();
        assert_eq!(
            text,
            [
                (":method", "GET"),
                (":scheme", "http"),
                (":authority", "h"),
                (":path", "/hello")
            ]
            .map(|(n, v)| (n.into(), v.into()))
        );
    }
    assert_eq!(s.open_streams(), 2);
    let mut enc = loona_hpack::Encoder::new();
    let mut input = frame(
        HEADERS,
        END_HEADERS,
        3,
        &head(&mut enc, &[(":status", "404")]),
    );
    input.extend(frame(DATA, 0, 3, b"not "));
    input.extend(frame(DATA, END_STREAM, 3, b"here"));
    // A 1xx head, then the final one that ends the stream.
    input.extend(frame(
        HEADERS,
        END_HEADERS,
        1,
        &head(&mut enc, &[(":status", "103")]),
    ));
    input.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &head(&mut enc, &[(":status", "200")]),
    ));
    assert_eq!(s.outcome(0), Outcome::Waiting);
    assert_eq!(s.receive(&input), Ok(input.len()));
    assert_eq!(woken(&mut s), [0, 1]);
    let answered = |status| Outcome::Answered { status, grpc: None };
    assert_eq!(s.outcome(0), answered(404));
    assert_eq!(s.outcome(1), answered(200));
    // Taken once: the slot is free for its next request.
    assert_eq!(s.outcome(1), Outcome::Idle);
    assert_eq!(s.open_streams(), 0);
}

#[test]
fn a_head_across_continuations_and_grpc_trailers_are_read() {
    let mut s = session(1, &[]);
    s.open(0, &heads("POST", "/m"), 0, &Bytes::from_static(b"x"))
        .unwrap();
    written(&mut s);
    let mut enc = loona_hpack::Encoder::new();
    let block = head(
        &mut enc,
        &[(":status", "200"), ("content-type", "application/grpc")],
    );
    let (a, b) = block.split_at(3);
    let mut input = frame(HEADERS, 0, 1, a);
    input.extend(frame(CONTINUATION, END_HEADERS, 1, b));
    input.extend(frame(DATA, 0, 1, &[0, 0, 0, 0, 0]));
    let trailers = head(&mut enc, &[("grpc-status", "5")]);
    input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &trailers));
    // Cut anywhere: the whole frames are taken, the rest waits for more bytes.
    let cut = input.len() - 4;
    let taken = s.receive(&input[..cut]).unwrap();
    assert!(taken < cut);
    assert_eq!(s.outcome(0), Outcome::Waiting);
    assert_eq!(s.receive(&input[taken..]), Ok(input.len() - taken));
    let done = Outcome::Answered {
        status: 200,
        grpc: Some(5),
    };
    assert_eq!(s.outcome(0), done);
    // Another frame between a HEADERS and its CONTINUATION breaks the connection.
    let mut s = session(1, &[]);
    s.open(0, &get(), 0, &Bytes::new()).unwrap();
    let mut input = frame(HEADERS, 0, 1, a);
    input.extend(frame(PING, 0, 0, &[0; 8]));
    assert_eq!(s.receive(&input), Err(ProtocolError));
    assert_eq!(s.outcome(0), Outcome::Lost(Lost::Protocol));
    assert_eq!(s.refusal(), Some(Lost::Protocol));
}

#[test]
fn resets_goaways_and_pings() {
    let mut s = session(3, &[]);
    let block = get();
    for slot in 0..3 {
        s.open(slot, &block, 0, &Bytes::new()).unwrap();
    }
    written(&mut s);
    let mut input = frame(RST_STREAM, 0, 1, &2u32.to_be_bytes());
    let mut goaway = 3u32.to_be_bytes().to_vec();
    goaway.extend(0u32.to_be_bytes());
    input.extend(frame(GOAWAY, 0, 0, &goaway));
    input.extend(frame(PING, 0, 0, b"12345678"));
    input.extend(frame(PING, ACK, 0, b"87654321"));
    assert_eq!(s.receive(&input), Ok(input.len()));
    assert_eq!(s.outcome(0), Outcome::Lost(Lost::Reset));
    // Stream 3 is the server's to answer still; 5 was never processed.
    assert_eq!(s.outcome(1), Outcome::Waiting);
    assert_eq!(s.outcome(2), Outcome::Lost(Lost::GoAway));
    assert!(s.went_away());
    assert_eq!(s.refusal(), Some(Lost::GoAway));
    assert_eq!(s.open(0, &block, 0, &Bytes::new()), Err(Lost::GoAway));
    // Only the ping that asked is answered, with its own bytes.
    assert_eq!(written(&mut s), [(PING, ACK, 0, b"12345678".to_vec())]);
    // The connection's end loses what is left.
    s.fail(Lost::Closed);
    assert_eq!(woken(&mut s), [0, 2, 1]);
    assert_eq!(s.outcome(1), Outcome::Lost(Lost::Closed));
}

#[test]
fn a_body_goes_as_the_servers_windows_allow() {
    let mut s = session(1, &[(4, 10)]);
    s.open(0, &heads("POST", "/"), 0, &Bytes::from(vec![7u8; 25]))
        .unwrap();
    let sent = written(&mut s);
    assert_eq!(sent[0].1, END_HEADERS);
    assert_eq!(sent[1], (DATA, 0, 1, vec![7; 10]));
    assert_eq!(sent.len(), 2);
    let input = frame(WINDOW_UPDATE, 0, 1, &10u32.to_be_bytes());
    s.receive(&input).unwrap();
    assert_eq!(written(&mut s), [(DATA, 0, 1, vec![7; 10])]);
    // The server raises every stream's window by its SETTINGS.
    let input = settings(&[(4, 1000)]);
    s.receive(&input).unwrap();
    let sent = written(&mut s);
    assert_eq!(sent[0], (SETTINGS, ACK, 0, vec![]));
    assert_eq!(sent[1], (DATA, END_STREAM, 1, vec![7; 5]));
}

#[test]
fn windows_are_topped_up_at_half() {
    let mut s = session(1, &[]);
    s.open(0, &get(), 0, &Bytes::new()).unwrap();
    written(&mut s);
    let mut enc = loona_hpack::Encoder::new();
    let input = frame(
        HEADERS,
        END_HEADERS,
        1,
        &head(&mut enc, &[(":status", "200")]),
    );
    s.receive(&input).unwrap();
    let chunk = frame(DATA, 0, 1, &[0; MAX_FRAME]);
    let half_stream = (STREAM_WINDOW / 2) as usize / MAX_FRAME;
    for _ in 0..half_stream - 1 {
        s.receive(&chunk).unwrap();
    }
    assert!(written(&mut s).is_empty());
    s.receive(&chunk).unwrap();
    let half = (STREAM_WINDOW / 2).to_be_bytes().to_vec();
    assert_eq!(written(&mut s), [(WINDOW_UPDATE, 0, 1, half)]);
    let half_connection = (CONNECTION_WINDOW / 2) as usize / MAX_FRAME;
    for _ in half_stream..half_connection {
        s.receive(&chunk).unwrap();
    }
    let sent = written(&mut s);
    let half = (CONNECTION_WINDOW / 2).to_be_bytes().to_vec();
    let connection: Vec<_> = sent.iter().filter(|f| f.2 == 0).collect();
    assert_eq!(connection, [&(WINDOW_UPDATE, 0, 0, half)]);
    let stream = sent.iter().filter(|f| f.2 == 1).count();
    assert_eq!(stream, (half_connection - half_stream) / half_stream);
    assert_eq!(s.outcome(0), Outcome::Waiting);
}

#[test]
fn a_cancelled_stream_is_reset_and_its_late_head_still_decoded() {
    let mut s = session(1, &[]);
    let block = get();
    s.open(0, &block, 0, &Bytes::new()).unwrap();
    written(&mut s);
    s.cancel(0);
    assert_eq!(
        written(&mut s),
        [(RST_STREAM, 0, 1, CANCEL.to_be_bytes().to_vec())]
    );
    assert_eq!(s.outcome(0), Outcome::Idle);
    s.open(0, &block, 0, &Bytes::new()).unwrap();
    // The late answer indexes a field the next head refers to.
    let mut enc = loona_hpack::Encoder::new();
    let fields = [(":status", "200"), ("x-served-by", "one")];
    let mut input = frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &head(&mut enc, &fields),
    );
    input.extend(frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        3,
        &head(&mut enc, &fields),
    ));
    assert_eq!(s.receive(&input), Ok(input.len()));
    assert_eq!(woken(&mut s), [0]);
    let done = Outcome::Answered {
        status: 200,
        grpc: None,
    };
    assert_eq!(s.outcome(0), done);
}

#[test]
fn a_frame_past_our_size_or_a_push_breaks_the_connection() {
    for bad in [
        {
            let mut f = frame(DATA, 0, 1, &[]);
            f[0..3].copy_from_slice(&[0, 0x40, 0x01]);
            f
        },
        frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2]),
        frame(HEADERS, END_HEADERS, 1, &[0xff, 0xff]),
    ] {
        let mut s = session(1, &[]);
        s.open(0, &get(), 0, &Bytes::new()).unwrap();
        assert_eq!(s.receive(&bad), Err(ProtocolError), "{bad:02x?}");
        assert_eq!(s.outcome(0), Outcome::Lost(Lost::Protocol));
    }
}

#[test]
fn a_server_that_floods_us_is_refused_not_buffered_for() {
    // Pings answered but never read back: the answers pile up to the bound, then the
    // connection is refused.
    let mut s = session(1, &[]);
    s.open(0, &get(), 0, &Bytes::new()).unwrap();
    let ping = frame(PING, 0, 0, &[1; 8]);
    let mut refused = false;
    for _ in 0..(MAX_PENDING / 17 + 2) {
        if s.receive(&ping) == Err(ProtocolError) {
            refused = true;
            break;
        }
    }
    assert!(refused && s.pending().len() <= MAX_PENDING + 17);
    assert_eq!(s.outcome(0), Outcome::Lost(Lost::Protocol));
    // A header block that never ends.
    let mut s = session(1, &[]);
    s.open(0, &get(), 0, &Bytes::new()).unwrap();
    s.receive(&frame(HEADERS, 0, 1, &[0x88])).unwrap();
    let more = frame(CONTINUATION, 0, 1, &[0x88; MAX_FRAME]);
    let mut refused = false;
    for _ in 0..(MAX_BLOCK / MAX_FRAME + 2) {
        if s.receive(&more) == Err(ProtocolError) {
            refused = true;
            break;
        }
    }
    assert!(refused && s.block_bytes.len() <= MAX_BLOCK);
}

proptest::proptest! {
    /// Whatever a server sends, in whatever pieces, the session neither panics nor keeps more
    /// than it was given, and a request it answers was asked.
    #[test]
    fn any_frames_from_a_server_are_read_or_refused(
        parts in proptest::collection::vec(
            (0u8..11, proptest::num::u8::ANY, 0u32..4, proptest::collection::vec(proptest::num::u8::ANY, 0..24)),
            0..24,
        ),
        cut in 0usize..512,
    ) {
        let bytes: Vec<u8> = parts
            .iter()
            .flat_map(|(kind, flags, stream, payload)| frame(*kind, *flags, *stream, payload))
            .collect();
        let mut s = session(2, &[]);
        s.open(0, &get(), 0, &Bytes::new()).unwrap();
        let cut = cut.min(bytes.len());
        let mut pending = bytes[..cut].to_vec();
        for piece in [&bytes[..0], &bytes[cut..]] {
            pending.extend_from_slice(piece);
            match s.receive(&pending) {
                Ok(taken) => { pending.drain(..taken); }
                Err(ProtocolError) => break,
            }
        }
        proptest::prop_assert!(matches!(s.outcome(1), Outcome::Idle));
    }

    #[test]
    fn any_block_decodes_or_is_malformed(
        block in proptest::collection::vec(proptest::num::u8::ANY, 0..256),
    ) {
        let mut d = Decoder::new();
        let _ = d.decode(&block);
        let _ = d.decode(&block);
    }
}
