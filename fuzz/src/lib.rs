//! What every fuzz target shares: a global allocator that holds each input to an allocation
//! budget (docs/fuzzing.md, "Memory"), and the load and session budgets of the targets that
//! load or run models (docs/fuzzing.md, "Budgets").
//!
//! A parser may allocate in proportion to what it is given, never to what a length field
//! claims: live heap bytes above `FIXED + MULTIPLE * input length` during one input abort the
//! process, which libFuzzer reports as a crash with the input that caused it. A call of a
//! model may allocate what its session's budgets allow ([`run_limit`]) and no more.

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
    with_limit(FIXED + MULTIPLE * data.len(), || f(data))
}

/// Run `f` allowed `limit` live heap bytes beyond what is live now; the limit in force before
/// is restored afterwards, counted from where it was (what `f` left live counts against it).
pub fn with_limit<R>(limit: usize, f: impl FnOnce() -> R) -> R {
    let (base, outer) = (BASE.load(Ordering::Relaxed), LIMIT.load(Ordering::Relaxed));
    BASE.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
    LIMIT.store(limit, Ordering::Relaxed);
    let r = f();
    BASE.store(base, Ordering::Relaxed);
    LIMIT.store(outer, Ordering::Relaxed);
    r
}

/// [`mote::LoadOptions::memory_budget`] of the targets that load models: what decoding a file
/// (inflating a gzip `.tar`) may hold. A quarter of [`FIXED`]: the decoded bytes, the blob
/// read from them and the constants copied out of it (each at most the decoded size) stay
/// inside the input's allocation budget, and a decoder that ignored the budget would not.
pub const LOAD_BUDGET: u64 = (FIXED / 4) as u64;

/// [`mote::SessionOptions::memory_budget_bytes`] of the targets' sessions.
pub const SESSION_MEMORY: usize = 32 << 20;
/// [`mote::SessionOptions::max_instructions`]: an endless loop ends in a few milliseconds,
/// far inside libFuzzer's 10 s per input.
pub const MAX_INSTRUCTIONS: u64 = 100_000;
/// [`mote::SessionOptions::max_registers`] (1 MiB of registers).
pub const MAX_REGISTERS: usize = 1 << 16;
/// [`mote::SessionOptions::pool_limit_bytes`]: freed buffers a session keeps for reuse.
pub const POOL_LIMIT: usize = 4 << 20;
/// Heap a call may use outside its session's budgets (its argument list, error messages,
/// tuples and shapes the VM builds).
pub const CALL_FIXED: usize = 16 << 20;

/// Code-free loads under [`LOAD_BUDGET`].
pub fn load_options() -> mote::LoadOptions {
    mote::LoadOptions::default()
        .code_free(true)
        .memory_budget(LOAD_BUDGET)
}

/// A session of the targets: 2 threads, the `cpu` backend, the budgets above and the default
/// stack budget.
pub fn session_options() -> mote::SessionOptions {
    mote::SessionOptions {
        threads: Some(2),
        backends: vec![mote::backend::CPU.to_string()],
        pool_limit_bytes: POOL_LIMIT,
        memory_budget_bytes: SESSION_MEMORY,
        max_registers: MAX_REGISTERS,
        max_instructions: MAX_INSTRUCTIONS,
        ..Default::default()
    }
}

/// Live heap a session of [`session_options`] may add while calling a model of
/// `constant_bytes` of constants loaded from `input_len` bytes: its memory budget, its pool,
/// its register file (twice: the vector grows by doubling), a backend's own form of the
/// constants (twice them: a copy and a relayout), [`MULTIPLE`] times the input and
/// [`CALL_FIXED`]. More is a budget the session did not enforce.
pub fn run_limit(input_len: usize, constant_bytes: usize) -> usize {
    SESSION_MEMORY
        + POOL_LIMIT
        + 2 * MAX_REGISTERS * std::mem::size_of::<mote::Value>()
        + 2 * constant_bytes
        + MULTIPLE * input_len
        + CALL_FIXED
}
