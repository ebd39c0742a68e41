//! The sessions of a tvm4j `Module` (`org.mote.Module`): Java calls a module from any number of
//! threads, and each call needs a session of its own (a `Session` runs one call at a time), so
//! the module keeps a pool of them.
//!
//! The pool is bounded: at most `max` sessions exist at once (each has its own thread pool and
//! buffer pool, so an unbounded pool grows to the largest concurrency ever seen and keeps it).
//! A call takes an idle session, or makes one while fewer than `max` exist, or else **waits**
//! until another call returns one. Sessions are kept for reuse until the module is freed.
//!
//! One exception keeps a callback from deadlocking: a call made on a thread that already holds
//! one of this pool's sessions (a Java callback of a module call calling the same module) gets
//! a session beyond the bound, dropped when that call returns. A session whose call panicked is
//! dropped, not reused.
//!
//! An interrupted Java call reaches the session it checked out through that session's
//! `mote::InterruptHandle`, which the call's token holds (src/cancel.rs): the interrupting
//! thread never takes this pool's lock.

use std::cell::RefCell;
use std::sync::{Condvar, Mutex, MutexGuard};

use mote::{Model, Session, SessionOptions};

use crate::JErr;

/// Sessions of one model, at most `max` of them at once (see the module docs).
pub struct SessionPool {
    model: Model,
    /// What each session is made with (`Module.load`'s `SessionOptions`: budgets, threads...).
    options: SessionOptions,
    max: usize,
    state: Mutex<PoolState>,
    returned: Condvar,
}

#[derive(Default)]
struct PoolState {
    /// Sessions no call is using.
    idle: Vec<Session>,
    /// Sessions that exist: idle plus in use.
    live: usize,
    /// The most that ever existed at once.
    peak: usize,
    /// How many were ever made.
    created: u64,
}

/// The counts [`SessionPool::counts`] reports, for the tests (`TestHooks.moduleSessions`).
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
pub(crate) struct PoolCounts {
    pub live: usize,
    pub idle: usize,
    pub peak: usize,
    pub created: u64,
    pub max: usize,
}

thread_local! {
    /// The pools (by address) whose sessions this thread holds now, innermost last.
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

impl SessionPool {
    /// A pool of at most `max` (at least 1) sessions of `model`, each made with `options`;
    /// none is made yet.
    pub fn new(model: Model, max: usize, options: SessionOptions) -> SessionPool {
        SessionPool {
            model,
            options,
            max: max.max(1),
            state: Mutex::new(PoolState::default()),
            returned: Condvar::new(),
        }
    }

    /// The model the sessions run.
    pub fn model(&self) -> &Model {
        &self.model
    }

    fn key(&self) -> usize {
        self as *const SessionPool as usize
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Nothing panics while holding the lock; a poisoned one still holds consistent counts.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `f` with a session of the pool (waiting for one when `max` are in use), then put
    /// the session back.
    pub fn with_session<R>(&self, f: impl FnOnce(&mut Session) -> R) -> Result<R, JErr> {
        let mut lease = self.acquire()?;
        let session = lease
            .session
            .as_mut()
            .ok_or_else(|| JErr::State("a module session lease is empty".into()))?;
        Ok(f(session))
    }

    fn acquire(&self) -> Result<Lease<'_>, JErr> {
        let key = self.key();
        let reentrant = HELD.with(|h| h.borrow().contains(&key));
        let mut st = self.lock();
        let session = loop {
            if let Some(s) = st.idle.pop() {
                break s;
            }
            if st.live < self.max || reentrant {
                st.live += 1;
                st.peak = st.peak.max(st.live);
                st.created += 1;
                drop(st);
                // However making the session fails (error or panic), the guard takes the
                // count back down: else the pool would shrink for good, and a pool of one
                // would hang every later caller.
                let uncount = Uncount(self);
                let session = self.model.session_with(self.options.clone())?;
                std::mem::forget(uncount);
                break session;
            }
            st = self.returned.wait(st).unwrap_or_else(|p| p.into_inner());
        };
        HELD.with(|h| h.borrow_mut().push(key));
        Ok(Lease {
            pool: self,
            session: Some(session),
        })
    }

    /// Take back a session: kept while no more than `max` exist, else (one made beyond the
    /// bound, or one whose call panicked) dropped.
    fn give_back(&self, session: Session, keep: bool) {
        let mut st = self.lock();
        if keep && st.live <= self.max {
            st.idle.push(session);
            drop(st);
        } else {
            st.live -= 1;
            drop(st);
            drop(session);
        }
        self.returned.notify_one();
    }

    /// The pool's counts now.
    #[cfg_attr(not(feature = "test-hooks"), allow(dead_code))]
    pub(crate) fn counts(&self) -> PoolCounts {
        let st = self.lock();
        PoolCounts {
            live: st.live,
            idle: st.idle.len(),
            peak: st.peak,
            created: st.created,
            max: self.max,
        }
    }
}

/// Takes back a count of one live session when dropped (a session that could not be made).
struct Uncount<'p>(&'p SessionPool);

impl Drop for Uncount<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.live -= 1;
        drop(st);
        self.0.returned.notify_one();
    }
}

/// A session taken from a pool; dropping it gives the session back (also when the call
/// panicked, so the pool's count stays right and waiting callers wake up).
struct Lease<'p> {
    pool: &'p SessionPool,
    /// Always `Some` until the lease is dropped.
    session: Option<Session>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let key = self.pool.key();
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().rposition(|k| *k == key) {
                h.remove(i);
            }
        });
        if let Some(s) = self.session.take() {
            self.pool.give_back(s, !std::thread::panicking());
        }
    }
}
