//! Reading a model library as data, for the code-free path (docs/code-free.md): the module blob
//! and the names of the kernels, out of the file's bytes, with nothing mapped as code and
//! nothing run. ELF and Mach-O are parsed by the `object` crate; what is ours is the choice of
//! symbols, the bounds and the relocation check, plus two small readers for what
//! `export_library("m.tar")` writes: the ustar container and, for a model without kernels, the
//! C array TVM writes the blob as (docs/code-free.md §2).

use std::borrow::Cow;

use object::{Object, ObjectSection, ObjectSymbol, SymbolSection};

use crate::error::{Error, Result};

/// The blob symbol's name after a prefix (system-lib objects; docs/code-free.md §2).
const BLOB_SUFFIX: &str = "__tvm_ffi__library_bin";
/// Prefix of kernel symbols (docs/tvm-format.md §1.3); `__tvm_ffi__` names are not kernels.
const KERNEL_PREFIX: &str = "__tvm_ffi_";
const RESERVED_PREFIX: &str = "__tvm_ffi__";
/// Bytes of the blob's length field (docs/tvm-format.md §2.1).
const LENGTH_BYTES: usize = 8;
const TAR_BLOCK: usize = 512;
/// `export_library("m.tar")` compresses the archive with gzip.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// Deflate expands at most about 1032:1; a larger claim is a corrupt (or hostile) stream.
const MAX_INFLATION: usize = 1032;
/// And whatever the ratio, no archive over 4 GiB is taken apart in memory.
const MAX_TAR_BYTES: u64 = 1 << 32;
/// Names a message lists before "and N more", and the characters kept of each: a file with
/// many (or very long) symbol or member names must not make a message of megabytes.
const MAX_LISTED: usize = 3;
const MAX_NAME_CHARS: usize = 80;

#[cfg(test)]
thread_local! {
    /// `find_blob`'s work on this thread: symbols looked at plus prefixes compared (the
    /// linear-time test reads it).
    static BLOB_WORK: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count_blob_work() {
    #[cfg(test)]
    BLOB_WORK.with(|w| w.set(w.get() + 1));
}

/// What a library file holds, read as data.
#[derive(Debug)]
pub(crate) struct Image<'a> {
    /// The blob symbol's bytes: the `u64` length and the payload it claims (nothing after).
    /// Borrowed when the file holds them verbatim (an ELF or Mach-O file, an uncompressed tar
    /// of objects), so a caller that keeps the file can leave the weights in it; owned when
    /// they had to be decoded (a gzip-compressed tar, TVM's C array).
    pub blob: Cow<'a, [u8]>,
    /// The blob symbol's prefix (`""` for a library made without `system_lib_prefix`).
    pub prefix: String,
    /// Every `__tvm_ffi_<name>` code symbol the file defines: `<name>`, without the prefix,
    /// sorted and without duplicates.
    pub kernels: Vec<String>,
    /// What the file was, for messages (`"ELF shared library"`, `"tar of lib0.c + devc.c"`).
    pub container: String,
}

/// Read `bytes` (an ELF or Mach-O library or object, or a tar of objects / TVM's C sources).
/// Every malformed input is [`Error::Format`]; a container Mote does not read is
/// [`Error::Unsupported`].
///
/// `budget` bounds what decoding may allocate (`LoadOptions::memory_budget`): a compressed
/// archive that inflates past it is [`Error::ResourceExhausted`], found while inflating.
pub(crate) fn read(bytes: &[u8], budget: u64) -> Result<Image<'_>> {
    if bytes.starts_with(&GZIP_MAGIC) {
        let tar = gunzip(bytes, budget)?;
        let image = read_tar(&tar)?;
        return Ok(Image {
            blob: Cow::Owned(image.blob.into_owned()),
            ..image
        });
    }
    if is_tar(bytes) {
        return read_tar(bytes);
    }
    let file = parse_object(bytes, "the file")?;
    let (blob, prefix) = find_blob(&file, "the file")?.ok_or_else(|| no_blob("the file", &file))?;
    Ok(Image {
        blob: Cow::Borrowed(blob),
        prefix,
        kernels: kernels_of(&file),
        container: describe(&file),
    })
}

fn parse_object<'a>(bytes: &'a [u8], what: &str) -> Result<object::File<'a>> {
    if bytes.len() >= 4
        && u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) == 0xcafe_babe
    {
        return Err(Error::Unsupported(format!(
            "{what} is a universal (fat) Mach-O file; extract the slice for this machine with \
             `lipo -thin` first"
        )));
    }
    object::File::parse(bytes).map_err(|e| {
        Error::Format(format!(
            "{what} is not an ELF or Mach-O library or object Mote can read: {e}"
        ))
    })
}

fn describe(file: &object::File<'_>) -> String {
    let format = match file.format() {
        object::BinaryFormat::Elf => "ELF",
        object::BinaryFormat::MachO => "Mach-O",
        _ => "object",
    };
    let kind = match file.kind() {
        object::ObjectKind::Relocatable => "relocatable object",
        object::ObjectKind::Dynamic => "shared library",
        object::ObjectKind::Executable => "executable",
        _ => "file",
    };
    format!("{format} {kind}")
}

fn no_blob(what: &str, file: &object::File<'_>) -> Error {
    Error::Unsupported(format!(
        "{what} ({}) defines no {BLOB_SUFFIX}: it has no Relax program (a kernel-only library \
         is all compiled code and cannot be loaded code-free)",
        describe(file)
    ))
}

/// A symbol's name as the C source spells it: Mach-O adds a leading underscore.
fn c_name<'a>(file: &object::File<'_>, raw: &'a str) -> &'a str {
    if file.format() == object::BinaryFormat::MachO {
        raw.strip_prefix('_').unwrap_or(raw)
    } else {
        raw
    }
}

/// Every defined symbol of the file: the static table and, for a shared library, the dynamic
/// one (a stripped library has only the latter).
fn defined_symbols<'a, 'f>(
    file: &'f object::File<'a>,
) -> impl Iterator<Item = object::Symbol<'a, 'f>> + 'f {
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.is_definition())
}

/// `name`, or its first `MAX_NAME_CHARS` characters and an ellipsis.
fn clip(name: &str) -> Cow<'_, str> {
    match name.char_indices().nth(MAX_NAME_CHARS) {
        Some((at, _)) => Cow::Owned(format!("{}…", &name[..at])),
        None => Cow::Borrowed(name),
    }
}

/// The first `MAX_LISTED` of `names`, clipped, joined with `sep`, then how many were left out.
fn list_names(names: &[&str], sep: &str) -> String {
    let mut out = names
        .iter()
        .take(MAX_LISTED)
        .map(|n| clip(n))
        .collect::<Vec<_>>()
        .join(sep);
    if names.len() > MAX_LISTED {
        out.push_str(&format!("{sep}and {} more", names.len() - MAX_LISTED));
    }
    out
}

/// The blob symbol's bytes and prefix; `None` if the file has none. A second, different blob
/// symbol is an error naming the two.
///
/// One pass that keeps the first prefix and stops at the first that differs: work linear in
/// the symbol table, and a message of two names however many blobs there are. (Comparing
/// every new prefix with all earlier ones took 39 s and gave a 4.8 MB message on an 8.5 MB
/// library; issue 27, item 5.)
fn find_blob<'a>(file: &object::File<'a>, what: &str) -> Result<Option<(&'a [u8], String)>> {
    let mut first: Option<(&'a str, object::Symbol<'a, '_>)> = None;
    for sym in defined_symbols(file) {
        count_blob_work();
        let Ok(raw) = sym.name() else { continue };
        let Some(prefix) = c_name(file, raw).strip_suffix(BLOB_SUFFIX) else {
            continue;
        };
        match &first {
            None => first = Some((prefix, sym)),
            Some((p, _)) if *p == prefix => {}
            Some((p, _)) => {
                return Err(Error::Unsupported(format!(
                    "{what} holds more than one module blob ({}{BLOB_SUFFIX}, {}{BLOB_SUFFIX}); \
                     load one model per file",
                    clip(p),
                    clip(prefix)
                )));
            }
        }
    }
    let Some((prefix, sym)) = first else {
        return Ok(None);
    };
    let prefix = prefix.to_string();
    let bad = |m: String| Error::Format(format!("{what}: {}{BLOB_SUFFIX} {m}", clip(&prefix)));
    let SymbolSection::Section(index) = sym.section() else {
        return Err(bad("is not defined in a section".into()));
    };
    let section = file
        .section_by_index(index)
        .map_err(|e| bad(format!("names a section that is not there: {e}")))?;
    let data = section.data().map_err(|e| {
        bad(format!(
            "lies in a section whose data is outside the file: {e}"
        ))
    })?;
    // The symbol's place in the section's file bytes; a section without file bytes (.bss)
    // has empty data, so the checks below refuse it.
    let start = sym
        .address()
        .checked_sub(section.address())
        .and_then(|o| usize::try_from(o).ok())
        .filter(|&o| o <= data.len())
        .ok_or_else(|| bad("lies outside its section".into()))?;
    let mut avail = &data[start..];
    // ELF records the symbol's size; Mach-O does not (0), and then the section bounds it.
    if let Ok(size) = usize::try_from(sym.size()) {
        if size != 0 {
            avail = avail
                .get(..size)
                .ok_or_else(|| bad("is larger than its section".into()))?;
        }
    }
    let total = blob_extent(avail).map_err(bad)?;
    let blob = &avail[..total];
    check_no_relocations(file, &section, sym.address(), start, total).map_err(bad)?;
    Ok(Some((blob, prefix)))
}

/// The blob's extent (length field plus payload) within `avail`, or why it does not fit.
fn blob_extent(avail: &[u8]) -> std::result::Result<usize, String> {
    let Some(len) = avail.first_chunk::<LENGTH_BYTES>() else {
        return Err(format!(
            "is truncated: {} bytes, less than its length field",
            avail.len()
        ));
    };
    let claimed = u64::from_le_bytes(*len);
    usize::try_from(claimed)
        .ok()
        .and_then(|n| n.checked_add(LENGTH_BYTES))
        .filter(|&n| n <= avail.len())
        .ok_or_else(|| {
            format!(
                "claims {claimed} bytes but only {} are there",
                avail.len() - LENGTH_BYTES
            )
        })
}

/// Refuse a blob some relocation would patch at load time: its file bytes would not be the
/// bytes the program sees.
fn check_no_relocations(
    file: &object::File<'_>,
    section: &object::Section<'_, '_>,
    address: u64,
    start: usize,
    len: usize,
) -> std::result::Result<(), String> {
    let (start, len) = (start as u64, len as u64);
    if let Some((offset, _)) = section
        .relocations()
        .find(|(o, _)| (start..start + len).contains(o))
    {
        return Err(format!(
            "has a relocation at byte {} of the blob: its bytes in the file are not final",
            offset - start
        ));
    }
    if let Some(mut dynamic) = file.dynamic_relocations() {
        if let Some((at, _)) =
            dynamic.find(|(a, _)| (address..address.saturating_add(len)).contains(a))
        {
            return Err(format!(
                "has a dynamic relocation at byte {} of the blob: its bytes in the file are not final",
                at - address
            ));
        }
    }
    Ok(())
}

/// `<name>` of every defined code symbol `[P]__tvm_ffi_<name>` (any prefix `P`).
fn kernels_of(file: &object::File<'_>) -> Vec<String> {
    let mut names: Vec<String> = defined_symbols(file)
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .filter_map(|s| {
            let name = c_name(file, s.name().ok()?);
            let at = name.find(KERNEL_PREFIX)?;
            let rest = &name[at..];
            if rest.starts_with(RESERVED_PREFIX) {
                return None;
            }
            Some(rest[KERNEL_PREFIX.len()..].to_string())
        })
        .filter(|n| !n.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

// ---------------------------------------------------------------------------------------------
// The tar that export_library("m.tar") writes
// ---------------------------------------------------------------------------------------------

/// The decompressed bytes of a gzip file that holds a tar archive, bounded by `budget` (the
/// load's memory budget) and by what deflate can produce (see `MAX_INFLATION`). The first tar
/// block is inflated and checked alone: a gzip file that does not hold a tar is refused before
/// the rest is inflated (a 1 MB file of zeros would otherwise expand to a gigabyte first). The
/// output grows as it is inflated, so a stream over the budget stops there, having held at
/// most the budget.
pub(crate) fn gunzip(bytes: &[u8], budget: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let format_limit = (bytes.len() as u64)
        .saturating_mul(MAX_INFLATION as u64)
        .min(MAX_TAR_BYTES);
    let limit = format_limit.min(budget);
    let corrupt =
        |e: std::io::Error| Error::Format(format!("the gzip-compressed archive is corrupt: {e}"));
    let mut stream = flate2::read::GzDecoder::new(bytes).take(limit.saturating_add(1));
    let mut out = Vec::new();
    (&mut stream)
        .take(TAR_BLOCK as u64)
        .read_to_end(&mut out)
        .map_err(corrupt)?;
    if !is_tar(&out) {
        return Err(Error::Format(
            "a gzip file that does not hold a tar archive".into(),
        ));
    }
    // Grown by hand, never past `limit + 1` bytes of capacity: `read_to_end` doubles, and
    // could hold twice the budget just before finding the stream too long.
    let mut chunk = vec![0u8; 64 << 10];
    let cap = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(corrupt(e)),
        };
        if out.len() + n > out.capacity() {
            let want = (out.capacity().saturating_mul(2))
                .max(out.len() + n)
                .min(cap);
            out.try_reserve_exact(want.saturating_sub(out.len()))
                .map_err(|_| Error::OutOfMemory(want))?;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    if out.len() as u64 > limit {
        if limit == budget {
            return Err(Error::ResourceExhausted {
                budget: "LoadOptions::memory_budget",
                message: format!(
                    "the gzip-compressed archive ({} bytes) inflates past the load's budget \
                     of {budget} bytes",
                    bytes.len()
                ),
            });
        }
        return Err(Error::Format(format!(
            "the gzip-compressed archive expands past {limit} bytes"
        )));
    }
    Ok(out)
}

/// A tar archive (what TVM's `export_library("m.tar")` writes), gzip-compressed or not, read
/// by the same code as a model's `.tar` (docs/code-free.md): for tools that unpack one, such as
/// the RPC server's `download_linked_module`.
pub struct Tar<'a>(Cow<'a, [u8]>);

impl<'a> Tar<'a> {
    /// `bytes`, inflated when they start with gzip's magic: at most `budget` bytes (over it:
    /// [`Error::ResourceExhausted`]), and a gzip stream that does not hold a tar is refused
    /// before the rest is inflated. A plain archive is borrowed.
    pub fn new(bytes: &'a [u8], budget: u64) -> Result<Tar<'a>> {
        if bytes.starts_with(&GZIP_MAGIC) {
            return Ok(Tar(Cow::Owned(gunzip(bytes, budget)?)));
        }
        if !is_tar(bytes) {
            return Err(Error::Format("not a tar archive".into()));
        }
        Ok(Tar(Cow::Borrowed(bytes)))
    }

    /// Every member, in order ([`Error::Format`] for a damaged archive).
    pub fn entries(&self) -> Result<Vec<TarEntry<'_>>> {
        tar_entries(&self.0)
    }
}

fn is_tar(bytes: &[u8]) -> bool {
    bytes.len() >= TAR_BLOCK && &bytes[257..262] == b"ustar"
}

/// The regular files of a ustar archive, `(name, bytes)`, every header and size checked
/// against the archive's length.
fn tar_members(bytes: &[u8]) -> Result<Vec<(String, &[u8])>> {
    Ok(tar_entries(bytes)?
        .into_iter()
        .filter(|e| e.kind == TarKind::File)
        .map(|e| (e.name, e.data))
        .collect())
}

/// What a tar member is (its type flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TarKind {
    /// A regular file (`'0'`, or NUL in old archives).
    File,
    /// A folder (`'5'`).
    Folder,
    /// A pax extended header (`'x'`, `'g'`): metadata of the members after it.
    Pax,
    /// Anything else (links, devices, FIFOs...), by its type flag.
    Other(u8),
}

/// One member of a tar archive: its name (with the ustar prefix joined), kind and bytes.
#[derive(Debug)]
pub struct TarEntry<'a> {
    pub name: String,
    pub kind: TarKind,
    pub data: &'a [u8],
}

/// Every member of a ustar archive, in order, every header's checksum and every size checked
/// against the archive's length; the end marker must be there.
fn tar_entries(bytes: &[u8]) -> Result<Vec<TarEntry<'_>>> {
    let bad = |m: String| Error::Format(format!("the tar archive {m}"));
    let mut out = Vec::new();
    let mut at = 0usize;
    loop {
        let Some(header) = bytes.get(at..at + TAR_BLOCK) else {
            return Err(bad(format!("is truncated at byte {at} (no end marker)")));
        };
        if header.iter().all(|&b| b == 0) {
            return Ok(out);
        }
        let field = |r: std::ops::Range<usize>| {
            let f = &header[r];
            let end = f.iter().position(|&b| b == 0).unwrap_or(f.len());
            &f[..end]
        };
        let stored: u32 = header[148..156]
            .iter()
            .map(|&b| {
                if b.is_ascii_digit() || b == b' ' || b == 0 {
                    0
                } else {
                    1
                }
            })
            .sum();
        let sum: u32 = header
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u32::from(b)
                }
            })
            .sum();
        let recorded = octal(field(148..156)).filter(|_| stored == 0);
        if recorded != Some(u64::from(sum)) {
            return Err(bad(format!(
                "has a header with a bad checksum at byte {at}"
            )));
        }
        let size = octal(field(124..136))
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| bad(format!("has a bad size field at byte {at}")))?;
        let mut name = String::from_utf8_lossy(field(0..100)).into_owned();
        let prefix = field(345..500);
        if !prefix.is_empty() {
            name = format!("{}/{name}", String::from_utf8_lossy(prefix));
        }
        let data_at = at + TAR_BLOCK;
        let data = data_at
            .checked_add(size)
            .and_then(|end| bytes.get(data_at..end))
            .ok_or_else(|| bad(format!("member {name} claims {size} bytes past the end")))?;
        let kind = match header[156] {
            b'0' | 0 => TarKind::File,
            b'5' => TarKind::Folder,
            b'x' | b'g' => TarKind::Pax,
            t => TarKind::Other(t),
        };
        out.push(TarEntry { name, kind, data });
        at = data_at
            .checked_add(size.div_ceil(TAR_BLOCK) * TAR_BLOCK)
            .ok_or_else(|| bad("is too large".into()))?;
    }
}

fn octal(f: &[u8]) -> Option<u64> {
    let digits = std::str::from_utf8(f)
        .ok()?
        .trim_matches(|c| c == ' ' || c == '\0');
    if digits.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(digits, 8).ok()
}

fn read_tar<'a>(bytes: &'a [u8]) -> Result<Image<'a>> {
    let members = tar_members(bytes)?;
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
    let mut blob: Option<(Cow<'a, [u8]>, String)> = None;
    let mut kernels = Vec::new();
    let mut kinds = Vec::new();
    let mut set_blob = |found: (Cow<'a, [u8]>, String), member: &str| {
        if blob.is_some() {
            return Err(Error::Unsupported(format!(
                "the tar archive holds more than one module blob (again in {member}); load one model per file"
            )));
        }
        blob = Some(found);
        Ok(())
    };
    for (name, data) in &members {
        let base = name.rsplit('/').next().unwrap_or(name);
        let what = format!("{base} in the tar archive");
        if base.ends_with(".o") {
            let file = parse_object(data, &what)?;
            if let Some((found, prefix)) = find_blob(&file, &what)? {
                set_blob((Cow::Borrowed(found), prefix), base)?;
            }
            kernels.extend(kernels_of(&file));
            kinds.push(base.to_string());
        } else if base.ends_with(".c") || base.ends_with(".cc") {
            match c_array_blob(data, &what)? {
                Some((found, prefix)) => set_blob((Cow::Owned(found), prefix), base)?,
                // TVM's unit for an empty host module is a lone `;`; anything else is code
                // Mote cannot inspect (C-source kernels).
                None if data.iter().all(|b| b.is_ascii_whitespace() || *b == b';') => {}
                None => {
                    return Err(Error::Unsupported(format!(
                        "{what} is C source that is not TVM's module blob: it may hold kernels, \
                         which Mote cannot list; compile the archive into a library instead"
                    )))
                }
            }
            kinds.push(base.to_string());
        }
    }
    let (blob, prefix) = blob.ok_or_else(|| {
        Error::Unsupported(format!(
            "the tar archive (members {}) holds no {BLOB_SUFFIX}: not a Relax model exported \
             by export_library",
            list_names(&names, ", ")
        ))
    })?;
    kernels.sort();
    kernels.dedup();
    Ok(Image {
        blob,
        prefix,
        kernels,
        container: format!(
            "tar of {}",
            list_names(&kinds.iter().map(String::as_str).collect::<Vec<_>>(), " + ")
        ),
    })
}

/// The blob of TVM's C rendering of it (`devc.c`, written when the host module has no
/// kernel): `const unsigned char [P]__tvm_ffi__library_bin[N] = { 0x.., ... };`. `None` when
/// the source does not declare one. Every element must be a byte, and there must be exactly N.
fn c_array_blob(src: &[u8], what: &str) -> Result<Option<(Vec<u8>, String)>> {
    let bad = |m: &str| Error::Format(format!("{what}: the C array {BLOB_SUFFIX} {m}"));
    let Ok(text) = std::str::from_utf8(src) else {
        return Ok(None);
    };
    let key = format!("{BLOB_SUFFIX}[");
    // The definition is the occurrence followed by a length (the declaration has `[]`).
    let Some((at, rest)) = text
        .match_indices(&key)
        .map(|(i, _)| (i, &text[i + key.len()..]))
        .find(|(_, r)| r.starts_with(|c: char| c.is_ascii_digit()))
    else {
        return Ok(None);
    };
    let before = &text[..at];
    // After the last character that cannot be in a C identifier (which may be non-ASCII).
    let prefix_start = before
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let prefix = before[prefix_start..].to_string();
    let close = rest
        .find(']')
        .ok_or_else(|| bad("has no closing bracket"))?;
    let n: usize = rest[..close]
        .trim()
        .parse()
        .map_err(|_| bad("has a length that is not a number"))?;
    if n > src.len() {
        return Err(bad("claims more elements than the file could hold"));
    }
    let rest = &rest[close + 1..];
    let open = rest.find('{').ok_or_else(|| bad("has no initializer"))?;
    if !rest[..open]
        .trim()
        .trim_start_matches('=')
        .trim()
        .is_empty()
    {
        return Err(bad("is not followed by an initializer"));
    }
    let body = &rest[open + 1..];
    let end = body.find('}').ok_or_else(|| bad("is not closed"))?;
    let mut out = Vec::with_capacity(n);
    for item in body[..end].split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let v = match item.strip_prefix("0x").or_else(|| item.strip_prefix("0X")) {
            Some(h) => u8::from_str_radix(h, 16),
            None => item.parse::<u8>(),
        }
        .map_err(|_| bad(&format!("has an element that is not a byte: {item:.20}")))?;
        out.push(v);
    }
    if out.len() != n {
        return Err(bad(&format!("declares {n} bytes but lists {}", out.len())));
    }
    let total = blob_extent(&out).map_err(|m| bad(&m))?;
    if total != n {
        return Err(bad(&format!(
            "is {n} bytes, but its length field says {total}"
        )));
    }
    Ok(Some((out, prefix)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> Result<Image<'_>> {
        read(bytes, u64::MAX)
    }

    /// A gzip tar that inflates past the load's memory budget is `ResourceExhausted`, and
    /// inflating it never held much more than the budget.
    #[test]
    fn inflating_stops_at_the_load_budget() {
        let member = vec![0u8; 32 << 20];
        let archive = gzip(&tar(&[("lib0.c", &member[..])]));
        let budget = 4u64 << 20;
        crate::test_alloc::largest_since_reset();
        let err = read(&archive, budget).map(|_| ()).expect_err("over budget");
        let largest = crate::test_alloc::largest_since_reset();
        assert!(
            matches!(
                &err,
                Error::ResourceExhausted {
                    budget: "LoadOptions::memory_budget",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            largest as u64 <= budget + (256 << 10),
            "inflating held {largest} bytes at once, budget {budget}"
        );
        // The same archive under a budget it fits reads on (and fails later: no blob).
        assert!(!matches!(
            read(&archive, 64 << 20),
            Err(Error::ResourceExhausted { .. })
        ));
    }

    fn blob(payload: &[u8]) -> Vec<u8> {
        let mut b = (payload.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(payload);
        b
    }

    use crate::vm::craft::{c_source, tar};

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).expect("gzip");
        e.finish().expect("gzip")
    }

    /// A gzip file that holds no tar is refused after its first tar block is inflated, not
    /// after the whole stream (issue 27: 1 MB of compressed zeros expanded to a gigabyte
    /// before "not a tar"); a gzip tar still reads.
    #[test]
    fn a_gzip_without_a_tar_is_refused_before_inflating_the_rest() {
        let zeros = gzip(&vec![0u8; 64 << 20]);
        crate::test_alloc::largest_since_reset();
        let err = read_all(&zeros).map(|_| ()).expect_err("not a tar");
        let largest = crate::test_alloc::largest_since_reset();
        assert!(
            matches!(&err, Error::Format(m) if m.contains("does not hold a tar")),
            "{err:?}"
        );
        assert!(
            largest < 1 << 20,
            "inflating a non-tar allocated {largest} bytes at once"
        );
        let b = blob(b"payload");
        let archive = gzip(&tar(&[
            ("lib0.c", b";"),
            ("devc.c", c_source("", &b).as_bytes()),
        ]));
        let image = read_all(&archive).expect("a gzip tar reads");
        assert_eq!(&image.blob[..], &b[..]);
    }

    #[test]
    fn reads_the_c_array_and_its_prefix() {
        let b = blob(b"hello blob");
        let (got, prefix) = c_array_blob(c_source("", &b).as_bytes(), "devc.c")
            .unwrap()
            .unwrap();
        assert_eq!((got, prefix.as_str()), (b.clone(), ""));
        let (_, prefix) = c_array_blob(c_source("m1_", &b).as_bytes(), "devc.c")
            .unwrap()
            .unwrap();
        assert_eq!(prefix, "m1_");
        assert!(c_array_blob(b";", "lib0.c").unwrap().is_none());
        // A non-ASCII character right before the name is not part of the prefix.
        let odd = c_source("", &b).replace("char __tvm", "char\u{e9}__tvm");
        let (_, prefix) = c_array_blob(odd.as_bytes(), "devc.c").unwrap().unwrap();
        assert_eq!(prefix, "");
    }

    #[test]
    fn refuses_bad_c_arrays() {
        let b = blob(b"abc");
        let good = c_source("", &b);
        // One byte too many claimed, an element out of range, a length field past the end.
        let more = good.replace(&format!("[{}]", b.len()), &format!("[{}]", b.len() + 1));
        assert!(matches!(
            c_array_blob(more.as_bytes(), "x"),
            Err(Error::Format(_))
        ));
        let big = good.replacen("0x61", "0x161", 1);
        assert!(matches!(
            c_array_blob(big.as_bytes(), "x"),
            Err(Error::Format(_))
        ));
        let long = good.replacen("0x03", "0x09", 1);
        assert!(matches!(
            c_array_blob(long.as_bytes(), "x"),
            Err(Error::Format(_))
        ));
        // Every truncation is an error or "no blob", never a panic.
        for cut in 0..good.len() {
            let _ = c_array_blob(&good.as_bytes()[..cut], "x");
        }
    }

    #[test]
    fn reads_a_tar_of_c_sources() {
        let b = blob(b"payload");
        let src = c_source("", &b);
        let t = tar(&[("lib0.c", b";"), ("devc.c", src.as_bytes())]);
        let image = read_all(&t).unwrap();
        assert_eq!(image.blob, b);
        assert!(image.kernels.is_empty());
        assert_eq!(image.container, "tar of lib0.c + devc.c");
        // C code Mote cannot look into is refused.
        let t = tar(&[
            ("lib0.c", b"int f(void){return 0;}"),
            ("devc.c", src.as_bytes()),
        ]);
        assert!(matches!(read_all(&t), Err(Error::Unsupported(_))));
        // No blob at all.
        let t = tar(&[("lib0.c", b";")]);
        assert!(matches!(read_all(&t), Err(Error::Unsupported(_))));
    }

    #[test]
    fn tar_truncations_and_flips_are_typed_errors() {
        let src = c_source("", &blob(b"payload"));
        let t = tar(&[("lib0.c", b";"), ("devc.c", src.as_bytes())]);
        // One of the two zero blocks that end an archive is enough; cutting the second loses
        // nothing.
        let first_end_block = t.len() - 2 * TAR_BLOCK;
        for cut in 0..t.len() {
            match read_all(&t[..cut]) {
                Ok(image) if cut > first_end_block => assert_eq!(image.blob, blob(b"payload")),
                Ok(_) => panic!("a tar cut at {cut} bytes was accepted"),
                Err(Error::Format(_) | Error::Unsupported(_)) => {}
                Err(e) => panic!("unexpected error {e:?}"),
            }
        }
        for i in (0..t.len()).step_by(7) {
            let mut f = t.clone();
            f[i] ^= 0x5a;
            match read_all(&f) {
                Ok(image) => assert_eq!(image.blob.len(), blob(b"payload").len()),
                Err(Error::Format(_) | Error::Unsupported(_)) => {}
                Err(e) => panic!("unexpected error {e:?}"),
            }
        }
    }

    /// A relocatable object for `format` with `blob` in a read-only data section (followed by
    /// 16 bytes of something else), a kernel `fused_add`, the context slot, and optionally a
    /// relocation at `reloc_at` bytes into the blob.
    fn object_file(
        format: object::BinaryFormat,
        prefix: &str,
        blob: &[u8],
        reloc_at: Option<u64>,
    ) -> Vec<u8> {
        use object::write::{Object as Writer, Relocation, StandardSection, Symbol, SymbolSection};
        use object::{Architecture, Endianness, SymbolFlags, SymbolKind, SymbolScope};
        let arch = match format {
            object::BinaryFormat::MachO => Architecture::Aarch64,
            _ => Architecture::X86_64,
        };
        let mut w = Writer::new(format, arch, Endianness::Little);
        let data = w.section_id(StandardSection::ReadOnlyData);
        let mut bytes = blob.to_vec();
        bytes.extend_from_slice(&[0xee; 16]);
        let at = w.append_section_data(data, &bytes, 8);
        let sym = |name: String, value, size, kind, section| Symbol {
            name: name.into_bytes(),
            value,
            size,
            kind,
            scope: SymbolScope::Dynamic,
            weak: false,
            section: SymbolSection::Section(section),
            flags: SymbolFlags::None,
        };
        // Mach-O symbols carry no size; ELF ones do.
        let size = if format == object::BinaryFormat::MachO {
            0
        } else {
            blob.len() as u64
        };
        w.add_symbol(sym(
            format!("{prefix}{BLOB_SUFFIX}"),
            at,
            size,
            SymbolKind::Data,
            data,
        ));
        let text = w.section_id(StandardSection::Text);
        let code = w.append_section_data(text, &[0xc3; 4], 4);
        w.add_symbol(sym(
            format!("{prefix}__tvm_ffi_fused_add"),
            code,
            4,
            SymbolKind::Text,
            text,
        ));
        let slot = w.section_id(StandardSection::Data);
        let s = w.append_section_data(slot, &[0; 8], 8);
        w.add_symbol(sym(
            "__tvm_ffi__library_ctx".into(),
            s,
            8,
            SymbolKind::Data,
            slot,
        ));
        if let Some(off) = reloc_at {
            let target = w.section_symbol(text);
            w.add_relocation(
                data,
                Relocation {
                    offset: at + off,
                    symbol: target,
                    addend: 0,
                    flags: object::RelocationFlags::Generic {
                        kind: object::RelocationKind::Absolute,
                        encoding: object::RelocationEncoding::Generic,
                        size: 64,
                    },
                },
            )
            .expect("relocation");
        }
        w.write().expect("write object")
    }

    #[test]
    fn reads_elf_and_macho_objects() {
        let b = blob(b"a module blob");
        for (format, container) in [
            (object::BinaryFormat::Elf, "ELF relocatable object"),
            (object::BinaryFormat::MachO, "Mach-O relocatable object"),
        ] {
            for prefix in ["", "m1_"] {
                let file = object_file(format, prefix, &b, None);
                let image = read_all(&file).unwrap();
                assert_eq!(image.blob, b, "{container}");
                assert_eq!(image.prefix, prefix, "{container}");
                assert_eq!(image.kernels, ["fused_add"], "{container}");
                assert_eq!(image.container, container);
            }
        }
    }

    #[test]
    fn refuses_a_blob_with_a_relocation() {
        let b = blob(&[7u8; 32]);
        for format in [object::BinaryFormat::Elf, object::BinaryFormat::MachO] {
            match read_all(&object_file(format, "", &b, Some(16))) {
                Err(Error::Format(m)) => assert!(m.contains("relocation at byte 16"), "{m}"),
                other => panic!("{format:?}: {other:?}"),
            }
            // A relocation just after the blob does not touch it.
            assert!(read_all(&object_file(format, "", &b, Some(b.len() as u64))).is_ok());
        }
    }

    #[test]
    fn object_truncations_and_flips_are_typed_errors() {
        let b = blob(b"payload of a blob");
        for format in [object::BinaryFormat::Elf, object::BinaryFormat::MachO] {
            let o = object_file(format, "", &b, None);
            for cut in 0..o.len() {
                match read_all(&o[..cut]) {
                    Ok(image) => assert_eq!(image.blob, b, "{format:?} cut at {cut}"),
                    Err(Error::Format(_) | Error::Unsupported(_)) => {}
                    Err(e) => panic!("unexpected error {e:?}"),
                }
            }
            for i in 0..o.len() {
                for bit in [0x01, 0x80] {
                    let mut f = o.clone();
                    f[i] ^= bit;
                    match read_all(&f) {
                        Ok(_) | Err(Error::Format(_) | Error::Unsupported(_)) => {}
                        Err(e) => panic!("unexpected error {e:?}"),
                    }
                }
            }
            // The length field claiming one byte more than the section has.
            let mut long = b.clone();
            long[..8].copy_from_slice(&((b.len() - 8 + 16 + 1) as u64).to_le_bytes());
            let o = object_file(format, "", &long, None);
            assert!(matches!(read_all(&o), Err(Error::Format(_))), "{format:?}");
        }
    }

    /// An ELF object whose symbols are, in order, `names` (each `(name, is_blob)`): blob
    /// symbols point at one blob in read-only data, the others at a 4-byte function.
    fn elf_with_symbols(names: impl Iterator<Item = (String, bool)>) -> Vec<u8> {
        use object::write::{Object as Writer, StandardSection, Symbol, SymbolSection};
        use object::{Architecture, Endianness, SymbolFlags, SymbolKind, SymbolScope};
        let mut w = Writer::new(
            object::BinaryFormat::Elf,
            Architecture::X86_64,
            Endianness::Little,
        );
        let b = blob(b"one blob");
        let data = w.section_id(StandardSection::ReadOnlyData);
        let at = w.append_section_data(data, &b, 8);
        let text = w.section_id(StandardSection::Text);
        let code = w.append_section_data(text, &[0xc3; 4], 4);
        for (name, is_blob) in names {
            let (value, size, kind, section) = if is_blob {
                (at, b.len() as u64, SymbolKind::Data, data)
            } else {
                (code, 4, SymbolKind::Text, text)
            };
            w.add_symbol(Symbol {
                name: name.into_bytes(),
                value,
                size,
                kind,
                scope: SymbolScope::Dynamic,
                weak: false,
                section: SymbolSection::Section(section),
                flags: SymbolFlags::None,
            });
        }
        w.write().expect("write object")
    }

    /// `find_blob`'s counted work (symbols looked at plus prefixes compared) for one `read`.
    fn blob_work_of(bytes: &[u8]) -> (u64, Result<Image<'_>>) {
        BLOB_WORK.with(|w| w.set(0));
        let r = read_all(bytes);
        (BLOB_WORK.with(|w| w.get()), r)
    }

    /// Issue 27, item 5: an 8.5 MB library with many blob symbols took 39 s to refuse (every
    /// new prefix was compared with every earlier one) and gave a 4.8 MB message. The work is
    /// counted, not timed: at most one unit per symbol plus a constant, at 2,000 symbols and at
    /// 200,000; every message stays short.
    #[test]
    fn many_symbols_are_read_in_linear_work_with_short_messages() {
        const MAX_MESSAGE: usize = 600;
        for n in [2_000usize, 200_000] {
            // Every symbol a blob with a prefix of its own.
            let file = elf_with_symbols((0..n).map(|i| (format!("m{i}_{BLOB_SUFFIX}"), true)));
            let (work, r) = blob_work_of(&file);
            assert!(
                work <= n as u64 + 16,
                "{n} blob symbols: {work} units of work, more than one per symbol"
            );
            match r {
                Err(Error::Unsupported(m)) => {
                    assert!(
                        m.len() <= MAX_MESSAGE,
                        "{n} blob symbols: a {}-byte message",
                        m.len()
                    );
                    assert!(m.contains(&format!("m0_{BLOB_SUFFIX}")), "{m}");
                    assert!(m.contains(&format!("m1_{BLOB_SUFFIX}")), "{m}");
                }
                other => panic!("{n} blob symbols: {other:?}"),
            }
            // One blob, then kernels, then a second blob at the very end: a whole pass.
            let names = std::iter::once((format!("p_{BLOB_SUFFIX}"), true))
                .chain((0..n).map(|i| (format!("p___tvm_ffi_k{i}"), false)))
                .chain(std::iter::once((format!("q_{BLOB_SUFFIX}"), true)));
            let file = elf_with_symbols(names);
            let (work, r) = blob_work_of(&file);
            assert!(
                work <= 2 * (n as u64 + 2) + 16,
                "{n} kernels between two blobs: {work} units of work"
            );
            match r {
                Err(Error::Unsupported(m)) => {
                    assert!(
                        m.len() <= MAX_MESSAGE,
                        "{n} kernels: a {}-byte message",
                        m.len()
                    );
                    assert!(m.contains(&format!("q_{BLOB_SUFFIX}")), "{m}");
                }
                other => panic!("{n} kernels between two blobs: {other:?}"),
            }
            // And with the one blob only, every kernel is listed.
            let names = std::iter::once((format!("p_{BLOB_SUFFIX}"), true))
                .chain((0..n).map(|i| (format!("p___tvm_ffi_k{i}"), false)));
            let file = elf_with_symbols(names);
            let (work, r) = blob_work_of(&file);
            assert!(
                work <= 2 * (n as u64 + 1) + 16,
                "{n} kernels: {work} units of work"
            );
            let image = r.expect("one blob and many kernels");
            assert_eq!((image.prefix.as_str(), image.kernels.len()), ("p_", n));
        }
        // A blob name of a megabyte is cut short in the message.
        let long = "x".repeat(1 << 20);
        let file = elf_with_symbols(
            [
                (format!("{long}{BLOB_SUFFIX}"), true),
                (format!("y{long}{BLOB_SUFFIX}"), true),
            ]
            .into_iter(),
        );
        match read_all(&file) {
            Err(Error::Unsupported(m)) => assert!(m.len() <= MAX_MESSAGE, "{} bytes", m.len()),
            other => panic!("{other:?}"),
        }
        // A tar of 5,000 members and no blob: the message names a few members, not all.
        let members: Vec<(String, &[u8])> = (0..5_000)
            .map(|i| (format!("lib{i}.c"), &b";"[..]))
            .collect();
        let refs: Vec<(&str, &[u8])> = members.iter().map(|(n, d)| (n.as_str(), *d)).collect();
        match read_all(&tar(&refs)) {
            Err(Error::Unsupported(m)) => {
                assert!(m.len() <= MAX_MESSAGE, "{} bytes: {:.200}", m.len(), m);
                assert!(m.contains("lib0.c") && m.contains("4997 more"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn non_objects_are_format_errors() {
        for bytes in [
            &b""[..],
            b"\x7fELF",
            b"\x7fELF\x02\x01\x01\0garbage",
            b"not a library",
        ] {
            assert!(
                matches!(read_all(bytes), Err(Error::Format(_))),
                "{bytes:?}"
            );
        }
        assert!(matches!(
            read_all(&[0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2]),
            Err(Error::Unsupported(_))
        ));
    }
}
