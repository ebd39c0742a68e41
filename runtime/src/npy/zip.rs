//! The zip container of `.npz` files, read and written by Mote (written from PKWARE's
//! APPNOTE.TXT; only what NumPy's `savez` and `savez_compressed` produce).
//!
//! Reading is strict. The end-of-central-directory record must close the buffer (an archive
//! comment is allowed, trailing bytes are not); the central directory must end where the end
//! records begin; every entry's local header and data must lie before the central directory,
//! and no two entries may share bytes or a name. Entries are stored (method 0) or deflated
//! (method 8); encryption, other methods and multi-disk archives are refused. ZIP64 end records
//! and ZIP64 extra fields are read (NumPy writes them for arrays of 2 GiB and more). Every size
//! and offset the archive states is checked against the buffer before use, and the memory an
//! entry takes is what its data really produces, never what a header claims: a stored entry is
//! a sub-slice of the input, a deflated one grows as the decoder produces bytes, up to the
//! claimed size (deflate cannot expand data more than 1032 to 1, so a claim beyond that is an
//! error before anything is decoded). The CRC-32 and uncompressed size of each entry are
//! verified.
//!
//! The writer writes stored entries, switching to ZIP64 records only where a size, an offset
//! or the entry count does not fit the classic fields.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::ops::Range;

use flate2::read::DeflateDecoder;
use flate2::Crc;

/// Errors of this module are messages; `npy.rs` wraps them in `Error::Npy` with the file name.
pub(crate) type ZipResult<T> = std::result::Result<T, String>;

const LOCAL_SIG: u32 = 0x0403_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const END_SIG: u32 = 0x0605_4b50;
const ZIP64_END_SIG: u32 = 0x0606_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
const ZIP64_EXTRA_ID: u16 = 0x0001;

/// Fixed parts of the records.
const LOCAL_LEN: usize = 30;
const CENTRAL_LEN: usize = 46;
const END_LEN: usize = 22;
const ZIP64_END_LEN: usize = 56;
const ZIP64_LOCATOR_LEN: usize = 20;
/// The ZIP64 end record's size field counts the bytes after itself and the signature.
const ZIP64_END_SIZE_FIELD: u64 = (ZIP64_END_LEN - 12) as u64;
/// An archive comment is at most this long, which bounds the backward search for the end record.
const MAX_COMMENT: usize = 0xFFFF;

const METHOD_STORED: u16 = 0;
const METHOD_DEFLATE: u16 = 8;
const FLAG_ENCRYPTED: u16 = 1;
const FLAG_STRONG_ENCRYPTION: u16 = 1 << 6;
const FLAG_UTF8: u16 = 1 << 11;

/// Deflate's largest expansion: a 258-byte match coded in 2 bits.
const MAX_DEFLATE_RATIO: u64 = 1032;
/// Slack for the ratio bound on tiny streams.
const DEFLATE_SLACK: u64 = 64;

/// Version 2.0 (deflate, directories) and 4.5 (ZIP64) in the "version needed" fields.
const VERSION_DEFAULT: u16 = 20;
const VERSION_ZIP64: u16 = 45;
/// "Version made by": Unix (3) in the high byte, so the external attributes are a file mode.
const MADE_BY_UNIX: u16 = 3 << 8;
/// 1980-01-01 00:00 in MS-DOS date format (the earliest date a zip can hold): written archives
/// are the same bytes for the same arrays.
const DOS_DATE_1980: u16 = (1 << 5) | 1;
/// A regular file, rw-r--r--, as the high half of the external attributes.
const FILE_MODE: u32 = 0o100_644 << 16;

/// A sequential little-endian reader over a byte slice; reading past its end gives `None`.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Cursor { rest: bytes }
    }

    /// A reader starting at `pos` of `bytes` (`None` when `pos` is past the end).
    fn at(bytes: &'a [u8], pos: usize) -> Option<Self> {
        bytes.get(pos..).map(Cursor::new)
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(n)?;
        self.rest = tail;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }
}

/// One entry of a checked archive.
pub(crate) struct Entry {
    /// The stored file name, decoded as UTF-8 (invalid sequences replaced).
    pub name: String,
    /// Position in the central directory, for messages.
    index: usize,
    deflated: bool,
    crc: u32,
    /// Uncompressed size (what the data must decode to).
    size: usize,
    /// The entry's (compressed) data in the archive.
    data: Range<usize>,
}

impl Entry {
    fn label(&self) -> String {
        format!("entry {} `{}`", self.index, self.name)
    }

    /// The entry's uncompressed bytes (borrowed from `archive` when stored), with its size and
    /// CRC-32 checked. `archive` must be the buffer [`entries`] checked.
    pub fn data<'a>(&self, archive: &'a [u8]) -> ZipResult<Cow<'a, [u8]>> {
        let raw = archive
            .get(self.data.clone())
            .ok_or_else(|| format!("{}: data past the end of the archive", self.label()))?;
        let data = if self.deflated {
            Cow::Owned(inflate(raw, self.size).map_err(|m| format!("{}: {m}", self.label()))?)
        } else {
            Cow::Borrowed(raw)
        };
        let mut crc = Crc::new();
        crc.update(&data);
        if crc.sum() != self.crc {
            return Err(format!(
                "{}: CRC-32 mismatch (the archive says {:08x}, the data gives {:08x})",
                self.label(),
                self.crc,
                crc.sum()
            ));
        }
        Ok(data)
    }
}

/// Decode the raw deflate stream `src`, which must produce exactly `size` bytes and end at the
/// end of `src`. The output grows with what the decoder produces (doubling, capped at
/// `size + 1`, one byte more than claimed being enough to see an overrun).
fn inflate(src: &[u8], size: usize) -> ZipResult<Vec<u8>> {
    let mut decoder = DeflateDecoder::new(src);
    let cap = size.saturating_add(1);
    let mut out: Vec<u8> = Vec::new();
    let mut filled = 0usize;
    loop {
        if filled == out.len() {
            if filled >= cap {
                return Err(format!(
                    "deflate data inflates to more than the {size} bytes claimed"
                ));
            }
            let want = filled.saturating_mul(2).max(64 * 1024).min(cap);
            out.reserve_exact(want.saturating_sub(out.len()));
            out.resize(want, 0);
        }
        let Some(buf) = out.get_mut(filled..) else {
            return Err("internal error: inflate buffer".into());
        };
        match decoder.read(buf) {
            Ok(0) => break,
            Ok(n) => filled = filled.saturating_add(n),
            Err(e) => return Err(format!("corrupt deflate data: {e}")),
        }
    }
    out.truncate(filled);
    if filled != size {
        return Err(format!(
            "deflate data inflates to {filled} bytes, {size} claimed"
        ));
    }
    let used = decoder.total_in();
    if used != src.len() as u64 {
        return Err(format!(
            "{} bytes of compressed data after the end of the deflate stream",
            (src.len() as u64).saturating_sub(used)
        ));
    }
    Ok(out)
}

/// What the end records say about the central directory.
struct Directory {
    entries: u64,
    offset: u64,
    size: u64,
    /// Where the central directory must end: the ZIP64 end record, or the end record.
    end: usize,
}

/// The classic end-of-central-directory record.
struct EndRecord {
    disk: u16,
    directory_disk: u16,
    entries_here: u16,
    entries: u16,
    size: u32,
    offset: u32,
    comment_len: u16,
}

fn read_end_record(bytes: &[u8], pos: usize) -> Option<EndRecord> {
    let mut c = Cursor::at(bytes, pos)?;
    if c.u32()? != END_SIG {
        return None;
    }
    Some(EndRecord {
        disk: c.u16()?,
        directory_disk: c.u16()?,
        entries_here: c.u16()?,
        entries: c.u16()?,
        size: c.u32()?,
        offset: c.u32()?,
        comment_len: c.u16()?,
    })
}

/// The ZIP64 end-of-central-directory locator.
struct Zip64Locator {
    record_disk: u32,
    record_offset: u64,
    disks: u32,
}

/// The ZIP64 locator at `pos`, if one is there.
fn read_zip64_locator(bytes: &[u8], pos: usize) -> Option<Zip64Locator> {
    let mut c = Cursor::at(bytes, pos)?;
    if c.u32()? != ZIP64_LOCATOR_SIG {
        return None;
    }
    Some(Zip64Locator {
        record_disk: c.u32()?,
        record_offset: c.u64()?,
        disks: c.u32()?,
    })
}

/// The fixed part of the ZIP64 end-of-central-directory record.
struct Zip64End {
    /// The size of the record after this field.
    record_size: u64,
    disk: u32,
    directory_disk: u32,
    entries_here: u64,
    entries: u64,
    size: u64,
    offset: u64,
}

/// The ZIP64 end record at `pos`, if one is there.
fn read_zip64_end(bytes: &[u8], pos: usize) -> Option<Zip64End> {
    let mut c = Cursor::at(bytes, pos)?;
    if c.u32()? != ZIP64_END_SIG {
        return None;
    }
    let record_size = c.u64()?;
    let _made_by = c.u16()?;
    let _needed = c.u16()?;
    Some(Zip64End {
        record_size,
        disk: c.u32()?,
        directory_disk: c.u32()?,
        entries_here: c.u64()?,
        entries: c.u64()?,
        size: c.u64()?,
        offset: c.u64()?,
    })
}

/// Find the end record (searching back from the end over at most a maximal comment) and, when
/// a ZIP64 locator precedes it, the ZIP64 end record.
fn find_directory(bytes: &[u8]) -> ZipResult<Directory> {
    let last = bytes
        .len()
        .checked_sub(END_LEN)
        .ok_or("not a zip archive (too short for an end-of-central-directory record)")?;
    let first = last.saturating_sub(MAX_COMMENT);
    // The record whose comment reaches exactly the end of the buffer: a signature inside a
    // comment, or an end record followed by other bytes, does not qualify.
    let (pos, end) = (first..=last)
        .rev()
        .find_map(|pos| {
            let end = read_end_record(bytes, pos)?;
            let stop = pos
                .checked_add(END_LEN)?
                .checked_add(usize::from(end.comment_len))?;
            (stop == bytes.len()).then_some((pos, end))
        })
        .ok_or("not a zip archive (no end-of-central-directory record at its end)")?;
    if end.disk != 0 || end.directory_disk != 0 || end.entries_here != end.entries {
        return Err("multi-disk archives are not supported".into());
    }
    let Some((locator_pos, locator)) = pos
        .checked_sub(ZIP64_LOCATOR_LEN)
        .and_then(|p| Some((p, read_zip64_locator(bytes, p)?)))
    else {
        return Ok(Directory {
            entries: u64::from(end.entries),
            offset: u64::from(end.offset),
            size: u64::from(end.size),
            end: pos,
        });
    };
    // ZIP64: the locator points at the ZIP64 end record, which must end where the locator starts.
    if locator.record_disk != 0 || locator.disks > 1 {
        return Err("multi-disk archives are not supported (ZIP64 locator)".into());
    }
    let record_offset = locator.record_offset;
    let record_pos = usize::try_from(record_offset)
        .ok()
        .filter(|&p| {
            p.checked_add(ZIP64_END_LEN)
                .is_some_and(|e| e <= locator_pos)
        })
        .ok_or_else(|| {
            format!(
                "the ZIP64 locator points at offset {record_offset}, where no ZIP64 end record fits"
            )
        })?;
    let Zip64End {
        record_size,
        disk,
        directory_disk,
        entries_here,
        entries,
        size,
        offset,
    } = read_zip64_end(bytes, record_pos).ok_or_else(|| {
        format!("no ZIP64 end-of-central-directory record at offset {record_pos}")
    })?;
    let record_end = (record_pos as u64)
        .checked_add(12)
        .and_then(|p| p.checked_add(record_size));
    if record_size < ZIP64_END_SIZE_FIELD || record_end != Some(locator_pos as u64) {
        return Err(format!(
            "the ZIP64 end record's size ({record_size}) does not reach its locator"
        ));
    }
    if disk != 0 || directory_disk != 0 || entries_here != entries {
        return Err("multi-disk archives are not supported (ZIP64 end record)".into());
    }
    // A classic field either holds the value or says "see the ZIP64 record".
    let agrees = |classic: u64, sentinel: u64, zip64: u64| classic == sentinel || classic == zip64;
    if !agrees(u64::from(end.entries), 0xFFFF, entries)
        || !agrees(u64::from(end.size), 0xFFFF_FFFF, size)
        || !agrees(u64::from(end.offset), 0xFFFF_FFFF, offset)
    {
        return Err("the end record and the ZIP64 end record disagree".into());
    }
    Ok(Directory {
        entries,
        offset,
        size,
        end: record_pos,
    })
}

/// The fixed part of a central directory header.
struct CentralHeader {
    signature: u32,
    flags: u16,
    method: u16,
    crc: u32,
    compressed: u32,
    size: u32,
    name_len: u16,
    extra_len: u16,
    comment_len: u16,
    disk: u16,
    local_offset: u32,
}

fn read_central_header(c: &mut Cursor) -> Option<CentralHeader> {
    let signature = c.u32()?;
    let _made_by = c.u16()?;
    let _needed = c.u16()?;
    let flags = c.u16()?;
    let method = c.u16()?;
    let _time = c.u16()?;
    let _date = c.u16()?;
    let crc = c.u32()?;
    let compressed = c.u32()?;
    let size = c.u32()?;
    let name_len = c.u16()?;
    let extra_len = c.u16()?;
    let comment_len = c.u16()?;
    let disk = c.u16()?;
    let _internal = c.u16()?;
    let _external = c.u32()?;
    let local_offset = c.u32()?;
    Some(CentralHeader {
        signature,
        flags,
        method,
        crc,
        compressed,
        size,
        name_len,
        extra_len,
        comment_len,
        disk,
        local_offset,
    })
}

/// The data of the ZIP64 extended-information field in `extra`, if there is one.
fn zip64_field(extra: &[u8]) -> Option<std::result::Result<&[u8], &'static str>> {
    let mut c = Cursor::new(extra);
    let mut found = None;
    while !c.is_empty() {
        let (Some(id), Some(len)) = (c.u16(), c.u16()) else {
            return Some(Err("malformed extra field"));
        };
        let Some(data) = c.take(usize::from(len)) else {
            return Some(Err("extra field runs past its end"));
        };
        if id == ZIP64_EXTRA_ID {
            if found.is_some() {
                return Some(Err("two ZIP64 extra fields"));
            }
            found = Some(data);
        }
    }
    found.map(Ok)
}

fn method_name(method: u16) -> &'static str {
    match method {
        1..=6 => " (a legacy method)",
        9 => " (deflate64)",
        12 => " (bzip2)",
        14 => " (LZMA)",
        93 => " (zstd)",
        95 => " (xz)",
        99 => " (AES encryption)",
        _ => "",
    }
}

/// What a local header says that the reader uses.
struct LocalHeader<'a> {
    flags: u16,
    method: u16,
    name: &'a [u8],
    /// Where the entry's data starts (after the name and extra field).
    data_start: usize,
}

/// The local header at `pos` of `body` (the archive up to its central directory).
fn read_local_header(body: &[u8], pos: usize) -> ZipResult<LocalHeader<'_>> {
    let into_dir = || format!("local header (offset {pos}) runs into the central directory");
    let mut c = Cursor::at(body, pos).ok_or_else(into_dir)?;
    if c.u32().ok_or_else(into_dir)? != LOCAL_SIG {
        return Err(format!("no local header at offset {pos} (bad signature)"));
    }
    let fields = (|| {
        let _needed = c.u16()?;
        let flags = c.u16()?;
        let method = c.u16()?;
        c.take(LOCAL_LEN - 14)?; // time, date, CRC-32, sizes: the central directory's count
        let name_len = c.u16()?;
        let extra_len = c.u16()?;
        let name = c.take(usize::from(name_len))?;
        c.take(usize::from(extra_len))?;
        Some((flags, method, name))
    })();
    let (flags, method, name) = fields.ok_or_else(into_dir)?;
    Ok(LocalHeader {
        flags,
        method,
        name,
        // The cursor's rest is a suffix of `body`.
        data_start: body.len() - c.rest.len(),
    })
}

/// Check the structure of the archive in `bytes` and list its entries in central-directory
/// order. Nothing is decompressed here ([`Entry::data`] does that, one entry at a time).
pub(crate) fn entries(bytes: &[u8]) -> ZipResult<Vec<Entry>> {
    let dir = find_directory(bytes)?;
    let dir_start = usize::try_from(dir.offset)
        .ok()
        .filter(|&s| s <= dir.end && (dir.end - s) as u64 == dir.size)
        .ok_or_else(|| {
            format!(
                "the central directory ({} bytes at offset {}) does not end where the end record \
                 starts (offset {})",
                dir.size, dir.offset, dir.end
            )
        })?;
    // Each header takes at least CENTRAL_LEN bytes: the count cannot exceed what fits.
    if dir.entries > dir.size / CENTRAL_LEN as u64 {
        return Err(format!(
            "{} entries cannot fit in a central directory of {} bytes",
            dir.entries, dir.size
        ));
    }
    let directory = bytes
        .get(dir_start..dir.end)
        .ok_or("central directory past the end of the archive")?;
    // Local headers and data live before the central directory.
    let body = bytes
        .get(..dir_start)
        .ok_or("central directory past the end of the archive")?;
    let mut c = Cursor::new(directory);
    // `dir.entries` is bounded by the directory's size, hence by the input.
    let mut out = Vec::with_capacity(usize::try_from(dir.entries).unwrap_or(0));
    let mut names = HashSet::new();
    // (start of local header, end of data, entry index)
    let mut spans: Vec<(usize, usize, usize)> = Vec::new();
    for index in 0..usize::try_from(dir.entries).unwrap_or(usize::MAX) {
        let past = || {
            format!("entry {index}: central directory header past the end of the central directory")
        };
        let h = read_central_header(&mut c).ok_or_else(past)?;
        if h.signature != CENTRAL_SIG {
            return Err(format!(
                "entry {index}: no central directory header (bad signature)"
            ));
        }
        let raw_name = c.take(usize::from(h.name_len)).ok_or_else(past)?;
        let extra = c.take(usize::from(h.extra_len)).ok_or_else(past)?;
        c.take(usize::from(h.comment_len)).ok_or_else(past)?;
        let name = String::from_utf8_lossy(raw_name).into_owned();
        let label = format!("entry {index} `{name}`");

        if h.flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION) != 0 {
            return Err(format!("{label}: encrypted entries are not supported"));
        }
        let deflated = match h.method {
            METHOD_STORED => false,
            METHOD_DEFLATE => true,
            m => {
                return Err(format!(
                    "{label}: compression method {m}{} is not supported (only stored and deflate)",
                    method_name(m)
                ))
            }
        };

        // Classic fields at their maximum are in the ZIP64 field, in this order.
        let mut z = match zip64_field(extra) {
            None => Cursor::new(&[]),
            Some(Ok(data)) => Cursor::new(data),
            Some(Err(m)) => return Err(format!("{label}: {m}")),
        };
        let missing = |what: &str| format!("{label}: the ZIP64 extra field lacks the {what}");
        let size = match h.size {
            u32::MAX => z.u64().ok_or_else(|| missing("uncompressed size"))?,
            s => u64::from(s),
        };
        let compressed = match h.compressed {
            u32::MAX => z.u64().ok_or_else(|| missing("compressed size"))?,
            s => u64::from(s),
        };
        let local_offset = match h.local_offset {
            u32::MAX => z.u64().ok_or_else(|| missing("local header offset"))?,
            s => u64::from(s),
        };
        let disk = match h.disk {
            u16::MAX => z.u32().ok_or_else(|| missing("disk number"))?,
            d => u32::from(d),
        };
        if disk != 0 {
            return Err(format!(
                "{label}: on disk {disk} (multi-disk archives are not supported)"
            ));
        }
        if !deflated && compressed != size {
            return Err(format!(
                "{label}: stored entry of {compressed} bytes claims {size} bytes uncompressed"
            ));
        }
        if deflated
            && size
                > compressed
                    .saturating_mul(MAX_DEFLATE_RATIO)
                    .saturating_add(DEFLATE_SLACK)
        {
            return Err(format!(
                "{label}: claims {size} bytes uncompressed from {compressed} deflated bytes, more \
                 than deflate can produce"
            ));
        }

        // The local header: its own name and extra lengths place the data.
        let local_pos = usize::try_from(local_offset).unwrap_or(usize::MAX);
        if local_pos >= bytes.len() {
            return Err(format!(
                "{label}: local header (offset {local_offset}) past the end of the archive"
            ));
        }
        let local = read_local_header(body, local_pos).map_err(|m| format!("{label}: {m}"))?;
        if local.name != raw_name {
            return Err(format!(
                "{label}: the local header names `{}`",
                String::from_utf8_lossy(local.name)
            ));
        }
        if local.method != h.method || (local.flags & FLAG_ENCRYPTED) != (h.flags & FLAG_ENCRYPTED)
        {
            return Err(format!(
                "{label}: the local header disagrees with the central directory on the method \
                 or encryption"
            ));
        }
        let data_start = local.data_start;
        let data_end = usize::try_from(compressed)
            .ok()
            .and_then(|n| data_start.checked_add(n))
            .filter(|&e| e <= body.len())
            .ok_or_else(|| {
                format!(
                    "{label}: {compressed} bytes of data at offset {data_start} run past the \
                     central directory (offset {dir_start})"
                )
            })?;
        let size = usize::try_from(size)
            .map_err(|_| format!("{label}: {size} bytes uncompressed is too large here"))?;
        if !names.insert(raw_name) {
            return Err(format!("{label}: a second entry of that name"));
        }
        spans.push((local_pos, data_end, index));
        out.push(Entry {
            name,
            index,
            deflated,
            crc: h.crc,
            size,
            data: data_start..data_end,
        });
    }
    if !c.is_empty() {
        return Err(format!(
            "{} bytes in the central directory after its {} entries",
            c.rest.len(),
            dir.entries
        ));
    }
    // No two entries may share bytes (the way one small archive inflates to many copies).
    spans.sort_unstable();
    for pair in spans.windows(2) {
        if let [(_, end_a, a), (start_b, _, b)] = pair {
            if start_b < end_a {
                return Err(format!("entries {a} and {b} overlap"));
            }
        }
    }
    Ok(out)
}

/// Writes a zip archive of stored entries to `out`, ZIP64 records where needed.
pub(crate) struct Writer<W: Write> {
    out: W,
    /// Bytes written so far (the next local header's offset).
    offset: u64,
    central: Vec<u8>,
    entries: u64,
    force_zip64: bool,
}

/// A classic 32-bit field: the value, or 0xFFFFFFFF (the value is in a ZIP64 record) when it
/// does not fit or `force` is set.
fn field32(value: u64, force: bool) -> u32 {
    match u32::try_from(value) {
        Ok(v) if !force && v != u32::MAX => v,
        _ => u32::MAX,
    }
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Self {
        Writer {
            out,
            offset: 0,
            central: Vec::new(),
            entries: 0,
            force_zip64: false,
        }
    }

    /// Use every ZIP64 record even where the classic fields would do (tests of the reader).
    #[cfg(test)]
    pub fn force_zip64(mut self) -> Self {
        self.force_zip64 = true;
        self
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.offset = self.offset.saturating_add(bytes.len() as u64);
        Ok(())
    }

    /// Add a stored entry named `name` whose contents are `parts`, concatenated.
    pub fn add_stored(&mut self, name: &str, parts: &[&[u8]]) -> io::Result<()> {
        let mut crc = Crc::new();
        let mut size = 0u64;
        for p in parts {
            crc.update(p);
            size = size.saturating_add(p.len() as u64);
        }
        self.add(name, METHOD_STORED, crc.sum(), size, parts)
    }

    /// Add an entry with any method, CRC-32 and uncompressed size (tests build bad archives).
    #[cfg(test)]
    pub fn add_raw(
        &mut self,
        name: &str,
        method: u16,
        crc: u32,
        size: u64,
        data: &[u8],
    ) -> io::Result<()> {
        self.add(name, method, crc, size, &[data])
    }

    fn add(
        &mut self,
        name: &str,
        method: u16,
        crc: u32,
        size: u64,
        parts: &[&[u8]],
    ) -> io::Result<()> {
        let name_len = u16::try_from(name.len()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "entry name longer than 65535 bytes",
            )
        })?;
        let compressed = parts
            .iter()
            .fold(0u64, |n, p| n.saturating_add(p.len() as u64));
        let local_offset = self.offset;
        let big = self.force_zip64 || size.max(compressed) >= u64::from(u32::MAX);
        let far = self.force_zip64 || local_offset >= u64::from(u32::MAX);
        let version = if big || far {
            VERSION_ZIP64
        } else {
            VERSION_DEFAULT
        };
        let flags = if name.is_ascii() { 0 } else { FLAG_UTF8 };

        // Local header; a ZIP64 one carries both sizes in its extra field.
        let mut local = Vec::with_capacity(LOCAL_LEN + name.len() + 20);
        local.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        local.extend_from_slice(&version.to_le_bytes());
        local.extend_from_slice(&flags.to_le_bytes());
        local.extend_from_slice(&method.to_le_bytes());
        local.extend_from_slice(&0u16.to_le_bytes()); // time
        local.extend_from_slice(&DOS_DATE_1980.to_le_bytes());
        local.extend_from_slice(&crc.to_le_bytes());
        local.extend_from_slice(&field32(compressed, big).to_le_bytes());
        local.extend_from_slice(&field32(size, big).to_le_bytes());
        local.extend_from_slice(&name_len.to_le_bytes());
        local.extend_from_slice(&(if big { 20u16 } else { 0 }).to_le_bytes());
        local.extend_from_slice(name.as_bytes());
        if big {
            local.extend_from_slice(&ZIP64_EXTRA_ID.to_le_bytes());
            local.extend_from_slice(&16u16.to_le_bytes());
            local.extend_from_slice(&size.to_le_bytes());
            local.extend_from_slice(&compressed.to_le_bytes());
        }
        self.put(&local)?;
        for p in parts {
            self.put(p)?;
        }

        // Central directory header; the ZIP64 field holds only what the classic fields cannot.
        let mut extra = Vec::new();
        if big {
            extra.extend_from_slice(&size.to_le_bytes());
            extra.extend_from_slice(&compressed.to_le_bytes());
        }
        if far {
            extra.extend_from_slice(&local_offset.to_le_bytes());
        }
        let extra_len = if extra.is_empty() { 0 } else { 4 + extra.len() };
        let c = &mut self.central;
        c.extend_from_slice(&CENTRAL_SIG.to_le_bytes());
        c.extend_from_slice(&(MADE_BY_UNIX | version).to_le_bytes());
        c.extend_from_slice(&version.to_le_bytes());
        c.extend_from_slice(&flags.to_le_bytes());
        c.extend_from_slice(&method.to_le_bytes());
        c.extend_from_slice(&0u16.to_le_bytes()); // time
        c.extend_from_slice(&DOS_DATE_1980.to_le_bytes());
        c.extend_from_slice(&crc.to_le_bytes());
        c.extend_from_slice(&field32(compressed, big).to_le_bytes());
        c.extend_from_slice(&field32(size, big).to_le_bytes());
        c.extend_from_slice(&name_len.to_le_bytes());
        c.extend_from_slice(&(extra_len as u16).to_le_bytes());
        c.extend_from_slice(&0u16.to_le_bytes()); // comment
        c.extend_from_slice(&0u16.to_le_bytes()); // disk
        c.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
        c.extend_from_slice(&FILE_MODE.to_le_bytes());
        c.extend_from_slice(&field32(local_offset, far).to_le_bytes());
        c.extend_from_slice(name.as_bytes());
        if !extra.is_empty() {
            c.extend_from_slice(&ZIP64_EXTRA_ID.to_le_bytes());
            c.extend_from_slice(&(extra.len() as u16).to_le_bytes());
            c.extend_from_slice(&extra);
        }
        self.entries += 1;
        Ok(())
    }

    /// Write the central directory and the end records; returns the flushed output.
    pub fn finish(mut self) -> io::Result<W> {
        let dir_offset = self.offset;
        let dir_size = self.central.len() as u64;
        let central = std::mem::take(&mut self.central);
        self.put(&central)?;
        let zip64 = self.force_zip64
            || self.entries >= 0xFFFF
            || dir_size >= u64::from(u32::MAX)
            || dir_offset >= u64::from(u32::MAX);
        let mut end = Vec::with_capacity(ZIP64_END_LEN + ZIP64_LOCATOR_LEN + END_LEN);
        if zip64 {
            let record_offset = self.offset;
            end.extend_from_slice(&ZIP64_END_SIG.to_le_bytes());
            end.extend_from_slice(&ZIP64_END_SIZE_FIELD.to_le_bytes());
            end.extend_from_slice(&(MADE_BY_UNIX | VERSION_ZIP64).to_le_bytes());
            end.extend_from_slice(&VERSION_ZIP64.to_le_bytes());
            end.extend_from_slice(&0u32.to_le_bytes()); // this disk
            end.extend_from_slice(&0u32.to_le_bytes()); // the directory's disk
            end.extend_from_slice(&self.entries.to_le_bytes());
            end.extend_from_slice(&self.entries.to_le_bytes());
            end.extend_from_slice(&dir_size.to_le_bytes());
            end.extend_from_slice(&dir_offset.to_le_bytes());
            end.extend_from_slice(&ZIP64_LOCATOR_SIG.to_le_bytes());
            end.extend_from_slice(&0u32.to_le_bytes()); // the ZIP64 record's disk
            end.extend_from_slice(&record_offset.to_le_bytes());
            end.extend_from_slice(&1u32.to_le_bytes()); // disks
        }
        // Like NumPy (Python's zipfile), the classic fields keep the values that fit.
        let count = match u16::try_from(self.entries) {
            Ok(n) if !self.force_zip64 && n != u16::MAX => n,
            _ => u16::MAX,
        };
        end.extend_from_slice(&END_SIG.to_le_bytes());
        end.extend_from_slice(&0u16.to_le_bytes()); // this disk
        end.extend_from_slice(&0u16.to_le_bytes()); // the directory's disk
        end.extend_from_slice(&count.to_le_bytes());
        end.extend_from_slice(&count.to_le_bytes());
        end.extend_from_slice(&field32(dir_size, self.force_zip64).to_le_bytes());
        end.extend_from_slice(&field32(dir_offset, self.force_zip64).to_le_bytes());
        end.extend_from_slice(&0u16.to_le_bytes()); // comment
        self.put(&end)?;
        self.out.flush()?;
        Ok(self.out)
    }
}
