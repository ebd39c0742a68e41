//! A whole model file read code-free: container, blob, executable, subgraph descriptions,
//! linking, under the load budget `mote_fuzz::LOAD_BUDGET`. A file that loads is also asked
//! what it holds, gets a session of 2 threads under the targets' budgets
//! (`mote_fuzz::session_options`), and is loaded again from a file (mapped as data,
//! region-only weights left in it), which must load the same constants. `run_code_free` calls
//! the functions.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

/// Where this process writes a file that loaded from memory, to load it from a path.
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("mote-fuzz-model-{}.so", std::process::id()))
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mote_fuzz::with_budget(data, |d| {
        let Ok(model) = mote::Model::load_from_memory_with(d, mote_fuzz::load_options()) else {
            return;
        };
        for f in model.function_names() {
            let _ = model.function_info(&f);
        }
        match model.session_with(mote_fuzz::session_options()) {
            Ok(session) => assert_eq!(session.threads(), 2),
            Err(e) => panic!("a model that loads gets no session: {e}"),
        }
        if std::fs::write(scratch(), d).is_err() {
            return;
        }
        match mote::Model::load_with(scratch(), mote_fuzz::load_options()) {
            Ok(from_file) => {
                assert_eq!(from_file.constant_bytes(), model.constant_bytes());
                let (left, left_bytes) = from_file.constants_in_file();
                let (all, all_bytes) = model.constant_bytes();
                assert!(left <= all && left_bytes <= all_bytes);
                assert_eq!(from_file.function_names(), model.function_names());
            }
            Err(e) => panic!("loads from memory but not from a file: {e}"),
        }
    });
});
