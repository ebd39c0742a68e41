//! A model file mapped read-only as data, for code-free loads (docs/code-free.md §4).
//!
//! The mapping is never executable: it is how a code-free load reads the file without copying
//! it, and how the weights that only offloaded regions read stay in the file for the life of
//! the model (docs/footprint.md, "Memory"). Its pages are clean and backed by the file: the
//! system can drop them at any time and read them back, and iOS does not count them in an
//! app's memory footprint.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// A whole file mapped `PROT_READ`, `MAP_PRIVATE`; unmapped on drop.
pub(crate) struct FileMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only memory owned by this value alone; shared references to it
// may be used from any thread, and moving the owner moves nothing but the address.
unsafe impl Send for FileMap {}
// SAFETY: as above: nothing writes through the mapping.
unsafe impl Sync for FileMap {}

impl FileMap {
    /// Maps all of `file`. `Ok(None)` when it cannot be mapped as a whole (empty, larger than
    /// the address space, or a kind of file `mmap` refuses, such as a pipe): the caller reads
    /// it instead.
    pub fn new(file: &File) -> std::io::Result<Option<FileMap>> {
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Ok(None);
        }
        let Ok(len) = usize::try_from(meta.len()) else {
            return Ok(None);
        };
        if len == 0 {
            return Ok(None);
        }
        // Mapped inaccessible, then made readable: the same pages either way, but a memory
        // checker that reads debug information from every readable mapping of an ELF file
        // (valgrind 3.19 does, and aborts on some malformed ones, which is what a code-free
        // load may be given) looks only at `mmap`, and at `mprotect` only when it adds
        // `PROT_EXEC`, so the model file stays out of its symbol reader.
        // SAFETY: a fresh private mapping of an open descriptor at an address the system
        // chooses; it aliases no Rust object. The result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Ok(None);
        }
        let Some(ptr) = NonNull::new(ptr.cast::<u8>()) else {
            return Ok(None);
        };
        // From here `Drop` unmaps it, whatever happens next.
        let map = FileMap { ptr, len };
        // SAFETY: the range is exactly the mapping just made, which nothing else refers to.
        if unsafe { libc::mprotect(map.ptr.as_ptr().cast(), len, libc::PROT_READ) } != 0 {
            return Ok(None);
        }
        Ok(Some(map))
    }

    /// The file's bytes. The mapping is private and read-only, so they change only if another
    /// process rewrites the file in place, which a model file must not be while it is loaded
    /// (docs/code-free.md §4); truncating it then makes reads past the new end fault.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes from `ptr` are mapped readable until `self` is dropped, and the
        // returned borrow cannot outlive `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for FileMap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping `new` made; no borrow of it outlives
        // `self` (`bytes` borrows `self`). The result is ignored: nothing can be done on drop.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_a_file_and_declines_what_it_cannot() {
        let dir = std::env::temp_dir().join(format!("mote-file-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("bytes");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(&data))
            .expect("write");
        let map = FileMap::new(&File::open(&path).expect("open"))
            .expect("metadata")
            .expect("mapped");
        assert_eq!(map.bytes(), &data[..]);
        // Usable from another thread (Send + Sync), and still there after the file is gone.
        std::fs::remove_file(&path).expect("remove");
        let sum = std::thread::scope(|s| {
            s.spawn(|| map.bytes().iter().map(|&b| u64::from(b)).sum::<u64>())
                .join()
                .expect("thread")
        });
        assert_eq!(sum, data.iter().map(|&b| u64::from(b)).sum::<u64>());
        drop(map);

        let empty = dir.join("empty");
        std::fs::File::create(&empty).expect("create");
        assert!(FileMap::new(&File::open(&empty).expect("open"))
            .expect("metadata")
            .is_none());
        assert!(FileMap::new(&File::open(&dir).expect("open dir"))
            .expect("metadata")
            .is_none());
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
