//! Two threads write one `u64` with no synchronisation: the data race ThreadSanitizer exists
//! to find. scripts/tsan.sh fails unless running this prints a ThreadSanitizer warning.

use std::cell::UnsafeCell;
use std::sync::Barrier;

struct Racy(UnsafeCell<u64>);

// SAFETY: deliberately false: this program exists to race (see the module comment).
unsafe impl Sync for Racy {}

static SLOT: Racy = Racy(UnsafeCell::new(0));

fn main() {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        for i in 0..2u64 {
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                // SAFETY: none: an unsynchronised write from two threads, on purpose.
                unsafe { *SLOT.0.get() += i + 1 };
            });
        }
    });
    // SAFETY: both writers have been joined by the scope.
    println!("canary: {}", unsafe { *SLOT.0.get() });
}
