//! gRPC's unary call over HTTP/2, the parts both sides share: a message's length-prefixed
//! frame ([`frame`], [`unframe`]), the status codes by name, and the lab's one method,
//! `/sweetspot.Lab/Work`, whose messages ([`WorkRequest`], [`WorkReply`]) carry `/work`'s
//! semantics: a wait, then CPU. prost encodes them (its derive: no protoc needed); the proto
//! peers are given is `experiments/peers/lab.proto`.

/// The lab's method: `/work` as a gRPC call.
pub const WORK_METHOD: &str = "/sweetspot.Lab/Work";
/// The content type of a gRPC request and response.
pub const CONTENT_TYPE: &str = "application/grpc";

/// The statuses this lab's server answers with (the rest by [`status_name`]).
pub const OK: u32 = 0;
pub const UNKNOWN: u32 = 2;
pub const INVALID_ARGUMENT: u32 = 3;
pub const RESOURCE_EXHAUSTED: u32 = 8;
pub const UNIMPLEMENTED: u32 = 12;
pub const INTERNAL: u32 = 13;
pub const UNAVAILABLE: u32 = 14;

/// `sweetspot.WorkRequest`: what `/work?cpu_us=C&wait_us=W[&wait=blocking]` asks.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WorkRequest {
    #[prost(uint64, tag = "1")]
    pub cpu_us: u64,
    #[prost(uint64, tag = "2")]
    pub wait_us: u64,
    /// Block the thread that runs the call through its wait (`wait=blocking`).
    #[prost(bool, tag = "3")]
    pub blocking: bool,
}

/// `sweetspot.WorkReply`: what the call did.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WorkReply {
    #[prost(uint64, tag = "1")]
    pub cpu_us: u64,
    #[prost(uint64, tag = "2")]
    pub wait_us: u64,
}

/// A status's name (`OK`, `INVALID_ARGUMENT`, ...), or `UNKNOWN_CODE` past the 17 defined.
pub fn status_name(code: u32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    NAMES.get(code as usize).copied().unwrap_or("UNKNOWN_CODE")
}

/// `message` as gRPC frames it: an uncompressed flag, its length (4 bytes, big-endian), then
/// the message.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// The one message of a unary call's body, or why it is not one (a compressed message, a
/// frame cut short or followed by more).
pub fn unframe(body: &[u8]) -> Result<&[u8], &'static str> {
    let Some((&[flag, a, b, c, d], rest)) = body.split_first_chunk::<5>() else {
        return Err("no gRPC frame");
    };
    if flag != 0 {
        return Err("compressed messages are not accepted");
    }
    let len = u32::from_be_bytes([a, b, c, d]) as usize;
    match rest.len().cmp(&len) {
        std::cmp::Ordering::Less => Err("the message is cut short"),
        std::cmp::Ordering::Greater => Err("more than one message in a unary call"),
        std::cmp::Ordering::Equal => Ok(rest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_framed_message_unframes_to_itself() {
        let message = WorkRequest {
            cpu_us: 20,
            wait_us: 1000,
            blocking: false,
        }
        .encode_to_vec();
        // Field 1 = 20, field 2 = 1000 (varint e8 07); false is left out.
        assert_eq!(message, [0x08, 20, 0x10, 0xe8, 0x07]);
        let framed = frame(&message);
        assert_eq!(framed[..5], [0, 0, 0, 0, 5]);
        assert_eq!(unframe(&framed), Ok(&message[..]));
        assert_eq!(unframe(&framed[..7]), Err("the message is cut short"));
        assert!(unframe(&[framed.clone(), framed.clone()].concat()).is_err());
        assert!(unframe(&[1, 0, 0, 0, 0]).is_err());
        assert!(unframe(&[0, 0]).is_err());
        assert_eq!(unframe(&frame(&[])), Ok(&[][..]));
    }

    #[test]
    fn statuses_have_their_names() {
        assert_eq!(status_name(0), "OK");
        assert_eq!(status_name(3), "INVALID_ARGUMENT");
        assert_eq!(status_name(14), "UNAVAILABLE");
        assert_eq!(status_name(16), "UNAUTHENTICATED");
        assert_eq!(status_name(99), "UNKNOWN_CODE");
    }
}
