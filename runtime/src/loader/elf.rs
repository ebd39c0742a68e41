//! A pre-flight check of ELF files before `dlopen`: the system loader maps segments without
//! checking them against the file size, so a truncated library would crash the process
//! (SIGBUS) instead of failing to load.

use crate::error::{Error, Result};

fn u16_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?) as u64)
}
fn u32_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?) as u64)
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

fn machine_name(m: u64) -> String {
    match m {
        3 => "x86".into(),
        40 => "arm".into(),
        62 => "x86_64".into(),
        183 => "aarch64".into(),
        243 => "riscv".into(),
        m => format!("machine {m}"),
    }
}

fn host_machine() -> Option<u64> {
    Some(match std::env::consts::ARCH {
        "x86" => 3,
        "arm" => 40,
        "x86_64" => 62,
        "aarch64" => 183,
        "riscv64" => 243,
        _ => return None,
    })
}

/// Check that `file` (the whole library) is a little-endian ELF shared object for this machine
/// whose program headers and loadable segments lie inside the file.
pub(crate) fn check(file: &[u8]) -> Result<()> {
    let bad = |m: String| Error::Load {
        path: Default::default(),
        message: m,
    };
    let short = || bad(format!("truncated ELF file ({} bytes)", file.len()));
    if file.len() < 52 || &file[..4] != b"\x7fELF" {
        return Err(short());
    }
    let is64 = match file[4] {
        1 => false,
        2 => true,
        c => return Err(bad(format!("unknown ELF class {c}"))),
    };
    if file[5] != 1 {
        return Err(bad("big-endian ELF file".into()));
    }
    if is64 != cfg!(target_pointer_width = "64") {
        return Err(bad(format!(
            "{}-bit library in a {}-bit process",
            if is64 { 64 } else { 32 },
            usize::BITS
        )));
    }
    let e_type = u16_at(file, 16).ok_or_else(short)?;
    if e_type != 3 {
        return Err(bad(format!(
            "ELF type {e_type} is not a shared object (export the model with export_library)"
        )));
    }
    let machine = u16_at(file, 18).ok_or_else(short)?;
    if let Some(host) = host_machine() {
        if machine != host {
            return Err(bad(format!(
                "library built for {}, but this is {}",
                machine_name(machine),
                machine_name(host)
            )));
        }
    }
    let (phoff, phentsize, phnum) = if is64 {
        (u64_at(file, 32), u16_at(file, 54), u16_at(file, 56))
    } else {
        (u32_at(file, 28), u16_at(file, 42), u16_at(file, 44))
    };
    let (phoff, phentsize, phnum) = (
        phoff.ok_or_else(short)?,
        phentsize.ok_or_else(short)?,
        phnum.ok_or_else(short)?,
    );
    let len = file.len() as u64;
    let table_end = phentsize
        .checked_mul(phnum)
        .and_then(|s| s.checked_add(phoff));
    if table_end.is_none_or(|e| e > len) || phentsize < if is64 { 56 } else { 32 } {
        return Err(short());
    }
    for i in 0..phnum {
        let h = (phoff + i * phentsize) as usize;
        let p_type = u32_at(file, h).ok_or_else(short)?;
        let (offset, filesz) = if is64 {
            (u64_at(file, h + 8), u64_at(file, h + 32))
        } else {
            (u32_at(file, h + 4), u32_at(file, h + 16))
        };
        let (offset, filesz) = (offset.ok_or_else(short)?, filesz.ok_or_else(short)?);
        // PT_LOAD = 1, PT_DYNAMIC = 2: what the loader maps and reads.
        if (p_type == 1 || p_type == 2) && offset.checked_add(filesz).is_none_or(|e| e > len) {
            return Err(short());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_is_not_a_whole_library() {
        assert!(check(b"").is_err());
        assert!(check(b"\x7fELF").is_err());
        assert!(check(&[0u8; 100]).is_err());
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[16] = 2; // an executable, not a shared object
        assert!(check(&h).is_err());
    }
}
