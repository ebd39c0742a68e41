//! The module blob: length prefix, import tree, modules (`mote::fuzzing::module_blob`).
#![no_main]

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mote_fuzz::with_budget(data, |d| {
        let _ = mote::fuzzing::module_blob(d);
    });
});
