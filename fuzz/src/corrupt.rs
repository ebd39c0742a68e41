//! Writes the corrupted-file corpus (docs/fuzzing.md, "Corrupted files"): for every model file
//! given, copies cut at many points and copies with bytes changed inside the parts Mote parses
//! (the module blob, the VM executable in it, each offloaded region's description), found with
//! `mote::fuzzing::regions`.
//!
//!   corrupt OUT_DIR FILE...
//!
//! Changes stay inside those parts for every file: a library loaded the usual way is mapped and
//! its code runs, so a changed byte of its code or its loader tables could crash the process
//! by design (Mote checks the file's layout before mapping it, which is what the cut copies
//! exercise). Deterministic: the same files give the same corpus. Writes OUT_DIR/corpus.tsv,
//! one line per copy: name, original file, what was done, and the function to run it with
//! (`-` when the original has no executable Mote reads).

use std::io::Write;
use std::path::{Path, PathBuf};

/// Cuts per file: these fractions of its length, plus a few fixed small lengths.
const CUT_FRACTIONS: [f64; 6] = [0.05, 0.25, 0.5, 0.75, 0.95, 0.999];
const CUT_LENGTHS: [usize; 4] = [0, 3, 63, 700];
/// Changed copies per part of a file.
const CHANGES_PER_PART: usize = 4;

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let Some((out, files)) = args.split_first() else {
        eprintln!("usage: corrupt OUT_DIR FILE...");
        std::process::exit(2);
    };
    if let Err(e) = run(out, files) {
        eprintln!("corrupt: {e}");
        std::process::exit(1);
    }
}

fn run(out: &Path, files: &[PathBuf]) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let mut listing = std::fs::File::create(out.join("corpus.tsv"))?;
    let (mut copies, mut with_parts) = (0usize, 0usize);
    for file in files {
        let bytes = std::fs::read(file)?;
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (stem, ext) = match name.rsplit_once('.') {
            Some((s, e)) => (s.to_string(), format!(".{e}")),
            None => (name.clone(), String::new()),
        };
        let function = mote::fuzzing::entry_function(&bytes).unwrap_or_else(|| "-".into());
        let mut write = |tag: String, data: &[u8], what: String| -> std::io::Result<()> {
            let copy = format!("{stem}~{tag}{ext}");
            std::fs::write(out.join(&copy), data)?;
            writeln!(listing, "{copy}\t{}\t{what}\t{function}", file.display())?;
            copies += 1;
            Ok(())
        };
        let mut cuts: Vec<usize> = CUT_FRACTIONS
            .iter()
            .map(|f| (bytes.len() as f64 * f) as usize)
            .chain(CUT_LENGTHS)
            .filter(|&n| n < bytes.len())
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        for n in cuts {
            write(format!("cut{n}"), &bytes[..n], format!("cut to {n} bytes"))?;
        }
        let parts = mote::fuzzing::regions(&bytes);
        if !parts.is_empty() {
            with_parts += 1;
        }
        let mut rng = seed(&name);
        for (i, (kind, range)) in parts.iter().enumerate() {
            if range.is_empty() {
                continue;
            }
            for j in 0..CHANGES_PER_PART {
                let mut data = bytes.clone();
                // The part's first bytes (lengths, magic, version) once, then anywhere in it.
                let at = if j == 0 {
                    range.start + next(&mut rng) % range.len().min(16)
                } else {
                    range.start + next(&mut rng) % range.len()
                };
                let (tag, what) = match j % 2 {
                    0 => {
                        let x = (next(&mut rng) % 255 + 1) as u8;
                        data[at] ^= x;
                        ("x", format!("{kind}: byte {at} xor {x:#04x}"))
                    }
                    _ => {
                        let end = (at + 8).min(range.end);
                        data[at..end].fill(0xff);
                        ("f", format!("{kind}: bytes {at}..{end} set to 0xff"))
                    }
                };
                write(format!("{kind}{i}{tag}{at}"), &data, what)?;
            }
        }
    }
    eprintln!(
        "corrupt: {copies} copies of {} files ({with_parts} with a blob found) in {}",
        files.len(),
        out.display()
    );
    Ok(())
}

/// A 64-bit state from the file's name (FNV-1a), so each file gets its own positions.
fn seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// xorshift64*: positions, not secrets.
fn next(s: &mut u64) -> usize {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as usize
}
