//! What every fuzz target shares: a global allocator that holds each input to an allocation
//! budget (docs/fuzzing.md, "Memory").
//!
//! A parser may allocate in proportion to what it is given, never to what a length field
//! claims: live heap bytes above `FIXED + MULTIPLE * input length` during one input abort the
//! process, which libFuzzer reports as a crash with the input that caused it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Allowed live heap per input byte.
pub const MULTIPLE: usize = 16;
/// Allowed live heap whatever the input (tables, thread pools, the loader's fixed state).
pub const FIXED: usize = 64 << 20;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static BASE: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// The allocator every target installs.
pub struct Budget;

// SAFETY: every call forwards to `System` with the caller's arguments; the counters are only
// bookkeeping.
unsafe impl GlobalAlloc for Budget {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        charge(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        charge(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            charge(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn charge(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    let over = live.saturating_sub(BASE.load(Ordering::Relaxed));
    if over > LIMIT.load(Ordering::Relaxed) {
        // No allocation here: write the reason with a fixed buffer, then abort.
        let msg = b"mote-fuzz: allocation budget exceeded (see docs/fuzzing.md)\n";
        // SAFETY: writing a static buffer to stderr.
        unsafe { libc_write(2, msg.as_ptr(), msg.len()) };
        std::process::abort();
    }
}

extern "C" {
    #[link_name = "write"]
    fn libc_write(fd: i32, buf: *const u8, n: usize) -> isize;
}

/// Run `f` on `data` under the budget for an input of its length.
pub fn with_budget<R>(data: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    BASE.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    LIMIT.store(FIXED + MULTIPLE * data.len(), Ordering::Relaxed);
    let r = f(data);
    LIMIT.store(usize::MAX, Ordering::Relaxed);
    r
}
