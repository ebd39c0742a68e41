//! The second Rust static library of scripts/build-xcframework.sh's link check (Cargo.toml).
//! One C function that needs the standard library's allocator (a `Vec`), its formatting
//! machinery (a `String` from `format!`) and its panic runtime (a panic caught by
//! `catch_unwind`), so the archive defines the same runtime symbols Mote's does.

use std::panic;

/// Sums `0..n` into a formatted string and returns its length, or 0 when `n` is over 1000
/// (that path panics and catches the panic).
#[no_mangle]
pub extern "C" fn second_rust_probe(n: u32) -> u32 {
    let values: Vec<u64> = (0..u64::from(n)).collect();
    let text = format!(
        "{} values, sum {}",
        values.len(),
        values.iter().sum::<u64>()
    );
    let checked = panic::catch_unwind(|| {
        if n > 1000 {
            panic!("second_rust_probe: {n} is over 1000");
        }
        text.len() as u32
    });
    checked.unwrap_or(0)
}
