//! The unit tests' global allocator: the system's, plus the largest single request each
//! thread made since it last asked (`largest_since_reset`), and the bytes each thread has
//! allocated and not freed, with their peak (`live`, `peak_since_reset`). Tests of parsers use
//! the first to show that a size a file claims is not reserved before the file backs it up;
//! tests of preparation use the others to bound what is held at once. A thread's count goes
//! down when it frees memory another thread allocated, so those tests keep their work on one
//! thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

pub(crate) struct Counting;

fn note(size: usize) {
    // `try_with`: a thread being torn down has no slot left; nothing to record then.
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    add(size as isize);
}

fn add(bytes: isize) {
    if let Ok(live) = LIVE.try_with(|l| {
        l.set(l.get().wrapping_add(bytes));
        l.get()
    }) {
        let _ = PEAK.try_with(|p| p.set(p.get().max(live)));
    }
}

// SAFETY: every call forwards to `System` with the caller's arguments; `note` only records.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-(layout.size() as isize));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(new_size)));
        add(new_size as isize - layout.size() as isize);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The largest single allocation this thread asked for since the last call.
pub(crate) fn largest_since_reset() -> usize {
    LARGEST.with(|l| l.replace(0))
}

/// Bytes this thread has allocated and not freed (see the module's note on other threads).
pub(crate) fn live() -> isize {
    LIVE.with(Cell::get)
}

/// The highest [`live`] since the last call; the peak starts again from the current count.
pub(crate) fn peak_since_reset() -> isize {
    let live = live();
    PEAK.with(|p| p.replace(live))
}
