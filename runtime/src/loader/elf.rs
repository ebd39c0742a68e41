//! A pre-flight check of ELF files before `dlopen`: the system loader maps segments without
//! checking them against the file size, so a truncated library would crash the process
//! (SIGBUS) instead of failing to load. Also the list of kernels a library exports, read from
//! its dynamic symbol table: a kernel-only library has no module blob to name them
//! (docs/tvm-format.md §1.4).

use std::borrow::Cow;

use crate::error::{Error, Result};

/// Section types Mote reads (docs/tvm-format.md §1.4): the dynamic symbol table and the string
/// table its `sh_link` names.
const SHT_STRTAB: u64 = 3;
const SHT_DYNSYM: u64 = 11;
/// Symbol bindings, types and visibilities of an exported kernel (docs/tvm-format.md §1.4).
const STB_GLOBAL: u8 = 1;
const STB_WEAK: u8 = 2;
const STT_FUNC: u8 = 2;
const STV_DEFAULT: u8 = 0;
const STV_PROTECTED: u8 = 3;
/// `st_shndx` of an undefined (imported) symbol.
const SHN_UNDEF: u64 = 0;
/// Prefix of kernel symbols, and of the library's own data symbols, which are not kernels
/// (docs/tvm-format.md §1.3).
const KERNEL_PREFIX: &[u8] = b"__tvm_ffi_";
const RESERVED_PREFIX: &[u8] = b"__tvm_ffi__";

/// Where the readers below get a library's bytes: the whole file in memory, or a file on disk
/// read piece by piece ([`FileImage`]), so that checking a large model before `dlopen` does not
/// hold a copy of it.
pub(crate) trait Image {
    /// The file's length in bytes.
    fn size(&self) -> u64;
    /// The `n` bytes at `off`, or `None` when they are not all in the file (or cannot be read).
    fn bytes(&self, off: u64, n: u64) -> Option<Cow<'_, [u8]>>;
}

impl Image for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn bytes(&self, off: u64, n: u64) -> Option<Cow<'_, [u8]>> {
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(usize::try_from(n).ok()?)?;
        self.get(start..end).map(Cow::Borrowed)
    }
}

/// A library file read on demand with positioned reads: only the headers and the dynamic
/// symbol and string tables are ever in memory. The first [`HEADER_BYTES`] (magic and ELF
/// header, which every reader starts with) are read once, when it is opened.
pub(crate) struct FileImage {
    file: std::fs::File,
    size: u64,
    head: Vec<u8>,
}

/// Bytes of a file every reader looks at first: the 64-byte ELF header of a 64-bit file.
const HEADER_BYTES: u64 = 64;

impl FileImage {
    pub(crate) fn new(file: std::fs::File) -> std::io::Result<FileImage> {
        use std::os::unix::fs::FileExt;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(std::io::ErrorKind::IsADirectory.into());
        }
        let size = meta.len();
        let mut head = vec![0u8; size.min(HEADER_BYTES) as usize];
        file.read_exact_at(&mut head, 0)?;
        Ok(FileImage { file, size, head })
    }
}

impl Image for FileImage {
    fn size(&self) -> u64 {
        self.size
    }

    fn bytes(&self, off: u64, n: u64) -> Option<Cow<'_, [u8]>> {
        use std::os::unix::fs::FileExt;
        let end = off.checked_add(n)?;
        if end > self.size {
            return None;
        }
        if end <= self.head.len() as u64 {
            return Some(Cow::Borrowed(&self.head[off as usize..end as usize]));
        }
        let mut buf = Vec::new();
        buf.try_reserve_exact(usize::try_from(n).ok()?).ok()?;
        buf.resize(n as usize, 0);
        self.file.read_exact_at(&mut buf, off).ok()?;
        Some(Cow::Owned(buf))
    }
}

/// The first (up to) 64 bytes: every ELF header field the readers use.
fn header<I: Image + ?Sized>(file: &I) -> Cow<'_, [u8]> {
    file.bytes(0, file.size().min(HEADER_BYTES))
        .unwrap_or(Cow::Borrowed(&[]))
}

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
pub(crate) fn check<I: Image + ?Sized>(image: &I) -> Result<()> {
    let bad = |m: String| Error::Load {
        path: Default::default(),
        message: m,
    };
    let len = image.size();
    let short = || bad(format!("truncated ELF file ({len} bytes)"));
    let file = &*header(image);
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
    let table_end = phentsize
        .checked_mul(phnum)
        .and_then(|s| s.checked_add(phoff));
    if table_end.is_none_or(|e| e > len) || phentsize < if is64 { 56 } else { 32 } {
        return Err(short());
    }
    for i in 0..phnum {
        let entry = image
            .bytes(phoff + i * phentsize, phentsize)
            .ok_or_else(short)?;
        let p_type = u32_at(&entry, 0).ok_or_else(short)?;
        let (offset, filesz) = if is64 {
            (u64_at(&entry, 8), u64_at(&entry, 32))
        } else {
            (u32_at(&entry, 4), u32_at(&entry, 16))
        };
        let (offset, filesz) = (offset.ok_or_else(short)?, filesz.ok_or_else(short)?);
        // PT_LOAD = 1, PT_DYNAMIC = 2: what the loader maps and reads.
        if (p_type == 1 || p_type == 2) && offset.checked_add(filesz).is_none_or(|e| e > len) {
            return Err(short());
        }
    }
    Ok(())
}

/// One section header, the fields Mote uses.
struct Section {
    kind: u64,
    offset: u64,
    size: u64,
    link: u64,
    entsize: u64,
}

/// The kernels a library exports: `<name>` for every `__tvm_ffi_<name>` in its dynamic symbol
/// table that is a defined function, global or weak, of default or protected visibility, and
/// does not start with `__tvm_ffi__`; sorted, without duplicates. The table is found through
/// the section headers (`SHT_DYNSYM` and the string table its `sh_link` names). `file` has
/// passed [`check`]. Anything that does not fit in the file is a format error
/// (docs/tvm-format.md §1.4).
pub(crate) fn exported_kernels<I: Image + ?Sized>(image: &I) -> Result<Vec<String>> {
    let bad = |m: String| Error::Format(format!("ELF dynamic symbol table: {m}"));
    let len = image.size();
    let short = || {
        bad(format!(
            "section headers past the end of the file ({len} bytes)"
        ))
    };
    let file = &*header(image);
    let is64 = match file.get(4) {
        Some(2) => true,
        Some(1) => false,
        _ => return Err(bad("not a 32- or 64-bit ELF file".into())),
    };
    let (shoff, shentsize, shnum) = if is64 {
        (u64_at(file, 40), u16_at(file, 58), u16_at(file, 60))
    } else {
        (u32_at(file, 32), u16_at(file, 46), u16_at(file, 48))
    };
    let (shoff, shentsize, mut shnum) = (
        shoff.ok_or_else(short)?,
        shentsize.ok_or_else(short)?,
        shnum.ok_or_else(short)?,
    );
    if shoff == 0 {
        return Err(bad(
            "the file has no section headers, so Mote cannot list its kernels".into(),
        ));
    }
    if shentsize < if is64 { 64 } else { 40 } {
        return Err(bad(format!("section header size {shentsize} is too small")));
    }
    let at = |i: u64| -> Result<Section> {
        let h = i
            .checked_mul(shentsize)
            .and_then(|o| o.checked_add(shoff))
            .ok_or_else(short)?;
        let e = image.bytes(h, shentsize).ok_or_else(short)?;
        let f = if is64 {
            (
                u32_at(&e, 4),
                u64_at(&e, 24),
                u64_at(&e, 32),
                u32_at(&e, 40),
                u64_at(&e, 56),
            )
        } else {
            (
                u32_at(&e, 4),
                u32_at(&e, 16),
                u32_at(&e, 20),
                u32_at(&e, 24),
                u32_at(&e, 36),
            )
        };
        match f {
            (Some(kind), Some(offset), Some(size), Some(link), Some(entsize)) => Ok(Section {
                kind,
                offset,
                size,
                link,
                entsize,
            }),
            _ => Err(short()),
        }
    };
    // More than 0xff00 sections: the count is in section 0's `sh_size`.
    if shnum == 0 {
        shnum = at(0)?.size;
    }
    let mut dynsym = None;
    for i in 0..shnum {
        let s = at(i)?;
        if s.kind == SHT_DYNSYM {
            if dynsym.is_some() {
                return Err(bad("more than one dynamic symbol table".into()));
            }
            dynsym = Some(s);
        }
    }
    // No dynamic symbols at all: nothing is exported.
    let Some(dynsym) = dynsym else {
        return Ok(Vec::new());
    };
    let symbols = image
        .bytes(dynsym.offset, dynsym.size)
        .ok_or_else(|| bad("the symbol table lies outside the file".into()))?;
    let sym_size = if is64 { 24 } else { 16 };
    if dynsym.entsize < sym_size {
        return Err(bad(format!("symbol size {} is too small", dynsym.entsize)));
    }
    if dynsym.link >= shnum {
        return Err(bad(format!(
            "its string table is section {}, but there are {shnum}",
            dynsym.link
        )));
    }
    let strtab = at(dynsym.link)?;
    if strtab.kind != SHT_STRTAB {
        return Err(bad(format!(
            "its string table (section {}) is of type {}",
            dynsym.link, strtab.kind
        )));
    }
    let strings = image
        .bytes(strtab.offset, strtab.size)
        .ok_or_else(|| bad("the string table lies outside the file".into()))?;
    let mut kernels = Vec::new();
    for entry in symbols.chunks_exact(dynsym.entsize as usize) {
        // st_name, then (64-bit) st_info, st_other, st_shndx; (32-bit) after value and size.
        let (name, info, other, shndx) = if is64 {
            (u32_at(entry, 0), entry[4], entry[5], u16_at(entry, 6))
        } else {
            (u32_at(entry, 0), entry[12], entry[13], u16_at(entry, 14))
        };
        let (Some(name), Some(shndx)) = (name, shndx) else {
            return Err(short());
        };
        let (bind, kind, visibility) = (info >> 4, info & 0xf, other & 3);
        if !matches!(bind, STB_GLOBAL | STB_WEAK)
            || kind != STT_FUNC
            || shndx == SHN_UNDEF
            || !matches!(visibility, STV_DEFAULT | STV_PROTECTED)
        {
            continue;
        }
        let tail = strings
            .get(name as usize..)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                bad(format!(
                    "a symbol name at {name} lies outside the {}-byte string table",
                    strings.len()
                ))
            })?;
        let end = tail
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| bad(format!("the symbol name at {name} is not terminated")))?;
        let symbol = &tail[..end];
        if !symbol.starts_with(KERNEL_PREFIX) || symbol.starts_with(RESERVED_PREFIX) {
            continue;
        }
        // A name that is not UTF-8 cannot be asked for by name; it is not listed.
        if let Ok(k) = std::str::from_utf8(&symbol[KERNEL_PREFIX.len()..]) {
            if !k.is_empty() {
                kernels.push(k.to_string());
            }
        }
    }
    kernels.sort();
    kernels.dedup();
    Ok(kernels)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-bit little-endian shared object with section headers `[null, .dynstr, .dynsym]`
    /// and these dynamic symbols: `(name, st_info, st_other, st_shndx)`.
    fn elf_with_symbols(symbols: &[(&str, u8, u8, u16)]) -> Vec<u8> {
        let mut strtab = vec![0u8];
        let mut syms = vec![0u8; 24]; // the null symbol
        for (name, info, other, shndx) in symbols {
            let at = strtab.len() as u32;
            strtab.extend_from_slice(name.as_bytes());
            strtab.push(0);
            let mut e = [0u8; 24];
            e[..4].copy_from_slice(&at.to_le_bytes());
            e[4] = *info;
            e[5] = *other;
            e[6..8].copy_from_slice(&shndx.to_le_bytes());
            syms.extend_from_slice(&e);
        }
        let mut f = vec![0u8; 64];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[16] = 3;
        let str_off = f.len() as u64;
        f.extend_from_slice(&strtab);
        let sym_off = f.len() as u64;
        f.extend_from_slice(&syms);
        let shoff = f.len() as u64;
        let section = |kind: u32, offset: u64, size: u64, link: u32, entsize: u64| {
            let mut h = [0u8; 64];
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&offset.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            h[40..44].copy_from_slice(&link.to_le_bytes());
            h[56..64].copy_from_slice(&entsize.to_le_bytes());
            h
        };
        f.extend_from_slice(&[0u8; 64]);
        f.extend_from_slice(&section(3, str_off, strtab.len() as u64, 0, 0));
        f.extend_from_slice(&section(11, sym_off, syms.len() as u64, 1, 24));
        f[40..48].copy_from_slice(&shoff.to_le_bytes());
        f[58..60].copy_from_slice(&64u16.to_le_bytes());
        f[60..62].copy_from_slice(&3u16.to_le_bytes());
        f
    }

    const FUNC_GLOBAL: u8 = 0x12;
    const FUNC_WEAK: u8 = 0x22;

    #[test]
    fn lists_defined_exported_kernel_functions_only() {
        let f = elf_with_symbols(&[
            ("__tvm_ffi_scale", FUNC_GLOBAL, 0, 9),
            ("__tvm_ffi_gemm", FUNC_GLOBAL, 0, 9),
            ("__tvm_ffi_main", FUNC_WEAK, 0, 9),
            ("__tvm_ffi_prot", FUNC_GLOBAL, 3, 9),
            ("__tvm_ffi_gemm", FUNC_GLOBAL, 0, 9),
            // Not kernels: the blob and slots (objects), reserved names, imports, local and
            // hidden symbols, other functions, the bare prefix.
            ("__tvm_ffi__library_bin", 0x11, 0, 9),
            ("__tvm_ffi__weird", FUNC_GLOBAL, 0, 9),
            ("__tvm_ffi_imported", FUNC_GLOBAL, 0, 0),
            ("__tvm_ffi_local", 0x02, 0, 9),
            ("__tvm_ffi_hidden", FUNC_GLOBAL, 2, 9),
            ("__tvm_ffi_data", 0x11, 0, 9),
            ("memcpy", FUNC_GLOBAL, 0, 9),
            ("__tvm_ffi_", FUNC_GLOBAL, 0, 9),
        ]);
        assert_eq!(
            exported_kernels(&f[..]).unwrap(),
            ["gemm", "main", "prot", "scale"]
        );
        assert!(exported_kernels(&elf_with_symbols(&[])[..])
            .unwrap()
            .is_empty());
    }

    #[test]
    fn malformed_symbol_tables_are_format_errors() {
        let good = elf_with_symbols(&[("__tvm_ffi_gemm", FUNC_GLOBAL, 0, 9)]);
        let shoff = u64::from_le_bytes(good[40..48].try_into().unwrap()) as usize;
        let (strtab, dynsym) = (shoff + 64, shoff + 128);
        let is_format = |f: &[u8], what: &str| match exported_kernels(f) {
            Err(Error::Format(m)) => m,
            r => panic!("{what}: {r:?}"),
        };
        let mut f = good.clone();
        f[40..48].fill(0);
        assert!(is_format(&f, "no section headers").contains("no section headers"));
        let mut f = good.clone();
        f[40..48].copy_from_slice(&(good.len() as u64).to_le_bytes());
        is_format(&f, "section headers past the end");
        let mut f = good.clone();
        f[58] = 32;
        is_format(&f, "small section headers");
        let mut f = good.clone();
        f[dynsym + 40] = 7; // sh_link past the table
        is_format(&f, "link out of range");
        let mut f = good.clone();
        f[dynsym + 40] = 2; // sh_link to itself, not a string table
        is_format(&f, "link to a non-string table");
        let mut f = good.clone();
        f[dynsym + 32..dynsym + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        is_format(&f, "symbol table size overflows");
        let mut f = good.clone();
        f[dynsym + 56] = 8;
        is_format(&f, "small symbol entries");
        let mut f = good.clone();
        f[strtab + 24..strtab + 32].copy_from_slice(&(good.len() as u64).to_le_bytes());
        is_format(&f, "string table outside the file");
        let mut f = good.clone();
        f[strtab + 32..strtab + 40].copy_from_slice(&5u64.to_le_bytes());
        is_format(&f, "names past the string table");
        let mut f = good.clone();
        f[64 + 15] = b'x'; // the NUL after `__tvm_ffi_gemm`: the last name runs off the table
        is_format(&f, "unterminated name");
        let mut f = good.clone();
        f.extend_from_slice(&good[dynsym..dynsym + 64]);
        f[60] = 4; // a second SHT_DYNSYM
        is_format(&f, "two symbol tables");
    }

    /// The loader reads a library file in pieces (`FileImage`): every verdict, on the whole
    /// file and on every cut of it, is the one the bytes in memory give.
    #[test]
    fn a_file_read_in_pieces_gives_the_verdicts_of_the_whole_file() {
        let good = elf_with_symbols(&[
            ("__tvm_ffi_gemm", FUNC_GLOBAL, 0, 9),
            ("__tvm_ffi_main", FUNC_WEAK, 0, 9),
        ]);
        let dir = std::env::temp_dir().join(format!("mote-elf-image-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lib.so");
        let verdicts = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            let image = FileImage::new(std::fs::File::open(&path).unwrap()).unwrap();
            assert_eq!(image.size(), bytes.len() as u64);
            let from_file = (
                check(&image).map_err(|e| e.to_string()),
                exported_kernels(&image).map_err(|e| e.to_string()),
            );
            let in_memory = (
                check(bytes).map_err(|e| e.to_string()),
                exported_kernels(bytes).map_err(|e| e.to_string()),
            );
            assert_eq!(from_file, in_memory, "{} bytes", bytes.len());
            from_file
        };
        let (_, kernels) = verdicts(&good);
        assert_eq!(kernels, Ok(vec!["gemm".to_string(), "main".to_string()]));
        for cut in (0..good.len()).step_by(7) {
            let _ = verdicts(&good[..cut]);
        }
        let dir_err = FileImage::new(std::fs::File::open(&dir).unwrap()).err();
        assert_eq!(
            dir_err.map(|e| e.kind()),
            Some(std::io::ErrorKind::IsADirectory)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_cut_and_byte_flip_is_an_answer_not_a_panic() {
        let good = elf_with_symbols(&[
            ("__tvm_ffi_gemm", FUNC_GLOBAL, 0, 9),
            ("__tvm_ffi_main", FUNC_WEAK, 0, 9),
        ]);
        for cut in 0..good.len() {
            let _ = exported_kernels(&good[..cut]);
        }
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut f = good.clone();
                f[i] ^= 1 << bit;
                let _ = exported_kernels(&f[..]);
            }
        }
    }

    #[test]
    fn rejects_what_is_not_a_whole_library() {
        assert!(check(&b""[..]).is_err());
        assert!(check(&b"\x7fELF"[..]).is_err());
        assert!(check(&[0u8; 100][..]).is_err());
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[16] = 2; // an executable, not a shared object
        assert!(check(&h[..]).is_err());
    }
}
