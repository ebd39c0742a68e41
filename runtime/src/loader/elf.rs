//! A pre-flight check of ELF files before `dlopen`: the system loader maps segments without
//! checking them against the file size, so a truncated library would crash the process
//! (SIGBUS) instead of failing to load. Also the list of kernels a library exports, read from
//! its dynamic symbol table: a kernel-only library has no module blob to name them
//! (docs/tvm-format.md §1.4). Both read the file through `object`'s ELF structures, from
//! memory or from disk piece by piece ([`FileImage`]).

use object::elf::{self, FileHeader32, FileHeader64};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable, Sym, SymbolTable};
use object::{Endianness, ReadCache, ReadRef, StringTable};

use crate::error::{Error, Result};

/// Prefix of kernel symbols, and of the library's own data symbols, which are not kernels
/// (docs/tvm-format.md §1.3).
const KERNEL_PREFIX: &[u8] = b"__tvm_ffi_";
const RESERVED_PREFIX: &[u8] = b"__tvm_ffi__";
/// Mote reads little-endian files only (the pre-check refuses the others).
const LE: Endianness = Endianness::Little;

/// A library file read on demand: only the pieces the readers below ask for (headers, the
/// dynamic symbol and string tables) are read and kept, so checking a large model before
/// `dlopen` does not hold a copy of it.
pub(crate) type FileImage = ReadCache<std::fs::File>;

/// `file` as a [`FileImage`]; a directory is `IsADirectory` (it opens, but cannot be read).
pub(crate) fn file_image(file: std::fs::File) -> std::io::Result<FileImage> {
    if file.metadata()?.is_dir() {
        return Err(std::io::ErrorKind::IsADirectory.into());
    }
    Ok(ReadCache::new(file))
}

/// The file's length; a file whose length cannot be read is as good as empty.
fn size<'a, R: ReadRef<'a>>(data: R) -> u64 {
    data.len().unwrap_or(0)
}

fn machine_name(m: elf::Machine) -> String {
    match m {
        elf::EM_386 => "x86".into(),
        elf::EM_ARM => "arm".into(),
        elf::EM_X86_64 => "x86_64".into(),
        elf::EM_AARCH64 => "aarch64".into(),
        elf::EM_RISCV => "riscv".into(),
        m => format!("machine {m}"),
    }
}

fn host_machine() -> Option<elf::Machine> {
    Some(match std::env::consts::ARCH {
        "x86" => elf::EM_386,
        "arm" => elf::EM_ARM,
        "x86_64" => elf::EM_X86_64,
        "aarch64" => elf::EM_AARCH64,
        "riscv64" => elf::EM_RISCV,
        _ => return None,
    })
}

/// A pre-check failure; `dlopen`'s caller adds the path.
fn refused(message: String) -> Error {
    Error::Load {
        path: Default::default(),
        message,
    }
}

fn truncated(len: u64) -> Error {
    refused(format!("truncated ELF file ({len} bytes)"))
}

/// Check that `data` (the whole library) is a little-endian ELF shared object for this machine
/// whose program headers and loadable segments lie inside the file.
pub(crate) fn check<'a, R: ReadRef<'a>>(data: R) -> Result<()> {
    let len = size(data);
    // The identification bytes, in the smallest header there is (52 bytes, 32-bit).
    let ident = match data.read_at::<FileHeader32<Endianness>>(0) {
        Ok(header) if header.e_ident().magic == elf::ELFMAG => header.e_ident(),
        _ => return Err(truncated(len)),
    };
    let is64 = match ident.class {
        elf::ELFCLASS32 => false,
        elf::ELFCLASS64 => true,
        c => return Err(refused(format!("unknown ELF class {c}"))),
    };
    if ident.data != elf::ELFDATA2LSB {
        return Err(refused("big-endian ELF file".into()));
    }
    if is64 != cfg!(target_pointer_width = "64") {
        return Err(refused(format!(
            "{}-bit library in a {}-bit process",
            if is64 { 64 } else { 32 },
            usize::BITS
        )));
    }
    if is64 {
        check_headers::<FileHeader64<Endianness>, R>(data, len)
    } else {
        check_headers::<FileHeader32<Endianness>, R>(data, len)
    }
}

/// [`check`] past the identification bytes, for the file's class.
fn check_headers<'a, Elf: FileHeader<Endian = Endianness>, R: ReadRef<'a>>(
    data: R,
    len: u64,
) -> Result<()> {
    let header = data.read_at::<Elf>(0).map_err(|_| truncated(len))?;
    let e_type = header.e_type(LE);
    if e_type != elf::ET_DYN {
        return Err(refused(format!(
            "ELF type {e_type} is not a shared object (export the model with export_library)"
        )));
    }
    let machine = header.e_machine(LE);
    if let Some(host) = host_machine() {
        if machine != host {
            return Err(refused(format!(
                "library built for {}, but this is {}",
                machine_name(machine),
                machine_name(host)
            )));
        }
    }
    // The whole table, its entries of exactly the size of a program header (which the system
    // loader requires too).
    let segments = header
        .program_headers(LE, data)
        .map_err(|_| truncated(len))?;
    for segment in segments {
        // What the loader maps and reads.
        let p_type = segment.p_type(LE);
        let (offset, filesz) = segment.file_range(LE);
        if (p_type == elf::PT_LOAD || p_type == elf::PT_DYNAMIC)
            && offset.checked_add(filesz).is_none_or(|e| e > len)
        {
            return Err(truncated(len));
        }
    }
    Ok(())
}

/// The kernels a library exports: `<name>` for every `__tvm_ffi_<name>` in its dynamic symbol
/// table that is a defined function, global or weak, of default or protected visibility, and
/// does not start with `__tvm_ffi__`; sorted, without duplicates. The table is found through
/// the section headers (`SHT_DYNSYM` and the string table its `sh_link` names). `data` has
/// passed [`check`]. Anything that does not fit in the file is a format error
/// (docs/tvm-format.md §1.4).
pub(crate) fn exported_kernels<'a, R: ReadRef<'a>>(data: R) -> Result<Vec<String>> {
    let class = data.read_bytes_at(4, 1).ok().and_then(|b| b.first());
    match class.map(|&c| elf::FileClass(c)) {
        Some(elf::ELFCLASS64) => kernels_of::<FileHeader64<Endianness>, R>(data),
        Some(elf::ELFCLASS32) => kernels_of::<FileHeader32<Endianness>, R>(data),
        _ => Err(malformed("not a 32- or 64-bit ELF file".into())),
    }
}

fn malformed(m: String) -> Error {
    Error::Format(format!("ELF dynamic symbol table: {m}"))
}

/// [`exported_kernels`] for the file's class.
fn kernels_of<'a, Elf: FileHeader<Endian = Endianness>, R: ReadRef<'a>>(
    data: R,
) -> Result<Vec<String>> {
    let len = size(data);
    let short = || {
        malformed(format!(
            "section headers past the end of the file ({len} bytes)"
        ))
    };
    let header = data.read_at::<Elf>(0).map_err(|_| short())?;
    if header.e_shoff(LE).into() == 0 {
        return Err(malformed(
            "the file has no section headers, so Mote cannot list its kernels".into(),
        ));
    }
    let (shentsize, entry) = (header.e_shentsize(LE), size_of::<Elf::SectionHeader>());
    if usize::from(shentsize) != entry {
        return Err(malformed(format!(
            "section header size {shentsize} is not {entry}"
        )));
    }
    // The whole table (more than 0xff00 sections: the count is in section 0's `sh_size`).
    // Section names are not needed, so a bad `e_shstrndx` does not matter.
    let headers = header.section_headers(LE, data).map_err(|_| short())?;
    let sections = SectionTable::<Elf, R>::new(headers, StringTable::default());
    let mut dynsym = None;
    for (index, section) in sections.enumerate() {
        if section.sh_type(LE) == elf::SHT_DYNSYM && dynsym.replace((index, section)).is_some() {
            return Err(malformed("more than one dynamic symbol table".into()));
        }
    }
    // No dynamic symbols at all: nothing is exported.
    let Some((index, dynsym)) = dynsym else {
        return Ok(Vec::new());
    };
    let in_file = |s: &Elf::SectionHeader| {
        let (offset, size): (u64, u64) = (s.sh_offset(LE).into(), s.sh_size(LE).into());
        offset.checked_add(size).is_some_and(|end| end <= len)
    };
    if !in_file(dynsym) {
        return Err(malformed("the symbol table lies outside the file".into()));
    }
    let (entsize, sym_size) = (dynsym.sh_entsize(LE).into(), size_of::<Elf::Sym>() as u64);
    if entsize != sym_size {
        return Err(malformed(format!(
            "symbol size {entsize} is not {sym_size}"
        )));
    }
    let table_size: u64 = dynsym.sh_size(LE).into();
    if table_size % sym_size != 0 {
        return Err(malformed(format!(
            "its size {table_size} is not a multiple of the symbol size {sym_size}"
        )));
    }
    let link = dynsym.sh_link(LE);
    let Some(strtab) = headers.get(link as usize) else {
        return Err(malformed(format!(
            "its string table is section {link}, but there are {}",
            headers.len()
        )));
    };
    if strtab.sh_type(LE) != elf::SHT_STRTAB {
        return Err(malformed(format!(
            "its string table (section {link}) is of type {}",
            strtab.sh_type(LE)
        )));
    }
    if !in_file(strtab) {
        return Err(malformed("the string table lies outside the file".into()));
    }
    // `SymbolTable::parse` also reads the table's extended section indexes, if any: one entry
    // per symbol, in at most one section (so a damaged file cannot make it read more).
    let mut extended = headers
        .iter()
        .filter(|s| s.sh_type(LE) == elf::SHT_SYMTAB_SHNDX && s.link(LE) == index);
    let (first, second) = (extended.next(), extended.next());
    if second.is_some() || first.is_some_and(|s| s.sh_size(LE).into() != table_size / sym_size * 4)
    {
        return Err(malformed(
            "its extended section indexes are not one table of one entry per symbol".into(),
        ));
    }
    let symbols = SymbolTable::parse(LE, data, &sections, index, dynsym)
        .map_err(|e| malformed(e.to_string()))?;
    // The names, read whole once (not a read from the disk for each).
    let strings = data
        .read_bytes_at(strtab.sh_offset(LE).into(), strtab.sh_size(LE).into())
        .map_err(|()| malformed("the string table could not be read".into()))?;
    let names = StringTable::new(strings, 0, strings.len() as u64);
    let mut kernels = Vec::new();
    for symbol in symbols.iter() {
        if !matches!(symbol.st_bind(), elf::STB_GLOBAL | elf::STB_WEAK)
            || symbol.st_type() != elf::STT_FUNC
            || symbol.st_shndx(LE) == elf::SHN_UNDEF
            || !matches!(
                symbol.st_visibility(),
                elf::STV_DEFAULT | elf::STV_PROTECTED
            )
        {
            continue;
        }
        let at = symbol.st_name(LE);
        if u64::from(at) >= strings.len() as u64 {
            return Err(malformed(format!(
                "a symbol name at {at} lies outside the {}-byte string table",
                strings.len()
            )));
        }
        let name = names
            .get(at)
            .map_err(|()| malformed(format!("the symbol name at {at} is not terminated")))?;
        if !name.starts_with(KERNEL_PREFIX) || name.starts_with(RESERVED_PREFIX) {
            continue;
        }
        // A name that is not UTF-8 cannot be asked for by name; it is not listed.
        if let Ok(k) = std::str::from_utf8(&name[KERNEL_PREFIX.len()..]) {
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
        let is_format = |f: &[u8], what: &str, needle: &str| match exported_kernels(f) {
            Err(Error::Format(m)) => assert!(m.contains(needle), "{what}: {m}"),
            r => panic!("{what}: {r:?}"),
        };
        let mut f = good.clone();
        f[40..48].fill(0);
        is_format(&f, "no section headers", "no section headers");
        let mut f = good.clone();
        f[40..48].copy_from_slice(&(good.len() as u64).to_le_bytes());
        is_format(&f, "section headers past the end", "past the end");
        let mut f = good.clone();
        f[58] = 32;
        is_format(&f, "small section headers", "section header size 32");
        let mut f = good.clone();
        f[dynsym + 40] = 7; // sh_link past the table
        is_format(&f, "link out of range", "string table is section 7");
        let mut f = good.clone();
        f[dynsym + 40] = 2; // sh_link to itself, not a string table
        is_format(
            &f,
            "link to a non-string table",
            "(section 2) is of type 11",
        );
        let mut f = good.clone();
        f[dynsym + 32..dynsym + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        is_format(
            &f,
            "symbol table size overflows",
            "symbol table lies outside",
        );
        let mut f = good.clone();
        f[dynsym + 56] = 8;
        is_format(&f, "small symbol entries", "symbol size 8");
        let mut f = good.clone();
        f[strtab + 24..strtab + 32].copy_from_slice(&(good.len() as u64).to_le_bytes());
        is_format(
            &f,
            "string table outside the file",
            "string table lies outside",
        );
        let mut f = good.clone();
        f[strtab + 32..strtab + 40].copy_from_slice(&5u64.to_le_bytes());
        is_format(&f, "names past the string table", "not terminated");
        let mut f = good.clone();
        f[64 + 15] = b'x'; // the NUL after `__tvm_ffi_gemm`: the last name runs off the table
        is_format(&f, "unterminated name", "not terminated");
        let mut f = good.clone();
        f.extend_from_slice(&good[dynsym..dynsym + 64]);
        f[60] = 4; // a second SHT_DYNSYM
        is_format(&f, "two symbol tables", "more than one");
    }

    /// What the reader checks beyond the 11 defects above, because `object` reads the symbols
    /// as an array of whole entries and would read every extended-index table of them.
    #[test]
    fn odd_table_sizes_and_extended_indexes_are_format_errors() {
        let good = elf_with_symbols(&[("__tvm_ffi_gemm", FUNC_GLOBAL, 0, 9)]);
        let shoff = u64::from_le_bytes(good[40..48].try_into().unwrap()) as usize;
        let dynsym = shoff + 128;
        let message = |f: &[u8]| match exported_kernels(f) {
            Err(Error::Format(m)) => m,
            r => panic!("{r:?}"),
        };
        let mut f = good.clone();
        f[dynsym + 32] -= 1; // 47 bytes of symbols
        assert!(message(&f).contains("not a multiple of the symbol size 24"));
        let mut f = good.clone();
        f[shoff - 24] = 200; // the symbol's name starts past the 16-byte string table
        assert!(message(&f).contains("at 200 lies outside the 16-byte string table"));
        // Section 0 made an SHT_SYMTAB_SHNDX of the symbol table: the wrong size, then two.
        let mut f = good.clone();
        f[shoff + 4] = 18;
        f[shoff + 40] = 2;
        assert!(message(&f).contains("extended section index"));
        f[shoff + 32] = 8; // one 4-byte index per symbol (two with the null symbol)
        assert_eq!(exported_kernels(&f[..]).unwrap(), ["gemm"]);
        f.extend_from_within(shoff..shoff + 64);
        f[60] = 4;
        assert!(message(&f).contains("extended section index"));
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
            let image = file_image(std::fs::File::open(&path).unwrap()).unwrap();
            assert_eq!(size(&image), bytes.len() as u64);
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
        let dir_err = file_image(std::fs::File::open(&dir).unwrap()).err();
        assert_eq!(
            dir_err.map(|e| e.kind()),
            Some(std::io::ErrorKind::IsADirectory)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file that counts the bytes read from it.
    struct Counted<'c>(std::fs::File, &'c std::cell::Cell<u64>);

    impl std::io::Read for Counted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.set(self.1.get() + n as u64);
            Ok(n)
        }
    }

    impl std::io::Seek for Counted<'_> {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.0.seek(to)
        }
    }

    /// What the file on disk costs: the check and the listing of a 64 MiB library read its
    /// headers and symbol tables, not the file.
    #[test]
    fn checking_a_large_file_reads_only_its_headers_and_tables() {
        let mut big = elf_with_symbols(&[("__tvm_ffi_gemm", FUNC_GLOBAL, 0, 9)]);
        let tables = big.len() as u64;
        // One PT_LOAD segment covering the whole file (what the check looks at).
        let phoff = big.len() as u64;
        let mut ph = [0u8; 56];
        ph[..4].copy_from_slice(&1u32.to_le_bytes());
        big.extend_from_slice(&ph);
        big[32..40].copy_from_slice(&phoff.to_le_bytes());
        big[54..56].copy_from_slice(&56u16.to_le_bytes());
        big[56..58].copy_from_slice(&1u16.to_le_bytes());
        big[18..20].copy_from_slice(&host_machine().map_or(0, |m| m.0).to_le_bytes());
        let len: u64 = 64 << 20;
        let at = phoff as usize;
        big[at + 32..at + 40].copy_from_slice(&len.to_le_bytes());
        let path = std::env::temp_dir().join(format!("mote-elf-large-{}.so", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        std::io::Write::write_all(&mut &file, &big).unwrap();
        file.set_len(len).unwrap(); // the rest is a hole: no disk space
        drop(file);
        let read = std::cell::Cell::new(0);
        let image = ReadCache::new(Counted(std::fs::File::open(&path).unwrap(), &read));
        assert_eq!(size(&image), len);
        if host_machine().is_some() {
            check(&image).unwrap();
        }
        assert_eq!(exported_kernels(&image).unwrap(), ["gemm"]);
        std::fs::remove_file(&path).unwrap();
        // The headers (ELF, program, section) and the two tables, each read once.
        assert!(read.get() < 1024, "read {} of {tables} bytes", read.get());
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
