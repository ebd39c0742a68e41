//! The Relax VM executable (`mote::fuzzing::executable`).
#![no_main]

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mote_fuzz::with_budget(data, |d| {
        let _ = mote::fuzzing::executable(d);
    });
});
