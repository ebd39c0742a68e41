//! The ELF pre-check and dynamic-symbol listing (`mote::fuzzing::elf`).
#![no_main]

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mote_fuzz::with_budget(data, |d| {
        let _ = mote::fuzzing::elf(d);
    });
});
