//! A named background thread with a stop flag and a state snapshot other threads can read: the
//! shape shared by the tracker and proxy clients.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// The thread's handle. Dropping it stops the thread and waits for it.
pub(crate) struct Background<S> {
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<S>>,
    thread: Option<JoinHandle<()>>,
}

impl<S: Clone + Default + Send + 'static> Background<S> {
    /// Starts `run(stop, state)` on a thread called `name`. `run` must return soon after
    /// `stop` is set.
    pub(crate) fn start(
        name: &str,
        run: impl FnOnce(Arc<AtomicBool>, Arc<Mutex<S>>) + Send + 'static,
    ) -> io::Result<Background<S>> {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(S::default()));
        let (s, st) = (Arc::clone(&stop), Arc::clone(&state));
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(s, st))?;
        Ok(Background {
            stop,
            state,
            thread: Some(thread),
        })
    }

    /// A snapshot of the state.
    pub(crate) fn state(&self) -> S {
        lock(&self.state).clone()
    }

    /// Sets the stop flag and waits for the thread (once).
    pub(crate) fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let name = t.thread().name().unwrap_or("background").to_owned();
            if t.join().is_err() {
                log::error!("{name} thread panicked");
            }
        }
    }
}

impl<S> Drop for Background<S> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Locks a state mutex; a panic elsewhere never makes the state unreadable.
pub(crate) fn lock<S>(m: &Mutex<S>) -> std::sync::MutexGuard<'_, S> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
