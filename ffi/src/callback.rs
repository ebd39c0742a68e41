//! Calls into the embedder's code (function, log, release and free callbacks) go through
//! [`embedder`], which marks the thread as "inside a callback" for their duration. Sessions use
//! the mark to refuse to wait while a callback is running (see `session.rs`): the session a
//! callback asks for may be the very one waiting for that callback to return.

use std::cell::Cell;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

struct Mark;

impl Drop for Mark {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Run `f`, which calls the embedder, with this thread marked as inside a callback.
pub(crate) fn embedder<R>(f: impl FnOnce() -> R) -> R {
    DEPTH.with(|d| d.set(d.get().saturating_add(1)));
    let _mark = Mark;
    f()
}

/// Whether this thread is inside an embedder callback Mote called.
pub(crate) fn inside() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_nests_and_ends_with_the_call() {
        assert!(!inside());
        embedder(|| {
            assert!(inside());
            embedder(|| assert!(inside()));
            assert!(inside());
        });
        assert!(!inside());
        std::thread::spawn(|| embedder(|| assert!(inside())))
            .join()
            .unwrap();
        assert!(!inside());
    }
}
