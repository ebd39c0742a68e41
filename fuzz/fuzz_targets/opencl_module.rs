//! The `opencl` module's payload: function map, launch tags, source chunks
//! (`mote::fuzzing::opencl_module`, docs/tvm-format.md §10.2).
#![no_main]

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mote_fuzz::with_budget(data, |d| {
        let _ = mote::fuzzing::opencl_module(d);
    });
});
