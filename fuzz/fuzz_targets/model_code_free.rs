//! A whole model file read code-free: container, blob, executable, subgraph descriptions,
//! linking (`mote::fuzzing::model_code_free`). A file that loads is also asked what it holds.
#![no_main]

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mote_fuzz::with_budget(data, |d| {
        if let Ok(model) = mote::fuzzing::model_code_free(d) {
            for f in model.function_names() {
                let _ = model.function_info(&f);
            }
        }
    });
});
