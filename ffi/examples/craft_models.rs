//! Writes the hand-made model files of the C tests of budgets and interrupts
//! (`tests/c/test_budgets.c`, run by scripts/test-ffi.sh), so that no opaque model bytes are
//! checked in:
//!
//!   cargo run -p mote-ffi --example craft_models -- DIR
//!
//! - `endless_loop.tar`: `mote::fuzzing::craft::endless_loop()`, whose `main()` loops forever
//!   (only the instruction budget or an interrupt ends it; docs/untrusted-models.md §3-§4);
//! - `loop_and_recursion.tar`: the same `main()`, and `recurse(x)`, which calls itself forever
//!   with 16 registers a frame (stopped by the register or stack budget);
//! - `inflating.tar.gz`: `endless_loop.tar` followed by 32 MiB of zero blocks (still a valid
//!   tar: its end marker comes first), gzip-compressed to a few tens of KiB: over a small load
//!   memory budget it is `MOTE_ERROR_CODE_RESOURCE_EXHAUSTED`, under the default it loads.

use std::io::Write;
use std::path::Path;

use mote::fuzzing::craft::{self, Arg, Entry, Instr};

/// Bytes of zeros `inflating.tar.gz` inflates to after the model's own tar.
const ZEROS: usize = 32 << 20;

fn loop_and_recursion() -> Vec<u8> {
    craft::model(&[
        craft::endless_main(),
        Entry::Vm {
            name: "recurse".into(),
            params: vec!["x".into()],
            registers: 16,
            code: vec![
                Instr::Call {
                    dst: 0,
                    func: 1,
                    args: vec![Arg::Reg(0)],
                },
                Instr::Ret { reg: 0 },
            ],
        },
    ])
}

fn inflating() -> std::io::Result<Vec<u8>> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&craft::endless_loop())?;
    gz.write_all(&vec![0u8; ZEROS])?;
    gz.finish()
}

fn main() -> std::io::Result<()> {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: craft_models DIR");
        std::process::exit(2);
    };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("endless_loop.tar"), craft::endless_loop())?;
    std::fs::write(dir.join("loop_and_recursion.tar"), loop_and_recursion())?;
    std::fs::write(dir.join("inflating.tar.gz"), inflating()?)?;
    eprintln!("craft_models: wrote 3 files into {}", dir.display());
    Ok(())
}
