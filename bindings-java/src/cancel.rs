//! Cancelling a model call when its Java thread is interrupted (`Thread.interrupt()`).
//!
//! Java makes one [`CallToken`] per outermost model call on a thread (`org.mote.Interruptor`,
//! whose `implCloseChannel` the JVM runs when the thread is interrupted) and passes it to the
//! native call, which **arms** it with the interrupt handle of the session it runs in (for a
//! `Module`, the session it checked out of the pool). While armed, an interrupt reaches that
//! session through [`mote::InterruptHandle::interrupt`], which needs no lock of the pool or the
//! session, and the call returns `Error::Cancelled` at its next VM call or backward jump
//! (docs/untrusted-models.md §4). When the call returns, the token is disarmed and the handle
//! cleared **under the same lock** the interrupt takes: an interrupt that arrives later cannot
//! reach the session, and one that arrived too late to stop the call is dropped, so it never
//! cancels the session's next call (which may be another thread's, for a pooled session).
//!
//! An interrupt that arrives before the call is armed (while the thread waits for a pooled
//! session, or on a thread already interrupted when the call starts) is remembered: arming then
//! fails with `Error::Cancelled` and the call does not run. A Java callback of the call that
//! calls a model again on the same thread reuses the outer call's token (Java keeps it in a
//! thread-local), so the token holds a stack of handles, innermost last.

use std::sync::{Mutex, MutexGuard};

use mote::InterruptHandle;

use crate::JErr;

/// The cancellation state of one Java call (see the module docs).
#[derive(Default)]
pub struct CallToken(Mutex<TokenState>);

#[derive(Default)]
struct TokenState {
    /// The thread was interrupted during this call: every later arming fails.
    interrupted: bool,
    /// The handles of the sessions running this call now, innermost last.
    armed: Vec<InterruptHandle>,
}

impl CallToken {
    fn lock(&self) -> MutexGuard<'_, TokenState> {
        // Nothing panics while holding the lock; a poisoned one still holds a consistent state.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The Java thread was interrupted: cancel what runs now and whatever would run later.
    pub fn interrupt(&self) {
        let mut st = self.lock();
        st.interrupted = true;
        for h in &st.armed {
            h.interrupt();
        }
    }

    /// Run `f` with the token armed with `handle` (the session `f` calls); `Error::Cancelled`
    /// without running `f` when the thread was interrupted already.
    pub fn run<R>(
        &self,
        handle: InterruptHandle,
        f: impl FnOnce() -> Result<R, JErr>,
    ) -> Result<R, JErr> {
        {
            let mut st = self.lock();
            if st.interrupted {
                return Err(JErr::Mote(mote::Error::Cancelled));
            }
            st.armed.push(handle);
        }
        // Disarms however `f` ends (a panic included).
        let _disarm = Disarm(self);
        let r = f();
        #[cfg(feature = "test-hooks")]
        {
            // Widens the window between the call's end and its disarming, for the test of a
            // late interrupt (`TestHooks.pauseBeforeDisarmForTest`).
            let ms = PAUSE_BEFORE_DISARM_MS.load(std::sync::atomic::Ordering::Relaxed);
            if ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
        }
        r
    }
}

/// Milliseconds every armed call waits after it returned and before it is disarmed: 0 except
/// in the test of a late interrupt (the `test-hooks` feature only).
#[cfg(feature = "test-hooks")]
pub(crate) static PAUSE_BEFORE_DISARM_MS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// Disarms the innermost handle of a token when dropped, and drops an interrupt it left
/// pending (see the module docs).
struct Disarm<'t>(&'t CallToken);

impl Drop for Disarm<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if let Some(h) = st.armed.pop() {
            h.clear();
        }
    }
}

/// Run `f` under the token behind the Java handle `token` (0: a call Java does not make
/// interruptible), armed with `handle`.
pub(crate) fn with_token<R>(
    token: i64,
    handle: InterruptHandle,
    f: impl FnOnce() -> Result<R, JErr>,
) -> Result<R, JErr> {
    if token == 0 {
        return f();
    }
    // SAFETY: Java passes the handle of a live token (`Interruptor` frees it only after the
    // call that uses it returned; see `handle_ref`).
    let t = unsafe { crate::handle_ref::<CallToken>(token, "call token")? };
    t.run(handle, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> InterruptHandle {
        InterruptHandle::default()
    }

    #[test]
    fn an_interrupt_while_armed_reaches_the_handle_and_a_late_one_is_dropped() {
        let t = CallToken::default();
        let h = handle();
        let r = t.run(h.clone(), || {
            t.interrupt();
            assert!(h.is_pending(), "armed: the session sees the interrupt");
            Ok(1)
        });
        assert_eq!(r.unwrap(), 1);
        assert!(
            !h.is_pending(),
            "disarmed: the unconsumed interrupt is dropped"
        );
        // The token stays interrupted: a later (nested) arming is refused.
        let e = t.run(h.clone(), || Ok(2)).unwrap_err();
        assert!(matches!(e, JErr::Mote(mote::Error::Cancelled)), "{e:?}");
    }

    #[test]
    fn nested_calls_disarm_innermost_first() {
        let t = CallToken::default();
        let (outer, inner) = (handle(), handle());
        t.run(outer.clone(), || {
            t.run(inner.clone(), || Ok(()))?;
            t.interrupt();
            assert!(outer.is_pending());
            assert!(!inner.is_pending(), "the inner call is over");
            Ok(())
        })
        .unwrap();
        assert!(!outer.is_pending());
    }
}
