//! The app every architecture serves: routes and the work each one stands for.
//!
//! [`App::route`] turns a request into a [`Route`]: either a ready response or a piece of
//! work (CPU, a wait, a store call). Blocking architectures finish all of it in the handling
//! thread with [`App::complete`]; event loops make waits timers and Redis calls non-blocking,
//! and call the same builders ([`App::guestbook_page`], [`App::sleep_done`]) when the work is
//! done, so the bytes on the wire are the same everywhere.

pub mod echo;
mod fib;
mod guestbook;
mod static_files;
pub mod work;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::http::{Method, Request, Response};
use crate::store::redis_pipe::{RedisAnswer, RedisRequest};
use crate::store::{GuestbookPage, LazyStore, Remark, StoreConfig, StoreError, View};

pub use fib::{fib, fib_cancellable, PLAIN_UP_TO};
pub use guestbook::{parse_remark, MAX_NAME_BYTES, MAX_PAGE, MAX_REMARK_BYTES};
pub use work::{Work, WorkSpec};

/// Largest `n` accepted by `/fib`.
pub const MAX_FIB: u32 = 50;
/// Longest wait accepted by `/sleep`, in milliseconds.
pub const MAX_SLEEP_MS: u64 = 60_000;

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Nothing left to do but send this.
    Ready(Response),
    /// CPU work: F(n) by naive recursion.
    Fib(u32),
    /// A wait of this many milliseconds.
    Sleep(u64),
    /// A described workload, drawn for this request: a wait, then CPU.
    Work(Work),
    /// Read a page of the guestbook (counting a visit when the view says so) and render it.
    GuestbookView(View),
    /// Store a remark.
    GuestbookPost(Remark),
}

impl Route {
    /// How long the route waits before its reply (or its CPU) can go on: `/sleep`'s wait, or
    /// what is left of `/work`'s.
    pub fn wait(&self) -> Duration {
        match self {
            Route::Sleep(ms) => Duration::from_millis(*ms),
            Route::Work(w) => w.wait_left(),
            _ => Duration::ZERO,
        }
    }
}

/// The shared, read-only part of the app.
#[derive(Debug, Clone)]
pub struct App {
    root: PathBuf,
    /// The root directory, open: static files are opened beneath it.
    root_dir: Arc<std::fs::File>,
    pub store: StoreConfig,
    /// `/work` requests drawn so far, shared with forked workers, so every request draws
    /// from its own place in the seeded sequence.
    draws: Arc<crate::sys::SharedCounter>,
}

/// Query parameter `name` of `path`'s request as a number in `0..=max`; a 400 that says so
/// when it is missing or out of range.
fn bounded(req: &Request, path: &str, name: &str, max: u64) -> Result<u64, Route> {
    match req.query_param(name).and_then(|n| n.parse::<u64>().ok()) {
        Some(n) if n <= max => Ok(n),
        _ => Err(Route::Ready(Response::text(
            400,
            format!("{path} needs {name} in 0..={max}\n"),
        ))),
    }
}

impl App {
    /// An app serving static files from `root` (must be a directory) and the guestbook from
    /// `store`.
    pub fn new(root: &Path, store: StoreConfig) -> anyhow::Result<App> {
        let root = root.canonicalize().map_err(|e| {
            crate::usage(format!(
                "static root {} is not usable ({e}); pass --root DIR",
                root.display()
            ))
        })?;
        if !root.is_dir() {
            return Err(crate::usage(format!(
                "static root {} is not a directory",
                root.display()
            )));
        }
        let root_dir = std::fs::File::open(&root).map_err(|e| {
            crate::usage(format!(
                "static root {} cannot be opened ({e})",
                root.display()
            ))
        })?;
        Ok(App {
            root,
            root_dir: Arc::new(root_dir),
            store,
            draws: Arc::new(crate::sys::SharedCounter::new()?),
        })
    }

    /// The site shipped with sweetspot.
    pub fn default_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("public")
    }

    /// Decides what a request needs.
    pub fn route(&self, req: &Request) -> Route {
        match (req.method, req.path.as_str()) {
            (Method::Get | Method::Head, "/hello") => {
                Route::Ready(Response::text(200, "Hello, World!"))
            }
            (Method::Get | Method::Head, "/fib") => match bounded(req, "/fib", "n", MAX_FIB.into())
            {
                Ok(n) => Route::Fib(n as u32),
                Err(refused) => refused,
            },
            (Method::Get | Method::Head, "/sleep") => {
                match bounded(req, "/sleep", "ms", MAX_SLEEP_MS) {
                    Ok(ms) => Route::Sleep(ms),
                    Err(refused) => refused,
                }
            }
            (Method::Get | Method::Head, "/work") => {
                match WorkSpec::parse(|name| req.query_param(name)) {
                    Ok(spec) => Route::Work(spec.draw(self.draws.fetch_add(1))),
                    Err(why) => Route::Ready(Response::text(400, why)),
                }
            }
            (Method::Get | Method::Head, "/guestbook") => {
                let page = match req.query_param("page") {
                    None => Some(1),
                    Some(p) => p.parse::<u64>().ok().filter(|p| (1..=MAX_PAGE).contains(p)),
                };
                match page {
                    Some(page) => Route::GuestbookView(View {
                        page,
                        count: req.method == Method::Get,
                    }),
                    None => Route::Ready(Response::text(
                        400,
                        format!("/guestbook?page= needs a page in 1..={MAX_PAGE}\n"),
                    )),
                }
            }
            (Method::Post, "/guestbook") => match parse_remark(&req.body) {
                Ok(remark) => Route::GuestbookPost(remark),
                Err((status, why)) => Route::Ready(Response::text(status, why)),
            },
            (Method::Post, _) => {
                Route::Ready(Response::error(405).with_header("Allow", "GET, HEAD"))
            }
            (Method::Get | Method::Head, path) => {
                Route::Ready(static_files::serve(&self.root, &self.root_dir, path))
            }
        }
    }

    /// Does the work of a route in the calling thread, blocking as long as it takes; a long
    /// `/fib` asks `cancel` now and then and gives up when it says so (`None`: no reply).
    pub fn complete(
        &self,
        route: Route,
        store: &mut LazyStore,
        cancel: &mut dyn FnMut() -> bool,
    ) -> Option<Response> {
        let resp = match route {
            Route::Ready(resp) => resp,
            Route::Fib(_) => return Self::compute(route, cancel),
            Route::Sleep(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                Self::sleep_done(ms)
            }
            Route::Work(w) => {
                std::thread::sleep(w.wait_left());
                return Self::compute(Route::Work(w.after_wait()), cancel);
            }
            Route::GuestbookView(view) => Self::guestbook_page(store.with(|c| c.visit(view))),
            Route::GuestbookPost(remark) => {
                Self::remark_stored(store.with(|c| c.add_remark(&remark)))
            }
        };
        Some(resp)
    }

    /// The CPU work of `/fib` or of `/work` (its wait over), in the calling thread, asking
    /// `cancel` now and then and giving up when it says so (`None`: no reply). Any other
    /// route is not CPU work: a caller's mistake.
    pub fn compute(route: Route, cancel: &mut dyn FnMut() -> bool) -> Option<Response> {
        match route {
            Route::Fib(n) => fib_response(n, cancel),
            Route::Work(w) => work::spin(w.cpu, cancel).then(|| w.done()),
            other => unreachable!("{other:?} is not CPU work"),
        }
    }

    /// What is left of a route once its wait is over: `/sleep`'s reply, or `/work`'s CPU.
    pub fn after_wait(route: Route) -> Route {
        match route {
            Route::Sleep(ms) => Route::Ready(Self::sleep_done(ms)),
            Route::Work(w) => Route::Work(w.after_wait()),
            other => other,
        }
    }

    /// The answer to `/sleep?ms=` once the wait is over.
    pub fn sleep_done(ms: u64) -> Response {
        Response::text(200, format!("slept {ms} ms\n"))
    }

    /// The guestbook page, or 503 when the store failed.
    pub fn guestbook_page(page: Result<GuestbookPage, StoreError>) -> Response {
        match page {
            Ok(page) => Response::new(200, "text/html; charset=utf-8", guestbook::render(&page)),
            Err(e) => store_unavailable(&e),
        }
    }

    /// What a guestbook route asks of a pipelined store (`None` for every other route).
    pub fn store_request(route: Route) -> Option<RedisRequest> {
        match route {
            Route::GuestbookPost(remark) => Some(RedisRequest::AddRemark(remark)),
            Route::GuestbookView(view) => Some(RedisRequest::Visit(view)),
            _ => None,
        }
    }

    /// The reply to a guestbook route once a pipelined store has answered it; a failed view
    /// or post answers the same 503.
    pub fn store_answered(answer: Result<RedisAnswer, StoreError>) -> Response {
        match answer {
            Ok(RedisAnswer::Page(page)) => Self::guestbook_page(Ok(page)),
            Ok(RedisAnswer::Added) => Self::remark_stored(Ok(())),
            Err(e) => Self::guestbook_page(Err(e)),
        }
    }

    /// The answer to a guestbook POST: 303 back to the page, or 503 when the store failed.
    pub fn remark_stored(result: Result<(), StoreError>) -> Response {
        match result {
            Ok(()) => Response::text(303, "remark stored\n").with_header("Location", "/guestbook"),
            Err(e) => store_unavailable(&e),
        }
    }
}

/// The answer to `/fib?n=`: computes it now, unless `cancel` (asked at every call above
/// [`PLAIN_UP_TO`]) says to give up: `None` then.
fn fib_response(n: u32, cancel: &mut dyn FnMut() -> bool) -> Option<Response> {
    fib_cancellable(n, cancel).map(|f| Response::text(200, f.to_string()))
}

fn store_unavailable(e: &StoreError) -> Response {
    eprintln!("sweetspot: guestbook: {e}");
    Response::error(503).with_header("Retry-After", "1")
}
