//! `--urls FILE`: many requests in one run, taken round robin on every connection. The file's
//! lines are parsed here ([`parse_url_list`], the format with it) into a [`UrlList`], which is
//! serialized once into a [`RequestSet`] the engine sends from without allocating; each
//! connection keeps its place in the rotation with a [`RoundRobin`]. The per-line counts and
//! percentiles are kept by `stats::urls`.

use std::ops::Range;
use std::path::Path;

use crate::load::source::request::{read_body_file, RequestBytes};
use crate::load::target::Target;

/// The most request lines a `--urls` file may hold.
pub const MAX_URL_LINES: usize = 1000;
/// The largest `--urls` file read.
pub const MAX_URL_FILE_BYTES: u64 = 16 << 20;
/// The most bytes the serialized requests (bodies included, each pipelined window once) take.
pub const MAX_REQUEST_SET_BYTES: usize = 64 << 20;

/// One request line of a `--urls` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlRequest {
    /// 1-based line number in the file.
    pub line: usize,
    pub method: String,
    pub path_and_query: String,
    /// The `Host` header: the authority as the line (or the TARGET) wrote it.
    pub host_header: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl UrlRequest {
    /// How reports name the request: `POST /guestbook`.
    pub fn label(&self) -> String {
        format!("{} {}", self.method, self.path_and_query)
    }
}

/// A parsed `--urls` file: its requests and the one host and port they go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlList {
    /// The file as named on the command line, for messages.
    pub file: String,
    pub host: String,
    pub port: u16,
    /// The `Host` header of path-only lines.
    pub host_header: String,
    /// `https://`: every line goes over TLS (one scheme per run, like one host:port).
    pub tls: bool,
    pub requests: Vec<UrlRequest>,
}

impl UrlList {
    /// The run's target: the host and port every line uses (its path is the first line's).
    pub fn target(&self) -> Target {
        Target::Http {
            host: self.host.clone(),
            port: self.port,
            path_and_query: self.requests[0].path_and_query.clone(),
            host_header: self.host_header.clone(),
            tls: self.tls,
        }
    }

    /// What the report names as the target: `http://HOST:PORT (--urls, 3 requests)`.
    pub fn describe(&self) -> String {
        format!(
            "{}://{} (--urls, {} request{})",
            if self.tls { "https" } else { "http" },
            self.host_header,
            self.requests.len(),
            if self.requests.len() == 1 { "" } else { "s" }
        )
    }

    /// The method the response framer is made for: HEAD when every line is HEAD (a response
    /// to HEAD has no body), else GET (the parser refuses a mix).
    pub fn framing_method(&self) -> &'static str {
        if self.requests.iter().all(|r| is_head(&r.method)) {
            "HEAD"
        } else {
            "GET"
        }
    }

    /// Serializes every request once, `-H` headers added, for a run with this keep-alive
    /// and pipeline depth. Fails (a usage error's text) past [`MAX_REQUEST_SET_BYTES`].
    pub fn request_set(
        &self,
        common_headers: &[(String, String)],
        keepalive: bool,
        pipeline: usize,
    ) -> Result<RequestSet, String> {
        let serialized: Vec<Vec<u8>> = self
            .requests
            .iter()
            .map(|r| {
                let mut headers: Vec<(String, String)> = common_headers
                    .iter()
                    .filter(|(name, _)| {
                        !r.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
                    })
                    .cloned()
                    .collect();
                headers.extend(r.headers.iter().cloned());
                let target = Target::Http {
                    host: self.host.clone(),
                    port: self.port,
                    path_and_query: r.path_and_query.clone(),
                    host_header: r.host_header.clone(),
                    tls: self.tls,
                };
                RequestBytes::build(&target, &r.method, &headers, &r.body, keepalive, 0, 1)
                    .batch(1)
                    .to_vec()
            })
            .collect();
        RequestSet::new(&serialized, pipeline).map_err(|e| format!("--urls {}: {e}", self.file))
    }
}

/// Reads and parses a `--urls` file. `target`: the command line's TARGET, if given. Errors are
/// one line (`FILE:LINE: what`), for a usage error.
pub fn read_url_file(path: &Path, target: Option<&Target>) -> Result<UrlList, String> {
    use crate::os::FileRefused;
    let name = path.display().to_string();
    let bytes = crate::os::read_regular_file(path, MAX_URL_FILE_BYTES).map_err(|e| match e {
        FileRefused::Io(e) => format!("--urls {name}: cannot read: {e}"),
        FileRefused::NotRegular => format!("--urls {name}: not a regular file"),
        FileRefused::TooLarge => {
            format!("--urls {name}: larger than {MAX_URL_FILE_BYTES} bytes (16 MiB)")
        }
    })?;
    let base_dir = path.parent().unwrap_or(Path::new("."));
    parse_url_list(&bytes, &name, base_dir, target)
}

/// The host and port a list uses, and where that came from (for messages).
struct Authority {
    host: String,
    port: u16,
    host_header: String,
    tls: bool,
    from: String,
}

/// Parses the text of a `--urls` file named `file`; body files are read relative to
/// `base_dir`. Pure but for reading body files.
///
/// One request per line; blank lines and lines whose first non-blank character is `#` are
/// skipped:
///
/// ```text
/// # METHOD is optional (GET); the URL is a /path or http://HOST[:PORT]/path
/// /hello
/// GET  /fib?n=10
/// POST /guestbook @remark.txt H:Content-Type: application/x-www-form-urlencoded
/// GET  http://127.0.0.1:8080/missing H:Accept: text/plain H:X-Trace: 1
/// ```
///
/// `[METHOD] URL [@BODYFILE] [H:Name: value]...`: words are separated by spaces or tabs, the
/// URL has none. `@BODYFILE` is the body (a regular file of at most 1 MiB; a relative path is
/// relative to the directory of the URL file). Everything from the first word starting with
/// `H:` is headers, each starting at a word `H:`; a header value may contain spaces but not a
/// space followed by `H:`. `-H` headers of the command line go on every line (a line's own
/// header of the same name wins). Every line must use one host and port: the TARGET's when one
/// is given (its path is not used), else the first absolute URL's; path-only lines go there.
/// A malformed line is one error `FILE:LINE: what is wrong` (exit 2).
pub fn parse_url_list(
    text: &[u8],
    file: &str,
    base_dir: &Path,
    target: Option<&Target>,
) -> Result<UrlList, String> {
    let mut authority = target.map(authority_of_target).transpose()?;
    let mut parsed = Vec::new();
    let mut body_bytes = 0usize;
    for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let at = |what: String| format!("{file}:{number}: {what}");
        let line = std::str::from_utf8(raw).map_err(|_| at("not UTF-8 text".into()))?;
        let line = line.strip_suffix('\r').unwrap_or(line).trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if parsed.len() == MAX_URL_LINES {
            return Err(at(format!(
                "more than {MAX_URL_LINES} requests (the most a --urls file may hold)"
            )));
        }
        let line = parse_line(line, base_dir).map_err(at)?;
        body_bytes += line.body.len();
        if body_bytes > MAX_REQUEST_SET_BYTES {
            return Err(at(format!(
                "the bodies so far take more than {MAX_REQUEST_SET_BYTES} bytes (64 MiB)"
            )));
        }
        if let Some(t) = &line.absolute {
            match &authority {
                None => authority = Some(authority_of(t, format!("line {number}"))),
                Some(a) => same_authority(a, t, &line.url_text).map_err(at)?,
            }
        }
        parsed.push((number, line));
    }
    check_head_alone(&parsed, file)?;
    if parsed.is_empty() {
        return Err(format!(
            "--urls {file}: no requests (every line is blank or a # comment)"
        ));
    }
    let authority = authority.ok_or_else(|| {
        format!(
            "--urls {file}: every line is a path: give the host as TARGET (http://HOST:PORT) or write one absolute URL"
        )
    })?;
    let requests = parsed
        .into_iter()
        .map(|(number, line)| UrlRequest {
            line: number,
            host_header: line
                .absolute
                .as_ref()
                .and_then(|t| http_parts(t).map(|(_, h)| h.to_string()))
                .unwrap_or_else(|| authority.host_header.clone()),
            method: line.method,
            path_and_query: line.path_and_query,
            headers: line.headers,
            body: line.body,
        })
        .collect();
    Ok(UrlList {
        file: file.to_string(),
        host: authority.host,
        port: authority.port,
        host_header: authority.host_header,
        tls: authority.tls,
        requests,
    })
}

/// The authority a `--urls` run's TARGET gives: host and port only, no path.
fn authority_of_target(t: &Target) -> Result<Authority, String> {
    let (path, _) =
        http_parts(t).ok_or_else(|| format!("--urls needs an http:// TARGET, not {t}"))?;
    if path != "/" {
        return Err(format!(
            "with --urls the TARGET gives only the host and port: drop its path {path:?}"
        ));
    }
    Ok(authority_of(t, "TARGET".to_string()))
}

/// `t`'s authority (an http or https target), noting where it came from.
fn authority_of(t: &Target, from: String) -> Authority {
    let (_, host_header) = http_parts(t).expect("parse_line keeps http targets only");
    Authority {
        host: t.host().to_string(),
        port: t.port(),
        host_header: host_header.to_string(),
        tls: t.is_tls(),
        from,
    }
}

/// An absolute URL must keep to the run's scheme, host and port.
fn same_authority(a: &Authority, t: &Target, url_text: &str) -> Result<(), String> {
    let scheme = |tls: bool| if tls { "https" } else { "http" };
    if a.tls != t.is_tls() {
        return Err(format!(
            "{url_text} is {}, but this run is {} (from {}): one scheme per run",
            scheme(t.is_tls()),
            scheme(a.tls),
            a.from
        ));
    }
    if !(a.host.eq_ignore_ascii_case(t.host()) && a.port == t.port()) {
        return Err(format!(
            "{url_text} is on {}, but this run goes to {} (from {}): one host:port per run",
            host_port(t.host(), t.port()),
            host_port(&a.host, a.port),
            a.from
        ));
    }
    Ok(())
}

/// A HEAD line's responses have no body, so it cannot share a file with other methods.
fn check_head_alone(parsed: &[(usize, ParsedLine)], file: &str) -> Result<(), String> {
    if let Some((number, _)) = parsed.iter().find(|(_, l)| is_head(&l.method)) {
        if let Some((other, _)) = parsed.iter().find(|(_, l)| !is_head(&l.method)) {
            return Err(format!(
                "{file}:{number}: a HEAD line cannot share a file with other methods (line {other}): its responses have no body"
            ));
        }
    }
    Ok(())
}

/// One line, parsed, before the host check.
struct ParsedLine {
    method: String,
    /// The URL as written.
    url_text: String,
    path_and_query: String,
    /// Set when the URL was absolute.
    absolute: Option<Target>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// `[METHOD] URL [@BODYFILE] [H:Name: value]...` (see the module header); the error says
/// what is wrong, without the line number.
fn parse_line(line: &str, base_dir: &Path) -> Result<ParsedLine, String> {
    let (words_part, headers_part) = split_headers(line);
    let mut words = words_part.split_ascii_whitespace();
    let first = words.next().unwrap_or("");
    let is_url = |w: &str| w.starts_with('/') || w.contains("://");
    let (method, url_text) = if is_url(first) {
        ("GET".to_string(), first)
    } else {
        if !first
            .bytes()
            .all(crate::load::source::request::is_token_byte)
        {
            return Err(format!("invalid method {first:?}"));
        }
        let url = words.next().ok_or_else(|| {
            format!("expected a URL (/path or http://HOST:PORT/path) after {first}")
        })?;
        if !is_url(url) {
            return Err(format!(
                "expected a URL (/path or http://HOST:PORT/path) after {first}, not {url:?}"
            ));
        }
        (first.to_string(), url)
    };
    let (path_and_query, absolute) = if url_text.starts_with('/') {
        if url_text.bytes().any(|b| b < b' ' || b == 0x7f) {
            return Err(format!("the path {url_text:?} contains control characters"));
        }
        (url_text.to_string(), None)
    } else {
        let target = Target::parse(url_text).map_err(|e| e.to_string())?;
        let Some((path, _)) = http_parts(&target) else {
            return Err(format!("{url_text}: a --urls line needs an http:// URL"));
        };
        (path.to_string(), Some(target))
    };
    let mut body_file: Option<&str> = None;
    for word in words {
        match word.strip_prefix('@') {
            Some("") => return Err("@ without a body file name".into()),
            Some(_) if body_file.is_some() => {
                return Err(format!("a second body file {word} (one per line)"))
            }
            Some(name) => body_file = Some(name),
            None => {
                return Err(format!(
                    "unexpected {word:?} after the URL (expected @BODYFILE or H:Name: value)"
                ))
            }
        }
    }
    let body = match body_file {
        None => Vec::new(),
        Some(name) => read_body_file(&base_dir.join(name).to_string_lossy())
            .map_err(|e| format!("@{name}: {e}"))?,
    };
    let headers = headers_part
        .iter()
        .map(|h| {
            crate::load::source::request::parse_header(h).map_err(|e| format!("header H:{h}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ParsedLine {
        method,
        url_text: url_text.to_string(),
        path_and_query,
        absolute,
        headers,
        body,
    })
}

/// Splits a line at its first word starting with `H:` into the words before it and the
/// headers (the text after each `H:` word start, up to the next).
fn split_headers(line: &str) -> (&str, Vec<&str>) {
    let starts: Vec<usize> = line
        .char_indices()
        .filter(|&(i, _)| {
            line[i..].starts_with("H:")
                && line[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c == ' ' || c == '\t')
        })
        .map(|(i, _)| i)
        .collect();
    let Some(&first) = starts.first() else {
        return (line, Vec::new());
    };
    let mut headers = Vec::with_capacity(starts.len());
    for (k, &start) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(line.len());
        headers.push(line[start + 2..end].trim());
    }
    (&line[..first], headers)
}

fn is_head(method: &str) -> bool {
    method.eq_ignore_ascii_case("HEAD")
}

/// The path and `Host` header of an HTTP target; `None` for any other kind.
fn http_parts(t: &Target) -> Option<(&str, &str)> {
    match t {
        Target::Http {
            path_and_query,
            host_header,
            ..
        } => Some((path_and_query, host_header)),
        _ => None,
    }
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Every request of a run, serialized once, in rotation order: entry `e` of the buffer is
/// request `e mod n`, and there are `n - 1 + pipeline` entries, so the `count <= pipeline`
/// requests starting at any line are one contiguous slice. One request (no `--urls`) is the
/// case `n = 1`: `pipeline` copies, as [`RequestBytes`] lays them out.
///
/// The requests are serialized once, before the run, into one buffer in which any `pipeline`
/// consecutive requests of the rotation are one contiguous slice: a batch is one write and the
/// hot path allocates nothing.
#[derive(Debug, Clone)]
pub struct RequestSet {
    bytes: Vec<u8>,
    /// Entry `e` is `bytes[offsets[e]..offsets[e + 1]]`.
    offsets: Vec<usize>,
    lines: usize,
    pipeline: usize,
}

impl RequestSet {
    /// Lays out `requests` (each one serialized request) for batches of up to `pipeline`.
    pub fn new(requests: &[Vec<u8>], pipeline: usize) -> Result<RequestSet, String> {
        let lines = requests.len();
        assert!(lines > 0, "a request set needs at least one request");
        let pipeline = pipeline.max(1);
        let entries = lines - 1 + pipeline;
        let total: usize = (0..entries).map(|e| requests[e % lines].len()).sum();
        if total > MAX_REQUEST_SET_BYTES {
            return Err(format!(
                "the requests take {total} bytes serialized for --pipeline {pipeline}, more than {MAX_REQUEST_SET_BYTES} (64 MiB)"
            ));
        }
        let mut bytes = Vec::with_capacity(total);
        let mut offsets = Vec::with_capacity(entries + 1);
        offsets.push(0);
        for e in 0..entries {
            bytes.extend_from_slice(&requests[e % lines]);
            offsets.push(bytes.len());
        }
        Ok(RequestSet {
            bytes,
            offsets,
            lines,
            pipeline,
        })
    }

    /// One request, as `--urls` is not given: [`RequestBytes`]' layout.
    pub fn single(request: &RequestBytes, pipeline: usize) -> Result<RequestSet, String> {
        RequestSet::new(&[request.batch(1).to_vec()], pipeline)
    }

    /// How many distinct requests rotate.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// The whole buffer; a batch is a range of it ([`RequestSet::window`]).
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The byte range of the `count` requests starting at line `first` (`first < lines`,
    /// `1 <= count <= pipeline`).
    #[inline]
    pub fn window(&self, first: usize, count: usize) -> Range<usize> {
        debug_assert!(first < self.lines && count <= self.pipeline);
        self.offsets[first]..self.offsets[first + count]
    }
}

/// Where a connection is in the rotation: connection `i` starts at line `i mod n`, and each
/// request takes the next line (see the module header).
///
/// Connection `i` (numbered over the whole run, segments included) starts at line `i mod n`
/// and its k-th request is line `(i + k) mod n`, whatever happens to the socket in between
/// (a reconnect keeps its place). So `c` connections at a time are spread over the lines, and
/// one connection sending `k` requests sends every line `floor(k/n)` or `ceil(k/n)` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundRobin {
    next: usize,
    lines: usize,
}

impl RoundRobin {
    /// The rotation of global connection `connection` over `lines` lines.
    pub fn new(connection: usize, lines: usize) -> RoundRobin {
        let lines = lines.max(1);
        RoundRobin {
            next: connection % lines,
            lines,
        }
    }

    /// Takes the next `count` lines and returns the first (the others follow it, mod n).
    #[inline]
    pub fn take(&mut self, count: usize) -> usize {
        let first = self.next;
        self.next = (first + count) % self.lines;
        first
    }

    /// The line `offset` places after `first`.
    #[inline]
    pub fn line_after(&self, first: usize, offset: usize) -> usize {
        (first + offset) % self.lines
    }

    /// The line the next request takes.
    pub fn peek(&self) -> usize {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory for body files, removed on drop.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("sweetspot-urls-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn target(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    fn parse(text: &str, t: Option<&str>) -> Result<UrlList, String> {
        let t = t.map(target);
        parse_url_list(
            text.as_bytes(),
            "u.txt",
            Path::new("/nonexistent"),
            t.as_ref(),
        )
    }

    #[test]
    fn parses_methods_paths_bodies_and_headers() {
        let dir = Scratch::new("parse");
        std::fs::write(dir.0.join("remark.txt"), "guest-name=a&guest-remarks=b").unwrap();
        let text = "# a comment\n\n/hello\r\n  GET\t/fib?n=10  \nPOST /guestbook @remark.txt H:Content-Type: application/x-www-form-urlencoded H:X-Note: two words\n   # indented comment\nDELETE http://127.0.0.1:8080/x\n";
        let list = parse_url_list(
            text.as_bytes(),
            "u.txt",
            &dir.0,
            Some(&target("http://127.0.0.1:8080")),
        )
        .unwrap();
        assert_eq!((list.host.as_str(), list.port), ("127.0.0.1", 8080));
        let lines: Vec<(usize, String)> =
            list.requests.iter().map(|r| (r.line, r.label())).collect();
        assert_eq!(
            lines,
            vec![
                (3, "GET /hello".to_string()),
                (4, "GET /fib?n=10".to_string()),
                (5, "POST /guestbook".to_string()),
                (7, "DELETE /x".to_string()),
            ]
        );
        let post = &list.requests[2];
        assert_eq!(post.body, b"guest-name=a&guest-remarks=b");
        assert_eq!(
            post.headers,
            vec![
                (
                    "Content-Type".to_string(),
                    "application/x-www-form-urlencoded".to_string()
                ),
                ("X-Note".to_string(), "two words".to_string()),
            ]
        );
        assert!(list
            .requests
            .iter()
            .all(|r| r.host_header == "127.0.0.1:8080"));
    }

    #[test]
    fn without_target_the_first_absolute_url_gives_the_host() {
        let list = parse(
            "/a\nhttp://LOCALHOST:9000/b\nhttp://localhost:9000/c\n",
            None,
        )
        .unwrap();
        assert_eq!((list.host.as_str(), list.port), ("LOCALHOST", 9000));
        assert_eq!(list.requests[0].host_header, "LOCALHOST:9000");
        assert_eq!(list.requests[2].host_header, "localhost:9000");
        assert_eq!(list.target().to_string(), "http://LOCALHOST:9000/a");
    }

    #[test]
    fn each_malformed_line_is_one_message_naming_the_line() {
        let t = Some("http://127.0.0.1:8080");
        for (text, target, message) in [
            ("/a\nG@T /x\n", t, "u.txt:2: invalid method \"G@T\""),
            ("GET\n", t, "u.txt:1: expected a URL (/path or http://HOST:PORT/path) after GET"),
            (
                "GET hello\n",
                t,
                "u.txt:1: expected a URL (/path or http://HOST:PORT/path) after GET, not \"hello\"",
            ),
            (
                "/a\n\n# c\nGET http://127.0.0.1:9090/b\n",
                t,
                "u.txt:4: http://127.0.0.1:9090/b is on 127.0.0.1:9090, but this run goes to 127.0.0.1:8080 (from TARGET): one host:port per run",
            ),
            (
                "http://a:1/x\nhttp://b:1/y\n",
                None,
                "u.txt:2: http://b:1/y is on b:1, but this run goes to a:1 (from line 1): one host:port per run",
            ),
            (
                "/a\nhttps://127.0.0.1:8080/b\n",
                t,
                "u.txt:2: https://127.0.0.1:8080/b is https, but this run is http (from TARGET): one scheme per run",
            ),
            (
                "GET /x extra\n",
                t,
                "u.txt:1: unexpected \"extra\" after the URL (expected @BODYFILE or H:Name: value)",
            ),
            ("POST /x @a @b\n", t, "u.txt:1: a second body file @b (one per line)"),
            ("POST /x @\n", t, "u.txt:1: @ without a body file name"),
            (
                "POST /x @missing.txt\n",
                t,
                "u.txt:1: @missing.txt: cannot read /nonexistent/missing.txt: No such file or directory (os error 2)",
            ),
            (
                "GET /x H:nocolon\n",
                t,
                "u.txt:1: header H:nocolon: expected \"Name: value\"",
            ),
            (
                "GET /x H:Bad Name: v\n",
                t,
                "u.txt:1: header H:Bad Name: v: invalid header name \"Bad Name\"",
            ),
            (
                "GET tcp://127.0.0.1:8080\n",
                t,
                "u.txt:1: tcp://127.0.0.1:8080: a --urls line needs an http:// URL",
            ),
            (
                "GET http://h:99999/x\n",
                t,
                "u.txt:1: invalid target \"http://h:99999/x\": invalid port \"99999\"",
            ),
            ("/a\x01b\n", t, "u.txt:1: the path \"/a\\u{1}b\" contains control characters"),
            ("\n# only comments\n\n", t, "--urls u.txt: no requests (every line is blank or a # comment)"),
            (
                "/a\n/b\n",
                None,
                "--urls u.txt: every line is a path: give the host as TARGET (http://HOST:PORT) or write one absolute URL",
            ),
            (
                "/a\n",
                Some("http://127.0.0.1:8080/hello"),
                "with --urls the TARGET gives only the host and port: drop its path \"/hello\"",
            ),
            ("/a\n", Some("tcp://127.0.0.1:8080"), "--urls needs an http:// TARGET, not tcp://127.0.0.1:8080"),
        ] {
            assert_eq!(parse(text, target).unwrap_err(), message, "{text:?}");
        }
        assert_eq!(
            parse("GET /a\nHEAD /b\n", t).unwrap_err(),
            "u.txt:2: a HEAD line cannot share a file with other methods (line 1): its responses have no body"
        );
        assert_eq!(
            parse("HEAD /a\nhead /b\n", t).unwrap().framing_method(),
            "HEAD"
        );
        assert_eq!(parse("POST /a\n/b\n", t).unwrap().framing_method(), "GET");
        let not_utf8 = parse_url_list(b"/a\n/\xff\n", "u.txt", Path::new("."), None);
        assert_eq!(not_utf8.unwrap_err(), "u.txt:2: not UTF-8 text");
        let many: String = (0..=MAX_URL_LINES).map(|i| format!("/p{i}\n")).collect();
        assert_eq!(
            parse(&many, t).unwrap_err(),
            "u.txt:1001: more than 1000 requests (the most a --urls file may hold)"
        );
    }

    #[test]
    fn body_paths_are_relative_to_the_file_and_the_file_must_be_regular() {
        let dir = Scratch::new("read");
        std::fs::create_dir_all(dir.0.join("sub")).unwrap();
        std::fs::write(dir.0.join("sub/body.txt"), "x=1").unwrap();
        std::fs::write(dir.0.join("sub/urls.txt"), "POST /p @body.txt\n").unwrap();
        let t = target("http://127.0.0.1:1");
        let list = read_url_file(&dir.0.join("sub/urls.txt"), Some(&t)).unwrap();
        assert_eq!(list.requests[0].body, b"x=1");
        assert_eq!(
            read_url_file(&dir.0, Some(&t)).unwrap_err(),
            format!("--urls {}: not a regular file", dir.0.display())
        );
    }

    #[test]
    fn request_set_windows_are_contiguous_rotations() {
        let reqs: Vec<Vec<u8>> = vec![b"A".to_vec(), b"BB".to_vec(), b"CCC".to_vec()];
        let set = RequestSet::new(&reqs, 4).unwrap();
        assert_eq!(set.lines(), 3);
        assert_eq!(set.bytes(), b"ABBCCCABBCCC");
        let w = |first, count| &set.bytes()[set.window(first, count)];
        assert_eq!(w(0, 1), b"A");
        assert_eq!(w(2, 1), b"CCC");
        assert_eq!(w(2, 2), b"CCCA");
        assert_eq!(w(2, 4), b"CCCABBCCC");
        assert_eq!(w(1, 4), b"BBCCCABB");
        let one = RequestSet::new(&[b"GET / HTTP/1.1\r\n\r\n".to_vec()], 3).unwrap();
        assert_eq!(one.bytes().len(), 3 * 18);
        assert_eq!(one.window(0, 2), 0..36);
        let big = vec![vec![0u8; 1 << 20]];
        assert_eq!(
            RequestSet::new(&big, 65).unwrap_err(),
            "the requests take 68157440 bytes serialized for --pipeline 65, more than 67108864 (64 MiB)"
        );
    }

    #[test]
    fn list_serializes_with_common_headers_under_line_headers() {
        let list = parse("POST http://127.0.0.1:8080/g H:X-A: line\n/h\n", None).unwrap();
        let common = vec![
            ("x-a".to_string(), "common".to_string()),
            ("X-B".to_string(), "b".to_string()),
        ];
        let set = list.request_set(&common, true, 1).unwrap();
        let text = String::from_utf8(set.bytes().to_vec()).unwrap();
        assert_eq!(
            text,
            "POST /g HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-B: b\r\nX-A: line\r\nContent-Length: 0\r\n\r\n\
             GET /h HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nx-a: common\r\nX-B: b\r\n\r\n"
        );
    }

    #[test]
    fn round_robin_starts_at_the_connection_and_wraps() {
        let mut rr = RoundRobin::new(4, 3);
        assert_eq!(rr.peek(), 1);
        let lines: Vec<usize> = (0..7).map(|_| rr.take(1)).collect();
        assert_eq!(lines, vec![1, 2, 0, 1, 2, 0, 1]);
        let mut batch = RoundRobin::new(2, 3);
        assert_eq!(batch.take(5), 2);
        assert_eq!(
            (0..5).map(|j| batch.line_after(2, j)).collect::<Vec<_>>(),
            vec![2, 0, 1, 2, 0]
        );
        assert_eq!(batch.peek(), 1);
        // Connection i's k-th request is line (i + k) mod n, for every i and k.
        for n in 1..5 {
            for i in 0..7 {
                let mut rr = RoundRobin::new(i, n);
                for k in 0..11 {
                    assert_eq!(rr.take(1), (i + k) % n, "n={n} i={i} k={k}");
                }
            }
        }
    }
}
