//! Handing pages of a mapped model file back to the system once their bytes have been copied.
//!
//! Loading a model copies its constants out of the module blob, which lies in the mapped
//! library file. Each page of the blob read that way counts in the process's resident memory
//! until the system reclaims it, so a model's weights would briefly be resident twice. After
//! each constant is copied, `page_out` asks the system to reclaim the pages that hold only its
//! bytes (docs/footprint.md, "Memory").

/// Ask the system to reclaim the pages wholly inside `bytes` (Linux and Android:
/// `madvise(MADV_PAGEOUT)`, Linux 5.4 and later). A hint that changes no contents: a page read
/// again is read back from the file. Kernels without it, memory it does not apply to, and
/// other systems: nothing happens.
pub(crate) fn page_out(bytes: &[u8]) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let Ok(page) = usize::try_from(page) else {
            return;
        };
        if page == 0 || !page.is_power_of_two() {
            return;
        }
        let start = bytes.as_ptr() as usize;
        let Some(end) = start.checked_add(bytes.len()) else {
            return;
        };
        let first = (start + page - 1) & !(page - 1);
        let last = end & !(page - 1);
        if last > first {
            // SAFETY: MADV_PAGEOUT only moves the pages of [first, last), which lie inside the
            // live borrow `bytes`, out of memory; their contents stay what they are (a file page
            // is read back from the file, an anonymous one from swap), so no reference into
            // them is invalidated. The result is ignored: this is a hint.
            unsafe {
                libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_PAGEOUT);
            }
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = bytes;
}
