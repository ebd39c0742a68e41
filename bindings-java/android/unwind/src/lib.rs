//! The `_Unwind_*` functions of the Android JNI library (see Cargo.toml): the `unwinding`
//! crate's unwinder, which finds each library's unwind tables with `dl_iterate_phdr` (in
//! bionic's libdl.so from API 21). Rust's standard library calls it to unwind a panic to
//! the `catch_unwind` of every JNI entry point; the personality routine stays std's.
#![no_std]

pub use unwinding::abi;

// A static library without `std` must name a panic handler. It is never linked into the JNI
// library: the linker takes only the archive members that define the `_Unwind_*` symbols,
// and this one lives in the crate root's own member, which defines nothing else.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}
