//! Static files under the root, and not one byte from outside it. The path is percent-decoded
//! once; NUL and any `..` segment are refused (so `%2e%2e%2f` is caught too). The file is opened
//! beneath the root in one system call that cannot leave it (openat2 with `RESOLVE_BENEATH`), or
//! on an older kernel canonicalised and checked to lie under the canonical root. A file of at
//! most [`INLINE_MAX`] is read whole and kept by the thread for the rest of that second
//! (`SmallFiles`), so its reply leaves in one send; a larger one is opened, not read, and the
//! architecture streams it in bounded chunks.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::http::{FileBody, Response};

/// Files up to this size are answered from memory (one read when asked for).
pub const INLINE_MAX: u64 = 16 * 1024;

/// The small files a thread has answered lately, per root and request path, each trusted for
/// the wall-clock second it was read in (as lighttpd's stat cache is): a popular page costs no
/// system call beyond its send, and a changed file shows within a second. At most
/// [`CACHE_BYTES`] per thread; past that the cache starts again.
#[derive(Default)]
struct SmallFiles {
    roots: HashMap<PathBuf, HashMap<String, Cached>>,
    bytes: usize,
}

struct Cached {
    body: Vec<u8>,
    content_type: &'static str,
    /// The coarse wall-clock second it was read in.
    second: u64,
}

/// The most bytes of small files one thread keeps.
const CACHE_BYTES: usize = 1024 * 1024;

thread_local! {
    static SMALL_FILES: RefCell<SmallFiles> = RefCell::default();
}

/// Answers a GET or HEAD for `path` (as sent, still encoded) from `root` (canonical), whose
/// directory `root_dir` is open.
pub fn serve(root: &Path, root_dir: &File, path: &str) -> Response {
    let second = crate::sys::coarse_unix_seconds();
    let cached = SMALL_FILES.with(|cache| {
        let cache = cache.borrow();
        let hit = cache.roots.get(root)?.get(path)?;
        (hit.second == second).then(|| Response::new(200, hit.content_type, hit.body.clone()))
    });
    if let Some(response) = cached {
        return response;
    }
    let opened = match open(root, root_dir, path) {
        Ok(opened) => opened,
        Err(status) => return Response::error(status),
    };
    let (file, name, len) = opened;
    let body = FileBody {
        file: Arc::new(file),
        len,
    };
    if len > INLINE_MAX {
        return Response::file(200, content_type(&name), body);
    }
    let mut bytes = Vec::with_capacity(len as usize);
    if body.read_chunk(0, &mut bytes).is_err() {
        return Response::error(404);
    }
    let content_type = content_type(&name);
    SMALL_FILES.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.bytes + bytes.len() > CACHE_BYTES {
            *cache = SmallFiles::default();
        }
        cache.bytes += bytes.len();
        let entry = Cached {
            body: bytes.clone(),
            content_type,
            second,
        };
        let old = cache
            .roots
            .entry(root.to_path_buf())
            .or_default()
            .insert(path.to_string(), entry);
        if let Some(old) = old {
            cache.bytes -= old.body.len();
        }
    });
    Response::new(200, content_type, bytes)
}

/// Opens the regular file `path` names under the root (a directory: its `index.html`): the
/// file, its name (for the Content-Type) and its length, or the status to answer.
fn open(root: &Path, root_dir: &File, path: &str) -> Result<(File, PathBuf, u64), u16> {
    let relative = relative_path(path)?;
    // One fstat per opened file says what it is and how long.
    let stat = |file: File| -> Result<(File, std::fs::Metadata), u16> {
        let meta = file.metadata().map_err(|_| 404u16)?;
        Ok((file, meta))
    };
    let regular = |(file, meta): (File, std::fs::Metadata)| -> Result<(File, u64), u16> {
        if meta.is_file() {
            Ok((file, meta.len()))
        } else {
            Err(404)
        }
    };
    let beneath = |rel: &Path| crate::sys::open_beneath(root_dir.as_fd(), rel);
    let target = if relative.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        relative.clone()
    };
    match beneath(&target) {
        Ok(file) => {
            let (file, meta) = stat(file)?;
            if !meta.is_dir() {
                let (file, len) = regular((file, meta))?;
                return Ok((file, relative, len));
            }
            let index = relative.join("index.html");
            let (file, len) = regular(stat(beneath(&index).map_err(|_| 404u16)?)?)?;
            Ok((file, index, len))
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            let real = resolve(root, path)?;
            let file = File::open(&real).map_err(|_| 404u16)?;
            let (file, len) = regular(stat(file)?)?;
            Ok((file, real, len))
        }
        Err(_) => Err(404),
    }
}

/// The request path as a path relative to the root: decoded, checked, without `.` segments.
fn relative_path(path: &str) -> Result<PathBuf, u16> {
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    if decoded.contains(&0) {
        return Err(400);
    }
    let decoded = String::from_utf8(decoded).map_err(|_| 400u16)?;
    let mut relative = PathBuf::new();
    for segment in decoded.split(['/', '\\']) {
        match segment {
            "" | "." => {}
            ".." => return Err(404),
            s => relative.push(s),
        }
    }
    Ok(relative)
}

/// Maps a request path to a regular file inside `root`, or the status to answer.
pub fn resolve(root: &Path, path: &str) -> Result<PathBuf, u16> {
    let candidate = root.join(relative_path(path)?);
    let inside = |p: &Path| -> Result<PathBuf, u16> {
        let real = p.canonicalize().map_err(|_| 404u16)?;
        if real.starts_with(root) {
            Ok(real)
        } else {
            Err(404)
        }
    };
    let mut real = inside(&candidate)?;
    if real.is_dir() {
        real = inside(&real.join("index.html"))?;
    }
    if real.is_file() {
        Ok(real)
    } else {
        Err(404)
    }
}

/// The Content-Type for a file, by extension.
pub fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "txt" | "md" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ico" => "image/x-icon",
        "webp" => "image/webp",
        "wasm" => "application/wasm",
        "pdf" => "application/pdf",
        "xml" => "application/xml",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until the coarse wall clock turns to its next second.
    fn next_second() {
        let second = crate::sys::coarse_unix_seconds();
        while crate::sys::coarse_unix_seconds() == second {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    #[test]
    fn a_changed_small_file_shows_within_a_second() {
        let root = crate::os::fresh_test_dir("static-cache");
        let root = root.canonicalize().unwrap();
        let root_dir = File::open(&root).unwrap();
        std::fs::write(root.join("a.txt"), "one").unwrap();
        assert_eq!(serve(&root, &root_dir, "/a.txt").body, b"one");
        std::fs::write(root.join("a.txt"), "two!").unwrap();
        next_second();
        let r = serve(&root, &root_dir, "/a.txt");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"two!"[..]));
        // Gone: 404 once its second is over.
        std::fs::remove_file(root.join("a.txt")).unwrap();
        next_second();
        assert_eq!(serve(&root, &root_dir, "/a.txt").status, 404);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn traversal_attempts_never_leave_the_root() {
        let base = crate::os::fresh_test_dir("static");
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(base.join("secret.txt"), "secret").unwrap();
        std::fs::write(root.join("index.html"), "home").unwrap();
        std::fs::write(root.join("sub/a.css"), "css").unwrap();
        std::os::unix::fs::symlink(base.join("secret.txt"), root.join("leak.txt")).unwrap();
        let root = root.canonicalize().unwrap();

        assert_eq!(resolve(&root, "/").unwrap(), root.join("index.html"));
        assert_eq!(
            resolve(&root, "/sub/a.css").unwrap(),
            root.join("sub/a.css")
        );
        // Out of the root, or not a file: 404 both ways.
        const EVIL: [&str; 6] = [
            "/../secret.txt",
            "/%2e%2e/secret.txt",
            "/sub/..%2f..%2fsecret.txt",
            "/%2e%2e%5csecret.txt",
            "/leak.txt",
            "/nothing",
        ];
        for evil in EVIL {
            assert_eq!(resolve(&root, evil), Err(404), "{evil}");
        }
        assert_eq!(resolve(&root, "/index.html%00.css"), Err(400));
        // The same through openat2 beneath the open root, as `serve` answers them.
        let root_dir = File::open(&root).unwrap();
        std::os::unix::fs::symlink("sub/a.css", root.join("inside.css")).unwrap();
        let body = |path: &str| {
            let r = serve(&root, &root_dir, path);
            (r.status, String::from_utf8_lossy(&r.body).into_owned())
        };
        assert_eq!(body("/"), (200, "home".to_string()));
        assert_eq!(body("/sub/a.css"), (200, "css".to_string()));
        assert_eq!(body("/inside.css"), (200, "css".to_string()));
        for evil in EVIL.into_iter().chain(["/sub"]) {
            assert_eq!(body(evil).0, 404, "{evil}");
        }
        assert_eq!(body("/index.html%00.css").0, 400);
        assert_eq!(content_type(Path::new("x.CSS")), "text/css; charset=utf-8");
        std::fs::remove_dir_all(base).unwrap();
    }
}
