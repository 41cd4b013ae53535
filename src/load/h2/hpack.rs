//! HPACK (RFC 7541) both ways, for a load test's client: the request lines' heads encoded
//! once before the run ([`Heads`]), each connection indexing their fields in the server's
//! table with its first requests and referring to them after ([`Encoder`]), as h2load does:
//! a head of literals would cost the server a copy of each string a request (h2o served our
//! client 14% fewer requests a core before this). Response heads are decoded ([`Decoder`])
//! for the two fields a load test reads, `:status` and `grpc-status`, every block whole, so
//! the dynamic table stays in step with the server's.
//!
//! Our own table walk over loona-hpack's Huffman decoder rather than its `Decoder`, because
//! that builds its Huffman tables afresh for every string it decodes, bit by bit through hash
//! maps: against nginx, which sends `server`, `date`, `content-type` and `content-length` as
//! Huffman literals with incremental indexing in every response, it was three quarters of
//! the client's CPU (80 us a request). Here a string is decoded once (loona-hpack's
//! `HuffmanDecoder`, made once) and remembered by its encoded bytes: a server repeats its
//! fields, and `date` changes once a second. loona-hpack's `Decoder` is the reference the
//! tests hold this one to.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use loona_hpack::huffman::HuffmanDecoder;

/// The table size both ends start from, and the most we allow (our SETTINGS keep the default).
const TABLE_SIZE: usize = 4096;
/// An entry's size beyond its name and value (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;
/// Strings remembered; past this the memory is dropped and filled again ...
const REMEMBERED_STRINGS: usize = 256;
/// ... each at most this long encoded (a field a server repeats is short).
const REMEMBERED_BYTES: usize = 1024;

/// RFC 7541 Appendix A: the static table, index 1 first.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// A whole static entry's index, if `name: value` is one.
fn static_field(name: &str, value: &str) -> Option<usize> {
    let at = STATIC
        .iter()
        .position(|&(n, v)| n == name && v == value && !v.is_empty());
    at.map(|i| i + 1)
}

/// The first static entry named `name`, if any.
fn static_name(name: &str) -> Option<usize> {
    STATIC.iter().position(|&(n, _)| n == name).map(|i| i + 1)
}

/// One field of a request line's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// A whole static entry: its one byte.
    Static(u8),
    /// Field `n` of [`Heads::fields`].
    Field(usize),
}

/// One request line: its method, scheme, authority, path and other headers (names in lower
/// case).
pub struct Line<'a> {
    pub method: &'a str,
    pub scheme: &'a str,
    pub authority: &'a str,
    pub path: &'a str,
    pub headers: &'a [(String, String)],
}

/// The heads of a run's request lines, encoded once.
#[derive(Debug, Clone)]
pub struct Heads {
    lines: Vec<Vec<Part>>,
    /// Each line's block of literals without indexing: before the server's SETTINGS came, or
    /// where its table cannot hold every field.
    plain: Vec<Vec<u8>>,
    /// The fields the lines share (each once), as literals with incremental indexing.
    fields: Vec<Vec<u8>>,
    /// What the fields take of a table.
    table_size: usize,
}

impl Heads {
    pub fn new(lines: &[Line<'_>]) -> Heads {
        let mut heads = Heads {
            lines: Vec::new(),
            plain: Vec::new(),
            fields: Vec::new(),
            table_size: 0,
        };
        let mut known: HashMap<(String, String), usize> = HashMap::new();
        for line in lines {
            let pseudo = [
                (":method", line.method),
                (":scheme", line.scheme),
                (":authority", line.authority),
                (":path", line.path),
            ];
            let fields = pseudo
                .into_iter()
                .chain(line.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())));
            let (mut parts, mut plain) = (Vec::new(), Vec::new());
            for (name, value) in fields {
                if let Some(index) = static_field(name, value) {
                    parts.push(Part::Static(0x80 | index as u8));
                    plain.push(0x80 | index as u8);
                    continue;
                }
                literal(&mut plain, name, value, false);
                let key = (name.to_string(), value.to_string());
                let n = *known.entry(key).or_insert_with(|| {
                    let mut field = Vec::new();
                    literal(&mut field, name, value, true);
                    heads.fields.push(field);
                    heads.table_size += name.len() + value.len() + ENTRY_OVERHEAD;
                    heads.fields.len() - 1
                });
                parts.push(Part::Field(n));
            }
            heads.lines.push(parts);
            heads.plain.push(plain);
        }
        heads
    }

    /// Line `line`'s head as literals without indexing.
    pub fn plain(&self, line: usize) -> &[u8] {
        &self.plain[line]
    }

    /// What the lines' fields take of a table (RFC 7541 §4.1).
    pub fn table_size(&self) -> usize {
        self.table_size
    }
}

/// `name: value` as a literal, with incremental indexing or without (RFC 7541 §6.2), its name
/// from the static table where it is there, its strings without Huffman coding.
fn literal(out: &mut Vec<u8>, name: &str, value: &str, index: bool) {
    let (prefix, first) = if index { (6, 0x40) } else { (4, 0x00) };
    match static_name(name) {
        Some(i) => put_integer(out, i, prefix, first),
        None => {
            out.push(first);
            put_string(out, name.as_bytes());
        }
    }
    put_string(out, value.as_bytes());
}

/// An HPACK integer in a `prefix`-bit prefix after the bits `first` (RFC 7541 §5.1).
fn put_integer(out: &mut Vec<u8>, value: usize, prefix: u8, first: u8) {
    loona_hpack::encoder::encode_integer_into(value, prefix, first, out)
        .expect("a Vec takes any write");
}

/// An HPACK string literal, without Huffman coding.
fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    put_integer(out, bytes.len(), 7, 0x00);
    out.extend_from_slice(bytes);
}

/// One connection's side of the server's table for its requests: which of the [`Heads`]'
/// fields it holds, by the order they went in. Nothing is indexed until the server's SETTINGS
/// came, nor where the fields do not all fit its table (nothing is ever evicted).
#[derive(Debug, Clone, Default)]
pub struct Encoder {
    settled: bool,
    /// The server's table is too small for the fields, or shrank under them: literals only.
    plain: bool,
    /// The table size the server allows (its SETTINGS), when it is under the default.
    allowed: Option<usize>,
    /// A size update owed at the start of the next block (RFC 7541 §4.2).
    update: Option<usize>,
    /// Each field's place in the order of insertion, once it went in.
    at: Vec<Option<usize>>,
    inserted: usize,
}

impl Encoder {
    /// The server's SETTINGS came, with its `SETTINGS_HEADER_TABLE_SIZE` if it set one.
    pub fn settle(&mut self, need: usize, table: Option<u32>) {
        self.settled = true;
        let Some(size) = table.map(|t| t as usize) else {
            return;
        };
        if size >= TABLE_SIZE && self.allowed.is_none() {
            return;
        }
        if size < need {
            // What it holds may be evicted: start again empty, and index nothing more.
            self.update = Some(0);
            self.plain = true;
            self.at.clear();
        } else {
            self.update = Some(size.min(TABLE_SIZE));
        }
        self.allowed = Some(size);
    }

    /// Line `line`'s head, into `out`.
    pub fn encode(&mut self, heads: &Heads, line: usize, out: &mut Vec<u8>) {
        if let Some(size) = self.update.take() {
            put_integer(out, size, 5, 0x20);
        }
        if !self.settled || self.plain || heads.table_size > TABLE_SIZE {
            out.extend_from_slice(&heads.plain[line]);
            return;
        }
        if self.at.len() < heads.fields.len() {
            self.at.resize(heads.fields.len(), None);
        }
        for part in &heads.lines[line] {
            match *part {
                Part::Static(byte) => out.push(byte),
                Part::Field(n) => match self.at[n] {
                    Some(at) => put_integer(out, 62 + self.inserted - 1 - at, 7, 0x80),
                    None => {
                        out.extend_from_slice(&heads.fields[n]);
                        self.at[n] = Some(self.inserted);
                        self.inserted += 1;
                    }
                },
            }
        }
    }
}

/// A block that is not valid HPACK: the connection's error (COMPRESSION_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// What a load test reads of a head.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Head {
    pub status: Option<u32>,
    pub grpc: Option<u32>,
}

/// A string of a field: borrowed from the block, or shared with the table and the memory.
enum Text<'b> {
    Raw(&'b [u8]),
    Shared(Rc<[u8]>),
}

impl Text<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Text::Raw(b) => b,
            Text::Shared(b) => b,
        }
    }

    fn shared(self) -> Rc<[u8]> {
        match self {
            Text::Raw(b) => b.into(),
            Text::Shared(b) => b,
        }
    }
}

struct Entry {
    name: Rc<[u8]>,
    value: Rc<[u8]>,
}

impl Entry {
    fn size(&self) -> usize {
        self.name.len() + self.value.len() + ENTRY_OVERHEAD
    }
}

/// One connection's decoding context.
pub struct Decoder {
    /// [`STATIC`], shared with the entries that take its names.
    statics: Vec<Entry>,
    /// Newest first: index 62 is `table[0]`.
    table: VecDeque<Entry>,
    size: usize,
    max: usize,
    huffman: HuffmanDecoder,
    /// Strings by their encoding (length prefix and bytes), decoded.
    strings: HashMap<Vec<u8>, Rc<[u8]>>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    pub fn new() -> Decoder {
        let shared = |s: &str| -> Rc<[u8]> { s.as_bytes().into() };
        Decoder {
            statics: STATIC
                .iter()
                .map(|(n, v)| Entry {
                    name: shared(n),
                    value: shared(v),
                })
                .collect(),
            table: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
            huffman: HuffmanDecoder::new(),
            strings: HashMap::new(),
        }
    }

    /// Decodes one whole header block.
    pub fn decode(&mut self, block: &[u8]) -> Result<Head, Malformed> {
        let mut head = Head::default();
        let mut at = 0;
        while at < block.len() {
            let first = block[at];
            at = match first {
                0x80.. => {
                    let (index, next) = integer(block, at, 7)?;
                    let entry = self.entry(index)?;
                    read(&mut head, &entry.name, &entry.value);
                    next
                }
                0x40..=0x7f => self.literal(block, at, 6, true, &mut head)?,
                0x20..=0x3f => {
                    let (max, next) = integer(block, at, 5)?;
                    if max > TABLE_SIZE {
                        return Err(Malformed);
                    }
                    self.max = max;
                    self.evict(0);
                    next
                }
                _ => self.literal(block, at, 4, false, &mut head)?,
            };
        }
        Ok(head)
    }

    /// Entry `index` of the static or the dynamic table.
    fn entry(&self, index: usize) -> Result<&Entry, Malformed> {
        match index {
            0 => Err(Malformed),
            1..=61 => Ok(&self.statics[index - 1]),
            _ => self.table.get(index - 62).ok_or(Malformed),
        }
    }

    /// A literal field at `at` whose name index has a `prefix`-bit prefix; `index`: with
    /// incremental indexing. Returns where it ends.
    fn literal(
        &mut self,
        block: &[u8],
        at: usize,
        prefix: u8,
        index: bool,
        head: &mut Head,
    ) -> Result<usize, Malformed> {
        let (name_index, at) = integer(block, at, prefix)?;
        let (name, at) = match name_index {
            0 => self.string(block, at, index)?,
            i => (Text::Shared(self.entry(i)?.name.clone()), at),
        };
        let (value, next) = self.string(block, at, index)?;
        read(head, name.bytes(), value.bytes());
        if index {
            self.insert(Entry {
                name: name.shared(),
                value: value.shared(),
            });
        }
        Ok(next)
    }

    /// The string literal at `at`, and where it ends: borrowed where it is plain and not
    /// `kept` in the table; Huffman-coded ones decoded once and remembered.
    fn string<'b>(
        &mut self,
        block: &'b [u8],
        at: usize,
        kept: bool,
    ) -> Result<(Text<'b>, usize), Malformed> {
        let huffman = *block.get(at).ok_or(Malformed)? & 0x80 != 0;
        let (len, start) = integer(block, at, 7)?;
        let end = start.checked_add(len).ok_or(Malformed)?;
        let bytes = block.get(start..end).ok_or(Malformed)?;
        if !huffman && !kept {
            return Ok((Text::Raw(bytes), end));
        }
        let encoded = &block[at..end];
        if let Some(known) = self.strings.get(encoded) {
            return Ok((Text::Shared(known.clone()), end));
        }
        let decoded: Rc<[u8]> = if huffman {
            self.huffman.decode(bytes).map_err(|_| Malformed)?.into()
        } else {
            bytes.into()
        };
        if encoded.len() <= REMEMBERED_BYTES {
            if self.strings.len() >= REMEMBERED_STRINGS {
                self.strings.clear();
            }
            self.strings.insert(encoded.to_vec(), decoded.clone());
        }
        Ok((Text::Shared(decoded), end))
    }

    fn insert(&mut self, entry: Entry) {
        let size = entry.size();
        self.evict(size);
        if size <= self.max {
            self.size += size;
            self.table.push_front(entry);
        }
    }

    /// Drops the oldest entries until `room` more fits under the table's size (all of them
    /// when it cannot).
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some(old) => self.size -= old.size(),
                None => break,
            }
        }
    }
}

/// Notes `name: value` in `head` if it is one a load test reads.
fn read(head: &mut Head, name: &[u8], value: &[u8]) {
    let number = || std::str::from_utf8(value).ok()?.parse().ok();
    match name {
        b":status" => head.status = number(),
        b"grpc-status" => head.grpc = number(),
        _ => {}
    }
}

/// The HPACK integer at `at` with a `prefix`-bit prefix (RFC 7541 §5.1), and where it ends.
fn integer(block: &[u8], at: usize, prefix: u8) -> Result<(usize, usize), Malformed> {
    let mask = (1usize << prefix) - 1;
    let mut value = usize::from(*block.get(at).ok_or(Malformed)?) & mask;
    let mut at = at + 1;
    if value < mask {
        return Ok((value, at));
    }
    let mut shift = 0u32;
    loop {
        let b = *block.get(at).ok_or(Malformed)?;
        at += 1;
        value = value
            .checked_add(usize::from(b & 0x7f) << shift)
            .ok_or(Malformed)?;
        if b & 0x80 == 0 {
            return Ok((value, at));
        }
        shift += 7;
        if shift > 21 {
            return Err(Malformed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `blocks` with ours and with loona-hpack's `Decoder`, block by block, and
    /// checks that both read the same `:status` and `grpc-status`.
    fn agree(blocks: &[Vec<u8>]) -> Vec<Head> {
        let mut ours = Decoder::new();
        let mut reference = loona_hpack::Decoder::new();
        blocks
            .iter()
            .map(|block| {
                let mut want = Head::default();
                reference
                    .decode_with_cb(block, |n, v| read(&mut want, &n, &v))
                    .unwrap();
                let got = ours.decode(block).unwrap();
                assert_eq!(got, want, "{block:02x?}");
                got
            })
            .collect()
    }

    fn line<'a>(path: &'a str, headers: &'a [(String, String)]) -> Line<'a> {
        Line {
            method: "GET",
            scheme: "https",
            authority: "lab.test",
            path,
            headers,
        }
    }

    /// The fields the server's decoder (loona-hpack's) reads off `block`.
    fn fields(server: &mut loona_hpack::Decoder<'_>, block: &[u8]) -> Vec<(String, String)> {
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        let fields = server.decode(block).unwrap();
        fields
            .into_iter()
            .map(|(n, v)| (text(n), text(v)))
            .collect()
    }

    #[test]
    fn request_heads_are_indexed_once_a_connection_and_read_back_whole() {
        let auth = [("authorization".to_string(), "Bearer x".to_string())];
        let lines = [line("/a", &auth), line("/b", &[]), line("/", &auth)];
        let heads = Heads::new(&lines);
        // The authority and the header are shared: four fields, not six.
        assert_eq!(heads.fields.len(), 4);
        let mut server = loona_hpack::Decoder::new();
        let mut encoder = Encoder::default();
        let mut sizes = Vec::new();
        for round in 0..3 {
            if round == 1 {
                encoder.settle(heads.table_size(), None);
            }
            for (i, l) in lines.iter().enumerate() {
                let mut block = Vec::new();
                encoder.encode(&heads, i, &mut block);
                let got = fields(&mut server, &block);
                let mut want = vec![
                    (":method".to_string(), "GET".to_string()),
                    (":scheme".into(), "https".into()),
                    (":authority".into(), "lab.test".into()),
                    (":path".into(), l.path.to_string()),
                ];
                want.extend(l.headers.iter().cloned());
                assert_eq!(got, want, "round {round} line {i}");
                sizes.push(block.len());
            }
        }
        // Before the server's SETTINGS: literals; then the first use of a field indexes it,
        // and from then on each field is a byte.
        assert_eq!(sizes[6..], [5, 4, 5]);
        assert!(sizes[0] > sizes[6] && sizes[3] > sizes[6]);
    }

    #[test]
    fn a_table_too_small_for_the_fields_gets_literals_and_a_size_update() {
        let heads = Heads::new(&[line("/a", &[])]);
        let mut server = loona_hpack::Decoder::new();
        server.set_max_allowed_table_size(16);
        let mut encoder = Encoder::default();
        encoder.settle(heads.table_size(), Some(16));
        let mut block = Vec::new();
        encoder.encode(&heads, 0, &mut block);
        assert_eq!(block[0], 0x20);
        assert_eq!(&block[1..], heads.plain(0));
        assert_eq!(fields(&mut server, &block)[3].1, "/a");
        // A table that shrinks under what was indexed: emptied, then literals only.
        let mut encoder = Encoder::default();
        encoder.settle(heads.table_size(), None);
        let mut block = Vec::new();
        encoder.encode(&heads, 0, &mut block);
        encoder.settle(heads.table_size(), Some(40));
        block.clear();
        encoder.encode(&heads, 0, &mut block);
        assert_eq!(block[0], 0x20);
        assert_eq!(&block[1..], heads.plain(0));
        // Fields that could never fit the default table are never indexed.
        let long = [("x-pad".to_string(), "p".repeat(5000))];
        let heads = Heads::new(&[line("/", &long)]);
        let mut encoder = Encoder::default();
        encoder.settle(heads.table_size(), None);
        block.clear();
        encoder.encode(&heads, 0, &mut block);
        assert_eq!(block, heads.plain(0));
    }

    #[test]
    fn the_static_table_is_the_references() {
        let mut reference = loona_hpack::Decoder::new();
        for (i, (name, value)) in STATIC.iter().enumerate() {
            let fields = reference.decode(&[0x80 | (i as u8 + 1)]).unwrap();
            assert_eq!(
                fields,
                [(name.as_bytes().to_vec(), value.as_bytes().to_vec())]
            );
        }
    }

    #[test]
    fn literals_indexed_by_one_response_are_read_by_the_next() {
        let mut encoder = loona_hpack::Encoder::new();
        let mut first = encoder.encode([
            (&b":status"[..], &b"200"[..]),
            (b"server", b"peer"),
            (b"grpc-status", b"14"),
        ]);
        // The encoder indexed the new fields: the second block refers to them (62, 63, 64).
        let second = encoder.encode([
            (&b":status"[..], &b"200"[..]),
            (b"server", b"peer"),
            (b"grpc-status", b"14"),
        ]);
        assert!(second.len() < first.len());
        let heads = agree(&[first.clone(), second.clone()]);
        assert_eq!(
            heads[1],
            Head {
                status: Some(200),
                grpc: Some(14)
            }
        );
        // A referenced entry that is not there is malformed, not a panic.
        assert_eq!(Decoder::new().decode(&second), Err(Malformed));
        first.truncate(first.len() - 1);
        assert_eq!(Decoder::new().decode(&first), Err(Malformed));
    }

    #[test]
    fn nginxs_huffman_literals_with_indexing_are_decoded_and_kept() {
        // nginx 1.22's head of a 404, as read off the wire: :status 404 indexed, then server,
        // date, content-type (Huffman, with incremental indexing) and content-length "153".
        let block: Vec<u8> = vec![
            0x8d, 0x76, 0x89, 0xaa, 0x63, 0x55, 0xe5, 0x80, 0xae, 0x21, 0x2e, 0x1f, 0x61, 0x96,
            0xdd, 0x6d, 0x5f, 0x4a, 0x09, 0xf5, 0x34, 0x9f, 0xba, 0x82, 0x00, 0x9c, 0x50, 0x0d,
            0x5c, 0x13, 0x97, 0x02, 0xfa, 0x98, 0xb4, 0x6f, 0x5f, 0x87, 0x49, 0x7c, 0xa5, 0x89,
            0xd3, 0x4d, 0x1f, 0x5c, 0x03, 0x31, 0x35, 0x33,
        ];
        // The same block over and over fills and turns the table, as a run does.
        let heads = agree(&vec![block.clone(); 200]);
        assert!(heads.iter().all(|h| h.status == Some(404)));
        let mut ours = Decoder::new();
        ours.decode(&block).unwrap();
        assert_eq!(ours.table.len(), 4);
        assert_eq!(&ours.table[3].name[..], b"server");
        assert_eq!(&ours.table[3].value[..], b"nginx/1.22.1");
        for _ in 0..100 {
            ours.decode(&block).unwrap();
        }
        assert!(ours.size <= TABLE_SIZE);
        // Four strings kept (three Huffman, one plain), each decoded once.
        assert_eq!(ours.strings.len(), 4);
    }

    #[test]
    fn a_size_update_evicts_and_a_size_past_ours_is_refused() {
        let mut encoder = loona_hpack::Encoder::new();
        let first = encoder.encode([(&b"x-a"[..], &b"1"[..])]);
        let mut ours = Decoder::new();
        ours.decode(&first).unwrap();
        assert_eq!(ours.table.len(), 1);
        // Size 0, then back to 4096: the table is emptied.
        assert_eq!(
            ours.decode(&[0x20, 0x3f, 0xe1, 0x1f, 0x88]).unwrap().status,
            Some(200)
        );
        assert!(ours.table.is_empty());
        assert_eq!(ours.decode(&[0x3f, 0xe2, 0x1f]), Err(Malformed));
    }
}
