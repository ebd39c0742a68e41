//! Stopping a model call in progress when its RPC session must end: the client's `-timeout`
//! expired, the client went away, or the server is stopping (docs/rpc.md "Timeouts").
//!
//! Model code runs on the session's thread, so the call is stopped from the session's watchdog
//! thread through the Mote session's `InterruptHandle` (docs/untrusted-models.md §4): the call
//! returns `Error::Cancelled` at its next VM call or backward jump. A call is *armed* under a lock before it
//! starts and disarmed (its handle cleared) under the same lock after it returns, so an interrupt
//! fired late, after the call returned, never cancels a later call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mote::InterruptHandle;

use crate::background::lock;

/// The model calls of one RPC session, and why they must stop.
pub(crate) struct Calls<'a> {
    /// The server is stopping.
    stop: &'a AtomicBool,
    /// The client's `-timeout` expired.
    expired: &'a AtomicBool,
    /// The client went away while a call ran (see [`watch`]).
    gone: AtomicBool,
    /// The handle of the Mote session whose call is running, if one is.
    armed: Mutex<Option<InterruptHandle>>,
}

impl<'a> Calls<'a> {
    pub(crate) fn new(stop: &'a AtomicBool, expired: &'a AtomicBool) -> Self {
        Calls {
            stop,
            expired,
            gone: AtomicBool::new(false),
            armed: Mutex::new(None),
        }
    }

    /// Whether the session is ending (server stop, client timeout, client gone): long work
    /// gives up, and no new model call starts.
    pub(crate) fn ending(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
            || self.expired.load(Ordering::SeqCst)
            || self.gone.load(Ordering::SeqCst)
    }

    /// Whether a model call is running.
    fn busy(&self) -> bool {
        lock(&self.armed).is_some()
    }

    /// Runs `call`, a call into the Mote session whose handle is `handle`, so that
    /// [`Calls::interrupt`] stops it. A session already ending does not start the call.
    pub(crate) fn run<T>(
        &self,
        handle: &InterruptHandle,
        call: impl FnOnce() -> mote::Result<T>,
    ) -> mote::Result<T> {
        {
            let mut armed = lock(&self.armed);
            // Checked under the lock: `interrupt` sets its flag before taking the lock, so
            // either this sees the flag or `interrupt` sees the armed handle.
            if self.ending() {
                return Err(mote::Error::Cancelled);
            }
            *armed = Some(handle.clone());
        }
        let r = call();
        let mut armed = lock(&self.armed);
        *armed = None;
        // An interrupt that landed after the call returned must not cancel the next one; under
        // the lock, `interrupt` cannot fire on this handle any more.
        handle.clear();
        r
    }

    /// Interrupts the call in progress, if any. The caller has set `stop` or `expired` first,
    /// so a call about to start sees it and does not start.
    pub(crate) fn interrupt(&self) {
        if let Some(h) = lock(&self.armed).as_ref() {
            h.interrupt();
        }
    }
}

/// How often the watchdog looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// The session's watchdog: runs until `done` is dropped (the session ended). When the server
/// stops it interrupts the running call; at `deadline` (the client's `-timeout`) it sets
/// `expired`, interrupts the running call and calls `on_expire` (which tells the client and
/// closes the socket). While a call runs it also asks `peer_gone` whether the client left
/// (see [`peer_gone`]); if so it interrupts the call, and the session ends when the call
/// returns, instead of computing for nobody and keeping the next client waiting.
pub(crate) fn watch(
    calls: &Calls<'_>,
    deadline: Option<Instant>,
    done: Receiver<()>,
    peer_gone: impl Fn() -> bool,
    on_expire: impl FnOnce(),
) {
    loop {
        let wait = deadline.map_or(POLL, |d| {
            d.saturating_duration_since(Instant::now()).min(POLL)
        });
        match done.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            // The session ended (nothing is ever sent).
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        if calls.stop.load(Ordering::SeqCst) {
            calls.interrupt();
            return;
        }
        if calls.busy() && peer_gone() {
            log::info!("the client went away during a call: interrupting it");
            calls.gone.store(true, Ordering::SeqCst);
            calls.interrupt();
            return;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            calls.expired.store(true, Ordering::SeqCst);
            calls.interrupt();
            on_expire();
            return;
        }
    }
}

/// Whether the client of `stream` has left while the server computes: its end of the stream
/// is closed (or reset), or what waits unread is exactly one `kShutdown` packet, which is how a
/// TVM client or a relaying server says goodbye before closing. A TVM client sends nothing else
/// while a call runs but answers to the server's own requests, which are never `kShutdown`.
/// Looks without consuming and without blocking (`MSG_PEEK | MSG_DONTWAIT` on this call only,
/// so the session's blocking reads are unchanged).
pub(crate) fn peer_gone(stream: &std::net::TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 16];
    // SAFETY: `buf` is writable for its length for the whole call, and the descriptor stays
    // open while `stream` is borrowed. MSG_PEEK leaves the bytes for the session's reader.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match n {
        0 => true,
        n if n < 0 => matches!(
            std::io::Error::last_os_error().kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        ),
        // A whole packet (length 4, code kShutdown) and nothing after it.
        12 => buf[..12] == crate::wire::frame(crate::wire::RpcCode::Shutdown, &[])[..],
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote::fuzzing::craft::{self, Entry, Instr};
    use mote::{LoadOptions, Model, Session, SessionOptions, Value};
    use std::sync::mpsc;

    /// `main()` loops forever (a backward `Goto`); `echo(x)` returns `x`.
    fn endless_and_echo() -> Session {
        let bytes = craft::model(&[
            craft::endless_main(),
            Entry::Vm {
                name: "echo".into(),
                params: vec!["x".into()],
                registers: 1,
                code: vec![Instr::Ret { reg: 0 }],
            },
        ]);
        let model = Model::load_from_memory_with(&bytes, LoadOptions::default().code_free(true))
            .expect("crafted model loads");
        // No instruction budget to speak of: only an interrupt ends `main`.
        let opts = SessionOptions {
            threads: Some(1),
            max_instructions: u64::MAX,
            ..SessionOptions::default()
        };
        model.session_with(opts).expect("session")
    }

    /// Interrupts `s` directly after 10 s, bypassing `Calls`: with the path under test broken,
    /// a test then fails on its time bound instead of hanging.
    fn backstop(s: &Session) {
        let h = s.interrupt_handle();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(10));
            h.interrupt();
        });
    }

    fn echo(calls: &Calls<'_>, s: &mut Session) -> mote::Result<Value> {
        let h = s.interrupt_handle();
        calls.run(&h, || s.call("echo", &[Value::Int(7)]))
    }

    fn assert_echo(r: mote::Result<Value>) {
        match r {
            Ok(Value::Int(7)) => {}
            other => panic!("echo(7) gave {other:?}"),
        }
    }

    /// The watchdog's timeout stops an endless call with `Cancelled`; the session's next call
    /// is unaffected.
    #[test]
    fn the_timeout_interrupts_an_endless_call_and_the_next_call_runs() {
        let (stop, expired) = (AtomicBool::new(false), AtomicBool::new(false));
        let calls = Calls::new(&stop, &expired);
        let mut s = endless_and_echo();
        let expired_told = AtomicBool::new(false);
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let start = Instant::now();
        let r = std::thread::scope(|scope| {
            scope.spawn(|| {
                watch(
                    &calls,
                    Some(Instant::now() + Duration::from_millis(300)),
                    done_rx,
                    || false,
                    || expired_told.store(true, Ordering::SeqCst),
                )
            });
            backstop(&s);
            let h = s.interrupt_handle();
            let r = calls.run(&h, || s.call("main", &[]));
            drop(done_tx);
            r
        });
        let took = start.elapsed();
        assert!(matches!(r, Err(mote::Error::Cancelled)), "{r:?}");
        assert!(took < Duration::from_secs(5), "took {took:?}");
        assert!(took >= Duration::from_millis(300), "took {took:?}");
        assert!(expired_told.load(Ordering::SeqCst));
        assert!(!s.interrupt_handle().is_pending());
        // The RPC session is over (`expired`), so this `Calls` refuses new calls...
        assert!(matches!(echo(&calls, &mut s), Err(mote::Error::Cancelled)));
        // ...but the Mote session itself is fine: the next call through a fresh guard runs.
        let (stop2, expired2) = (AtomicBool::new(false), AtomicBool::new(false));
        assert_echo(echo(&Calls::new(&stop2, &expired2), &mut s));
    }

    /// A server stop (the flag the CLI's signal handler sets) interrupts the call in progress.
    #[test]
    fn a_stop_interrupts_an_endless_call() {
        let (stop, expired) = (AtomicBool::new(false), AtomicBool::new(false));
        let calls = Calls::new(&stop, &expired);
        let mut s = endless_and_echo();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let start = Instant::now();
        let r = std::thread::scope(|scope| {
            scope.spawn(|| {
                watch(
                    &calls,
                    None,
                    done_rx,
                    || false,
                    || panic!("no timeout was set"),
                )
            });
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                stop.store(true, Ordering::SeqCst);
            });
            backstop(&s);
            let h = s.interrupt_handle();
            let r = calls.run(&h, || s.call("main", &[]));
            drop(done_tx);
            r
        });
        assert!(matches!(r, Err(mote::Error::Cancelled)), "{r:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(!expired.load(Ordering::SeqCst));
    }

    /// An interrupt fired after the call returned (a timer firing late) is dropped when the call
    /// is disarmed: the next call of the same RPC session runs.
    #[test]
    fn a_late_interrupt_does_not_cancel_the_next_call() {
        let (stop, expired) = (AtomicBool::new(false), AtomicBool::new(false));
        let calls = Calls::new(&stop, &expired);
        let mut s = endless_and_echo();
        let h = s.interrupt_handle();
        let r = calls.run(&h, || {
            let r = s.call("echo", &[Value::Int(7)]);
            // The watchdog fires just as the call returns, while it is still armed.
            calls.interrupt();
            r
        });
        assert_echo(r);
        assert!(!h.is_pending(), "the late interrupt is still pending");
        assert_echo(echo(&calls, &mut s));
        // Nothing armed: an interrupt then reaches no session.
        calls.interrupt();
        assert!(!h.is_pending());
        assert_echo(echo(&calls, &mut s));
    }

    /// A client that leaves during an endless call: the watchdog sees it, interrupts the call,
    /// and no later call starts in that session.
    #[test]
    fn a_client_gone_interrupts_an_endless_call() {
        let stop = AtomicBool::new(false);
        let expired = AtomicBool::new(false);
        let calls = Calls::new(&stop, &expired);
        let mut s = endless_and_echo();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let start = Instant::now();
        let r = std::thread::scope(|scope| {
            scope.spawn(|| {
                let gone = || start.elapsed() > Duration::from_millis(300);
                watch(&calls, None, done_rx, gone, || panic!("no timeout was set"))
            });
            backstop(&s);
            let h = s.interrupt_handle();
            let r = calls.run(&h, || s.call("main", &[]));
            drop(done_tx);
            r
        });
        assert!(matches!(r, Err(mote::Error::Cancelled)), "{r:?}");
        assert!(calls.ending() && !expired.load(Ordering::SeqCst));
        let h = s.interrupt_handle();
        let next = calls.run(&h, || s.call("echo", &[Value::Int(1)]));
        assert!(matches!(next, Err(mote::Error::Cancelled)), "{next:?}");
    }

    /// `peer_gone` on real sockets: quiet, a request's bytes, a goodbye packet with more after
    /// it are not a departure; a lone goodbye, a closed end and a reset are.
    #[test]
    fn peer_gone_reads_departures_and_nothing_else() {
        use std::io::Write;
        use std::net::{TcpListener, TcpStream};
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let pair = || {
            let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
            let (s, _) = l.accept().expect("accept");
            (c, s)
        };
        // Bytes sent on loopback arrive at once, but not necessarily before the peek.
        let settle = || std::thread::sleep(Duration::from_millis(50));
        let bye = crate::wire::frame(crate::wire::RpcCode::Shutdown, &[]);

        let (c, s) = pair();
        assert!(!peer_gone(&s), "a quiet client");
        let mut c = c;
        c.write_all(&crate::wire::frame(crate::wire::RpcCode::Return, &[0; 8]))
            .expect("write");
        settle();
        assert!(!peer_gone(&s), "a pending packet that is not a goodbye");

        let (mut c, s) = pair();
        c.write_all(&bye).expect("write");
        settle();
        assert!(peer_gone(&s), "a lone kShutdown packet");
        // Peeking consumed nothing: the session's reader still gets the whole packet.
        let mut got = [0u8; 12];
        std::io::Read::read_exact(&mut &s, &mut got).expect("read");
        assert_eq!(got[..], bye[..]);

        let (mut c, s) = pair();
        c.write_all(&bye).expect("write");
        c.write_all(&[1]).expect("write");
        settle();
        assert!(!peer_gone(&s), "a goodbye with more after it");

        let (c, s) = pair();
        drop(c);
        settle();
        assert!(peer_gone(&s), "a closed end");

        let (c, s) = pair();
        // SO_LINGER 0: close sends a reset instead of a FIN.
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        use std::os::fd::AsRawFd;
        // SAFETY: `linger` is a valid `struct linger` for the length given; the descriptor is
        // open while `c` lives.
        let rc = unsafe {
            libc::setsockopt(
                c.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0);
        drop(c);
        settle();
        assert!(peer_gone(&s), "a reset");
    }
}
