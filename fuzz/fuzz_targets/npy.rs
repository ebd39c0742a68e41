//! `.npy` and `.npz` bytes (`mote::npy::parse_npy`, `mote::npy::parse_npz`).
#![no_main]

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mote_fuzz::with_budget(data, |d| {
        let _ = mote::npy::parse_npy(d, "fuzz");
        let _ = mote::npy::parse_npz(d, "fuzz");
    });
});
