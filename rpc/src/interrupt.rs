//! Stopping a model call in progress when its RPC session must end: the client's `-timeout`
//! expired or the server is stopping (docs/rpc.md "Timeouts").
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
    /// The handle of the Mote session whose call is running, if one is.
    armed: Mutex<Option<InterruptHandle>>,
}

impl<'a> Calls<'a> {
    pub(crate) fn new(stop: &'a AtomicBool, expired: &'a AtomicBool) -> Self {
        Calls {
            stop,
            expired,
            armed: Mutex::new(None),
        }
    }

    /// Whether the session is ending (server stop or client timeout): long work gives up, and
    /// no new model call starts.
    pub(crate) fn ending(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.expired.load(Ordering::SeqCst)
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
/// closes the socket).
pub(crate) fn watch(
    calls: &Calls<'_>,
    deadline: Option<Instant>,
    done: Receiver<()>,
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
        if deadline.is_some_and(|d| Instant::now() >= d) {
            calls.expired.store(true, Ordering::SeqCst);
            calls.interrupt();
            on_expire();
            return;
        }
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
            scope.spawn(|| watch(&calls, None, done_rx, || panic!("no timeout was set")));
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
}
