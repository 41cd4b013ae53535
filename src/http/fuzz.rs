//! Property tests of the request parser: any bytes, split at any points, never panic and give
//! the same sequence of requests and errors however they are split (a connection sees TCP
//! segments, not requests). The inputs mix request-shaped pieces with arbitrary bytes, so
//! most cases get past the request line. `SWEETSPOT_FUZZ_CASES` sets the case count
//! (default 2,000 in the test run; `scripts/fuzz-http` runs a long one).

use proptest::prelude::*;

use super::{HttpError, Request, RequestParser};

/// What a connection makes of its input: every request in order, then the error that ends
/// it (if any), and the unparsed rest.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    requests: Vec<Request>,
    error: Option<HttpError>,
    rest: Vec<u8>,
}

/// Feeds `input` in the given pieces, parsing after each as a connection would.
fn feed(pieces: &[&[u8]]) -> Outcome {
    let mut buf = Vec::new();
    let mut requests = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        // What the connection layer also asks of a partial input.
        let _ = RequestParser::head_complete(&buf);
        let _ = RequestParser::wants_continue(&buf);
        loop {
            match RequestParser::parse(&buf) {
                Ok(Some((req, used))) => {
                    assert!(used > 0 && used <= buf.len());
                    buf.drain(..used);
                    requests.push(req);
                }
                Ok(None) => break,
                Err(e) => {
                    return Outcome {
                        requests,
                        error: Some(e),
                        rest: Vec::new(),
                    }
                }
            }
        }
    }
    Outcome {
        requests,
        error: None,
        rest: buf,
    }
}

fn piece() -> impl Strategy<Value = Vec<u8>> {
    let token = prop::sample::select(vec![
        &b"GET "[..],
        b"HEAD ",
        b"POST ",
        b"/hello",
        b"/guestbook?page=2",
        b"http://h/x",
        b" HTTP/1.1\r\n",
        b" HTTP/1.0\r\n",
        b" HTTP/1.2\r\n",
        b"Host: x\r\n",
        b"Connection: close\r\n",
        b"Content-Length: 5\r\n",
        b"Content-Length: 0\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Expect: 100-continue\r\n",
        b"\r\n",
        b"\n",
        b"hello",
        b"5\r\nhello\r\n",
        b"3;x=1\r\nabc\r\n",
        b"0\r\n\r\n",
        b"ffffffffffffffffff\r\n",
    ])
    .prop_map(<[u8]>::to_vec);
    prop_oneof![
        4 => token,
        1 => prop::collection::vec(any::<u8>(), 0..16),
        1 => (0usize..10_000).prop_map(|n| vec![b'a'; n]),
    ]
}

fn cases() -> u32 {
    std::env::var("SWEETSPOT_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn splitting_never_changes_the_outcome(
        pieces in prop::collection::vec(piece(), 0..40),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let input: Vec<u8> = pieces.concat();
        let whole = feed(&[&input]);
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
        points.sort_unstable();
        points.dedup();
        let mut split = Vec::new();
        let mut from = 0;
        for p in points {
            split.push(&input[from..p]);
            from = p;
        }
        split.push(&input[from..]);
        prop_assert_eq!(feed(&split), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let _ = feed(&[&bytes]);
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(feed(&bytewise), feed(&[&bytes]));
    }
}
