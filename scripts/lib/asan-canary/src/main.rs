//! `overflow`: reads one element past the end of a heap buffer (AddressSanitizer must report
//! a heap-buffer-overflow). `leak`: loses the only pointer to a heap allocation
//! (LeakSanitizer must report it at exit). scripts/sanitize.sh runs both and fails unless each
//! report appears.

use std::hint::black_box;

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("overflow") => {
            let v: Vec<u32> = black_box(vec![1, 2, 3, 4]);
            let p = black_box(v.as_ptr());
            // SAFETY: none: one element past the end of `v`, on purpose.
            let past = unsafe { p.add(black_box(4)).read() };
            println!("canary: {past}");
        }
        Some("leak") => {
            let b = Box::new([7u8; 4096]);
            // Forgotten through a pointer that is then overwritten: nothing reaches it.
            let mut p: *mut [u8; 4096] = Box::into_raw(b);
            black_box(p);
            p = std::ptr::null_mut();
            black_box(p);
        }
        _ => {
            eprintln!("usage: asan-canary overflow|leak");
            std::process::exit(2);
        }
    }
}
