//! Program binaries kept in a directory the app names, so that a second load of a model
//! skips the OpenCL compiler (docs/opencl.md §7).
//!
//! One file per (device, driver, source): `<hash>.clbin`, holding the device's identity and
//! the whole source beside the binary. A file is used only when both match exactly, so a hash
//! collision, another driver version or a damaged file costs a build, never a wrong program.
//! Files are written to a temporary name and renamed, so a reader never sees half a file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{ClResult, Context, Program};

const MAGIC: &[u8; 8] = b"MOTECLB1";

/// Where a program came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the cache directory.
    Hit,
    /// Built from source (and written to the cache when that worked).
    Built,
}

/// FNV-1a, 64 bits: a file name, not a check (the file's contents are compared in full).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.iter().chain(&[0xFFu8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// What identifies the compiler that made a binary: device, vendor, driver and versions.
fn identity(ctx: &Context) -> String {
    let d = ctx.device();
    format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        d.platform_name, d.name, d.vendor, d.driver_version, d.version, d.opencl_c_version
    )
}

fn file_for(dir: &Path, identity: &str, source: &str, options: &str) -> PathBuf {
    let h = fnv1a(&[identity.as_bytes(), source.as_bytes(), options.as_bytes()]);
    dir.join(format!("{h:016x}.clbin"))
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// The binary of a cache file whose identity, source and options are these; `None` for any
/// other file, a damaged one included.
fn read_entry<'a>(file: &'a [u8], identity: &str, source: &str, options: &str) -> Option<&'a [u8]> {
    let mut rest = file.strip_prefix(MAGIC)?;
    let mut take = || -> Option<&'a [u8]> {
        let n = usize::try_from(u64::from_le_bytes(rest.get(..8)?.try_into().ok()?)).ok()?;
        let v = rest.get(8..8usize.checked_add(n)?)?;
        rest = &rest[8 + n..];
        Some(v)
    };
    let (id, src, opt, bin) = (take()?, take()?, take()?, take()?);
    (id == identity.as_bytes()
        && src == source.as_bytes()
        && opt == options.as_bytes()
        && rest.is_empty())
    .then_some(bin)
}

/// `source` built for `ctx`'s device, through the cache directory `dir`.
pub(crate) fn build(
    ctx: &Arc<Context>,
    source: &str,
    options: &str,
    dir: &Path,
) -> ClResult<(Program, CacheOutcome)> {
    let id = identity(ctx);
    let path = file_for(dir, &id, source, options);
    if let Ok(bytes) = std::fs::read(&path) {
        if let Some(bin) = read_entry(&bytes, &id, source, options) {
            match ctx.from_binary(bin, options) {
                Ok(p) => return Ok((p, CacheOutcome::Hit)),
                Err(e) => log::warn!(
                    "{}: cached OpenCL program not loaded ({e}); building it again",
                    path.display()
                ),
            }
        }
    }
    let program = ctx.build(source, options)?;
    if let Err(e) = write(&program, &path, &id, source, options) {
        log::warn!("{}: OpenCL program not cached: {e}", path.display());
    }
    Ok((program, CacheOutcome::Built))
}

fn write(
    program: &Program,
    path: &Path,
    identity: &str,
    source: &str,
    options: &str,
) -> Result<(), String> {
    let bin = program.binary().map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(bin.len() + source.len() + 64);
    out.extend_from_slice(MAGIC);
    for part in [
        identity.as_bytes(),
        source.as_bytes(),
        options.as_bytes(),
        &bin,
    ] {
        put(&mut out, part);
    }
    let dir = path.parent().ok_or("no directory")?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("program"),
        std::process::id()
    ));
    std::fs::write(&tmp, &out).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        e.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_used_only_for_their_own_identity_source_and_options() {
        let mut f = MAGIC.to_vec();
        for p in [&b"dev"[..], b"src", b"", b"BIN"] {
            put(&mut f, p);
        }
        assert_eq!(read_entry(&f, "dev", "src", ""), Some(&b"BIN"[..]));
        assert_eq!(read_entry(&f, "dev2", "src", ""), None);
        assert_eq!(read_entry(&f, "dev", "src2", ""), None);
        assert_eq!(read_entry(&f, "dev", "src", "-O2"), None);
        for cut in 0..f.len() {
            assert_eq!(
                read_entry(&f[..cut], "dev", "src", ""),
                None,
                "cut at {cut}"
            );
        }
        let mut long = f.clone();
        long.push(0);
        assert_eq!(read_entry(&long, "dev", "src", ""), None);
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(read_entry(&huge, "dev", "src", ""), None);
    }

    #[test]
    fn names_differ_with_any_part() {
        let d = Path::new("/c");
        let a = file_for(d, "dev", "src", "");
        assert_ne!(a, file_for(d, "dev", "src ", ""));
        assert_ne!(a, file_for(d, "dev2", "src", ""));
        assert_ne!(a, file_for(d, "dev", "src", "-x"));
        // Parts are separated: moving a byte from one to the next changes the name.
        assert_ne!(file_for(d, "ab", "c", ""), file_for(d, "a", "bc", ""));
    }
}
