//! Static files under the root, and not one byte from outside it.
//!
//! The path is percent-decoded once, NUL is refused, any `..` segment is refused (encoded
//! slashes and dots are decoded first, so `%2e%2e%2f` is caught too), and the final file is
//! canonicalised (resolving symlinks) and must still lie under the canonical root. The file
//! is opened, not read: its bytes are streamed by the architecture in bounded chunks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::http::{FileBody, Response};

/// Answers a GET or HEAD for `path` (as sent, still encoded) from `root` (canonical).
pub fn serve(root: &Path, path: &str) -> Response {
    match resolve(root, path) {
        Ok(path) => {
            let opened = std::fs::File::open(&path).and_then(|f| Ok((f.metadata()?.len(), f)));
            match opened {
                Ok((len, file)) => Response::file(
                    200,
                    content_type(&path),
                    FileBody {
                        file: Arc::new(file),
                        len,
                    },
                ),
                Err(_) => Response::error(404),
            }
        }
        Err(status) => Response::error(status),
    }
}

/// Maps a request path to a regular file inside `root`, or the status to answer.
pub fn resolve(root: &Path, path: &str) -> Result<PathBuf, u16> {
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    if decoded.contains(&0) {
        return Err(400);
    }
    let decoded = String::from_utf8(decoded).map_err(|_| 400u16)?;
    let mut candidate = root.to_path_buf();
    for segment in decoded.split(['/', '\\']) {
        match segment {
            "" | "." => {}
            ".." => return Err(404),
            s => candidate.push(s),
        }
    }
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

    #[test]
    fn traversal_attempts_never_leave_the_root() {
        let base = std::env::temp_dir().join(format!("sweetspot-static-{}", std::process::id()));
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
        for evil in [
            "/../secret.txt",
            "/%2e%2e/secret.txt",
            "/sub/..%2f..%2fsecret.txt",
            "/%2e%2e%5csecret.txt",
            "/leak.txt",
            "/nothing",
        ] {
            assert_eq!(resolve(&root, evil), Err(404), "{evil}");
        }
        assert_eq!(resolve(&root, "/index.html%00.css"), Err(400));
        assert_eq!(content_type(Path::new("x.CSS")), "text/css; charset=utf-8");
        std::fs::remove_dir_all(base).unwrap();
    }
}
