//! The daemon's stop, as a future: one [`Shutdown`] is triggered once and everything that runs
//! until it either awaits it (tokio tasks) or reads its flag (the forwarding threads); the
//! control plane's servers stop accepting and drain with a bound ([`serve`]).
//!
//! # Who triggers it
//! - SIGINT or SIGTERM, seen by the control loop as a future
//!   ([`super::signals::StopSignals`]);
//! - the end of a forwarding thread, whether it returns, fails or panics: each holds a
//!   [`TriggerOnDrop`], so one worker gone stops the others (the control loop awaits
//!   [`Shutdown::triggered`] rather than looking at the threads every tick);
//! - the daemon itself on an error after the workers started (its worker set triggers and
//!   joins when dropped).
//!
//! Triggering twice is harmless: the flag only goes from false to true.
//!
//! # Who waits for it, and why the drain is complete
//! - **Forwarding threads** read [`Shutdown::flag`] once per loop turn (no tick: the check
//!   is part of the hot loop) and then drain their own queues, bounded by the worker (at most
//!   1 s, the rest counted as `shutdown` drops). The daemon joins every one of them before it
//!   detaches XDP, so no socket is bound to a queue when the program goes. Once they are
//!   joined, each port whose link agent sent an LLDPDU sends the TTL-0 one
//!   ([`crate::linkup::shared::LinkShared::send_shutdown_lldpdu`]): the agents ran in the
//!   leader, and only now can no regular LLDPDU follow it.
//! - **Servers** (status socket, metrics) `select!` on accept against
//!   [`Shutdown::triggered`]. The moment it resolves they stop accepting and drop the
//!   listener (a client connecting later is refused, not left waiting in the backlog), then
//!   wait for the connections already accepted, each answered within [`ANSWER_TIMEOUT`], for
//!   at most [`DRAIN`]. A connection still open then (a client that sent nothing, or reads
//!   slowly) is aborted: its task is dropped and the socket closed. So a server returns at
//!   most [`DRAIN`] after the trigger, and the daemon awaits every server before it joins
//!   the workers.
//! - **Threads blocked in a system call** (the carrier watch, in `poll` on its netlink
//!   socket) are woken by an eventfd when the daemon drops their handle
//!   ([`super::carrier::CarrierWatch`]), after the workers are joined and before XDP is
//!   detached; no timeout is involved.
//!
//! A second SIGINT/SIGTERM during the drain changes nothing: the handlers stay installed (the
//! process is not killed half-drained) and every wait above is already bounded.
//!
//! The waiting side cannot miss a trigger: [`Shutdown::triggered`] registers for the wake-up
//! before it reads the flag, and [`Shutdown::trigger`] sets the flag before it wakes.

use std::{
    future::Future,
    io,
    ops::Deref,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use tokio::{sync::Notify, task::JoinSet};

/// How long a server waits after a failed accept (EMFILE, ENOMEM, ...) before the next.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// How long one connection may take, from accept to the end of its answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections a server answers at once; more are closed as they come.
pub const MAX_CONNECTIONS: usize = 64;

/// How long the connections in flight at shutdown get to finish before they are aborted.
pub const DRAIN: Duration = Duration::from_secs(1);

/// The daemon's one stop: set once, seen by threads as a flag and by tasks as a future.
#[derive(Debug, Default)]
pub struct Shutdown {
    flag: AtomicBool,
    wake: Notify,
}

impl Shutdown {
    /// Stops everything that watches this shutdown. Callable from any thread, any number of
    /// times.
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    /// True once triggered: what a thread in a hot loop reads each turn.
    pub fn flag(&self) -> &AtomicBool {
        &self.flag
    }

    /// Resolves once [`Shutdown::trigger`] has been called (at once if it already was).
    pub async fn triggered(&self) {
        let notified = self.wake.notified();
        tokio::pin!(notified);
        // Registered before the flag is read, so a trigger between the two still wakes us.
        notified.as_mut().enable();
        if self.flag.load(Ordering::SeqCst) {
            return;
        }
        notified.await;
    }

    /// A guard that triggers this shutdown when dropped: a thread that holds it stops the
    /// daemon when it ends, whether it returns or panics.
    pub fn trigger_on_drop(self: Arc<Self>) -> TriggerOnDrop {
        TriggerOnDrop(self)
    }
}

/// Triggers its [`Shutdown`] when dropped (see [`Shutdown::trigger_on_drop`]).
#[derive(Debug)]
pub struct TriggerOnDrop(Arc<Shutdown>);

impl Deref for TriggerOnDrop {
    type Target = Shutdown;

    fn deref(&self) -> &Shutdown {
        &self.0
    }
}

impl Drop for TriggerOnDrop {
    fn drop(&mut self) {
        self.0.trigger();
    }
}

/// A listening socket [`serve`] takes connections from.
pub trait Listener {
    /// One accepted connection.
    type Conn: Send + 'static;

    /// The next connection (cancel-safe: dropping the future loses no connection).
    fn accept(&self) -> impl Future<Output = io::Result<Self::Conn>>;
}

impl Listener for tokio::net::TcpListener {
    type Conn = tokio::net::TcpStream;

    async fn accept(&self) -> io::Result<Self::Conn> {
        Ok(tokio::net::TcpListener::accept(self).await?.0)
    }
}

impl Listener for tokio::net::UnixListener {
    type Conn = tokio::net::UnixStream;

    async fn accept(&self) -> io::Result<Self::Conn> {
        Ok(tokio::net::UnixListener::accept(self).await?.0)
    }
}

/// Answers each connection on `listener` with `answer` (in a task of its own, bounded by
/// [`ANSWER_TIMEOUT`]) until `shutdown` is triggered; then closes the listener and gives the
/// connections in flight [`DRAIN`] to finish before aborting them. A failed accept is
/// logged and retried after `ACCEPT_RETRY` (100 ms).
pub async fn serve<L, A, F>(listener: L, shutdown: &Shutdown, answer: A)
where
    L: Listener,
    A: Fn(L::Conn) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let mut conns = JoinSet::new();
    let (mut refused, mut warned) = (0u64, None);
    loop {
        tokio::select! {
            biased;
            () = shutdown.triggered() => break,
            // Finished connections are reaped as they end, so the set holds only live ones.
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                // Each connection holds a descriptor for up to ANSWER_TIMEOUT: without a bound,
                // clients that connect and say nothing would take them all (the reload's file,
                // the status socket with them). Beyond the bound a connection is closed at once.
                Ok(conn) if conns.len() >= MAX_CONNECTIONS => {
                    drop(conn);
                    refused += 1;
                    if warned.is_none_or(|t: Instant| t.elapsed() >= Duration::from_secs(10)) {
                        tracing::warn!(
                            open = conns.len(),
                            refused,
                            "connections beyond {MAX_CONNECTIONS} at once closed unanswered"
                        );
                        warned = Some(Instant::now());
                    }
                }
                Ok(conn) => {
                    conns.spawn(tokio::time::timeout(ANSWER_TIMEOUT, answer(conn)));
                }
                // Out of descriptors or memory: the listener stays ready, so retrying at once
                // would spin a core and log without end. Wait, still answering a stop.
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; retrying in 100 ms");
                    tokio::select! {
                        () = shutdown.triggered() => break,
                        () = tokio::time::sleep(ACCEPT_RETRY) => {}
                    }
                }
            },
        }
    }
    drop(listener);
    let drained = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(DRAIN, drained).await.is_err() {
        tracing::debug!(
            open = conns.len(),
            "connections still open at shutdown: closed"
        );
    }
    // Dropping the set aborts what is left.
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn triggered_resolves_whether_the_trigger_comes_before_or_after() {
        let rt = runtime();
        let before = Shutdown::default();
        before.trigger();
        before.trigger();
        assert!(before.flag().load(Ordering::SeqCst));
        rt.block_on(before.triggered());

        let after = Arc::new(Shutdown::default());
        let other = after.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            other.trigger();
        });
        assert!(!after.flag().load(Ordering::SeqCst));
        rt.block_on(after.triggered());
        assert!(after.flag().load(Ordering::SeqCst));
        t.join().unwrap();
    }

    #[test]
    fn a_thread_that_ends_or_panics_triggers_its_guard() {
        for panics in [false, true] {
            let shutdown = Arc::new(Shutdown::default());
            let guard = shutdown.clone().trigger_on_drop();
            let t = std::thread::spawn(move || {
                assert!(!guard.flag().load(Ordering::SeqCst));
                assert!(!panics, "a worker bug");
            });
            assert_eq!(t.join().is_err(), panics);
            assert!(shutdown.flag().load(Ordering::SeqCst));
        }
    }

    /// A Unix socket's path in a fresh directory of its own, which goes when this is dropped,
    /// whether the test passed or not.
    struct SocketPath {
        dir: std::path::PathBuf,
        sock: std::path::PathBuf,
    }

    impl AsRef<std::path::Path> for SocketPath {
        fn as_ref(&self) -> &std::path::Path {
            &self.sock
        }
    }

    impl Drop for SocketPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// A bound Unix listener in a fresh directory, and its path.
    fn listener(name: &str) -> (tokio::net::UnixListener, SocketPath) {
        let dir =
            std::env::temp_dir().join(format!("lossless-shutdown-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("sock");
        let l = tokio::net::UnixListener::bind(&sock).unwrap();
        (l, SocketPath { dir, sock })
    }

    /// An echo server on a fresh listener named `name`, serving until `shutdown` (inside the
    /// runtime), and the listener's path.
    fn echo_server(
        name: &str,
        shutdown: &Arc<Shutdown>,
    ) -> (tokio::task::JoinHandle<()>, SocketPath) {
        let (l, path) = listener(name);
        let shutdown = shutdown.clone();
        (
            tokio::spawn(async move { serve(l, &shutdown, echo).await }),
            path,
        )
    }

    /// Echoes one byte back.
    async fn echo(mut conn: tokio::net::UnixStream) {
        let mut b = [0u8; 1];
        if conn.read_exact(&mut b).await.is_ok() {
            let _ = conn.write_all(&b).await;
        }
    }

    #[test]
    fn serve_answers_until_triggered_then_finishes_what_is_in_flight() {
        let rt = runtime();
        let shutdown = Arc::new(Shutdown::default());
        rt.block_on(async {
            let (server, path) = echo_server("flight", &shutdown);
            let mut c = tokio::net::UnixStream::connect(&path).await.unwrap();
            c.write_all(b"a").await.unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"a");
            // Accepted but not yet asked when the stop comes: still answered.
            let mut late = tokio::net::UnixStream::connect(&path).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            shutdown.trigger();
            late.write_all(b"b").await.unwrap();
            late.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"b");
            server.await.unwrap();
            // The listener is closed: nobody accepts any more.
            assert!(tokio::net::UnixStream::connect(&path).await.is_err());
        });
    }

    #[test]
    fn serve_closes_a_silent_connection_after_the_drain_bound() {
        let rt = runtime();
        let shutdown = Arc::new(Shutdown::default());
        rt.block_on(async {
            let (server, path) = echo_server("silent", &shutdown);
            let mut silent = tokio::net::UnixStream::connect(&path).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            let start = Instant::now();
            shutdown.trigger();
            server.await.unwrap();
            let took = start.elapsed();
            assert!(took >= DRAIN && took < DRAIN * 2, "{took:?}");
            let mut b = [0u8; 1];
            assert_eq!(silent.read(&mut b).await.unwrap(), 0, "closed");
        });
    }

    /// Connections beyond the bound are closed at once, so silent clients cannot take every
    /// descriptor; one that ends makes room for the next.
    #[test]
    fn serve_closes_connections_beyond_the_bound() {
        let rt = runtime();
        let shutdown = Arc::new(Shutdown::default());
        rt.block_on(async {
            let (server, path) = echo_server("bound", &shutdown);
            let mut silent = Vec::new();
            for _ in 0..MAX_CONNECTIONS {
                silent.push(tokio::net::UnixStream::connect(&path).await.unwrap());
            }
            let mut b = [0u8; 1];
            let mut extra = tokio::net::UnixStream::connect(&path).await.unwrap();
            let closed = tokio::time::timeout(Duration::from_secs(1), extra.read(&mut b)).await;
            assert_eq!(closed.unwrap().unwrap(), 0, "closed unanswered");
            drop(silent.pop());
            tokio::time::sleep(Duration::from_millis(20)).await;
            let mut next = tokio::net::UnixStream::connect(&path).await.unwrap();
            next.write_all(b"n").await.unwrap();
            next.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"n");
            shutdown.trigger();
            server.await.unwrap();
        });
    }

    /// A listener whose every accept fails, as one out of descriptors does.
    struct Failing(Arc<std::sync::atomic::AtomicUsize>);

    impl Listener for Failing {
        type Conn = ();

        async fn accept(&self) -> io::Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            // Yield, so a server that retried at once would spin here rather than hang the
            // runtime, and the count below would say so.
            tokio::task::yield_now().await;
            Err(io::Error::from_raw_os_error(libc::EMFILE))
        }
    }

    #[test]
    fn serve_waits_between_failed_accepts_and_still_stops() {
        let rt = runtime();
        let shutdown = Arc::new(Shutdown::default());
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        rt.block_on(async {
            let server = tokio::spawn({
                let (shutdown, calls) = (shutdown.clone(), calls.clone());
                async move { serve(Failing(calls), &shutdown, |()| async {}).await }
            });
            tokio::time::sleep(Duration::from_millis(350)).await;
            let start = Instant::now();
            shutdown.trigger();
            server.await.unwrap();
            // Stopped in the middle of a retry wait, not after it.
            assert!(start.elapsed() < ACCEPT_RETRY, "{:?}", start.elapsed());
        });
        let n = calls.load(Ordering::SeqCst);
        assert!((2..=6).contains(&n), "{n} accepts in 350 ms");
    }
}
