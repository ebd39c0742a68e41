//! The per-session folder that uploads land in (docs/rpc.md "Sandbox").
//!
//! A client names files with a single plain component: no separators, no `..`, nothing
//! absolute. Files are opened with `O_NOFOLLOW` (a symlink is never followed, whoever made it)
//! and must be regular files. Sizes are bounded per file and per session.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::session::RequestError;

/// A folder owned by one session; removed (with everything in it) when dropped.
#[derive(Debug)]
pub(crate) struct Sandbox {
    dir: PathBuf,
    /// Bytes of each file this session wrote, for the per-session total.
    sizes: HashMap<String, u64>,
    max_file: u64,
    max_total: u64,
}

impl Sandbox {
    /// Creates a fresh folder under `root` (which is created if missing).
    pub(crate) fn create(
        root: &Path,
        label: &str,
        max_file: u64,
        max_total: u64,
    ) -> std::io::Result<Sandbox> {
        fs::create_dir_all(root)?;
        let mut n = 0u32;
        loop {
            let dir = root.join(format!("{label}-{}-{n}", std::process::id()));
            match fs::create_dir(&dir) {
                Ok(()) => {
                    return Ok(Sandbox {
                        dir,
                        sizes: HashMap::new(),
                        max_file,
                        max_total,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 10_000 => n += 1,
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of a client-supplied name, refusing anything but one plain component.
    pub(crate) fn path_of(&self, name: &str) -> Result<PathBuf, RequestError> {
        let bad = |why: &str| RequestError::Sandbox(format!("file name {name:?} refused: {why}"));
        if name.is_empty() || name.len() > 255 {
            return Err(bad("empty or longer than 255 bytes"));
        }
        if name == "." || name == ".." {
            return Err(bad("not a file name"));
        }
        if name.contains('/') || name.contains('\\') || name.contains('\0') {
            return Err(bad(
                "only plain names are accepted (no folders, no absolute paths)",
            ));
        }
        Ok(self.dir.join(name))
    }

    /// Writes `data` as `name`, replacing a previous upload of the same name.
    pub(crate) fn upload(&mut self, name: &str, data: &[u8]) -> Result<PathBuf, RequestError> {
        let path = self.path_of(name)?;
        let len = data.len() as u64;
        if len > self.max_file {
            return Err(RequestError::Limit(format!(
                "upload of {len} bytes exceeds the per-file limit of {} bytes",
                self.max_file
            )));
        }
        let others: u64 = self
            .sizes
            .iter()
            .filter(|(k, _)| k.as_str() != name)
            .map(|(_, v)| v)
            .sum();
        if others + len > self.max_total {
            return Err(RequestError::Limit(format!(
                "upload of {len} bytes would bring the session's files to {} bytes, above the \
                 limit of {} bytes",
                others + len,
                self.max_total
            )));
        }
        // Refuse to replace anything but a regular file (never follow a symlink).
        if let Ok(meta) = fs::symlink_metadata(&path) {
            if !meta.file_type().is_file() {
                return Err(RequestError::Sandbox(format!(
                    "{name:?} exists and is not a regular file"
                )));
            }
        }
        let io = |e: std::io::Error| RequestError::Io(format!("upload {name:?}: {e}"));
        // Write a new file and rename it over the name, never rewrite in place: a library
        // loaded from the old file is mapped from that inode, and truncating it would pull the
        // code out from under the model (SIGBUS/SIGSEGV for the whole server process).
        let mut n = 0u32;
        let (tmp, mut f) = loop {
            let tmp = self.dir.join(format!(".mote-upload-{n}"));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)
            {
                Ok(f) => break (tmp, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(io(e)),
            }
        };
        let written = f
            .write_all(data)
            .and_then(|()| f.sync_all())
            .and_then(|()| fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io(e));
        }
        self.sizes.insert(name.to_owned(), len);
        Ok(path)
    }

    /// Opens `name` for reading: no symlink, regular file only, at most `max` bytes.
    fn open_regular(&self, name: &str, max: u64) -> Result<(File, u64), RequestError> {
        let path = self.path_of(name)?;
        let io = |e: std::io::Error| RequestError::Io(format!("{name:?}: {e}"));
        // O_NONBLOCK so that opening a FIFO cannot hang; it is refused just below.
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(io)?;
        let meta = f.metadata().map_err(io)?;
        if !meta.file_type().is_file() {
            return Err(RequestError::Sandbox(format!(
                "{name:?} is not a regular file"
            )));
        }
        if meta.len() > max {
            return Err(RequestError::Limit(format!(
                "{name:?} has {} bytes, more than the {max} bytes a reply may carry",
                meta.len()
            )));
        }
        Ok((f, meta.len()))
    }

    /// The bytes of `name`, at most `max` of them.
    pub(crate) fn download(&self, name: &str, max: u64) -> Result<Vec<u8>, RequestError> {
        let (f, len) = self.open_regular(name, max)?;
        let mut out = Vec::with_capacity(len as usize);
        f.take(max.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| RequestError::Io(format!("download {name:?}: {e}")))?;
        if out.len() as u64 > max {
            return Err(RequestError::Limit(format!(
                "{name:?} grew beyond {max} bytes"
            )));
        }
        Ok(out)
    }

    /// The path of an existing regular file `name` (for loading).
    pub(crate) fn existing(&self, name: &str) -> Result<PathBuf, RequestError> {
        self.open_regular(name, u64::MAX)?;
        self.path_of(name)
    }

    /// Removes `name` (a regular file or a symlink itself, never its target).
    pub(crate) fn remove(&mut self, name: &str) -> Result<(), RequestError> {
        let path = self.path_of(name)?;
        let meta = fs::symlink_metadata(&path)
            .map_err(|e| RequestError::Io(format!("remove {name:?}: {e}")))?;
        if meta.is_dir() {
            return Err(RequestError::Sandbox(format!("{name:?} is a folder")));
        }
        fs::remove_file(&path).map_err(|e| RequestError::Io(format!("remove {name:?}: {e}")))?;
        self.sizes.remove(name);
        Ok(())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            log::warn!("could not remove sandbox {}: {e}", self.dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_confined() {
        let root =
            std::env::temp_dir().join(format!("mote-rpc-sandbox-test-{}", std::process::id()));
        let mut s = Sandbox::create(&root, "t", 100, 150).unwrap();
        for bad in ["", ".", "..", "../x", "/etc/passwd", "a/b", "a\0b"] {
            assert!(s.upload(bad, b"x").is_err(), "{bad:?}");
        }
        s.upload("a.so", &[1; 100]).unwrap();
        assert!(s.upload("b.so", &[1; 101]).is_err(), "per-file limit");
        assert!(s.upload("b.so", &[1; 60]).is_err(), "per-session limit");
        s.upload("a.so", &[2; 10]).unwrap();
        s.upload("b.so", &[1; 60]).unwrap();
        assert_eq!(s.download("a.so", 1000).unwrap(), vec![2; 10]);
        assert!(s.download("a.so", 5).is_err());
        std::os::unix::fs::symlink("/etc/hostname", s.dir().join("link")).unwrap();
        assert!(
            s.download("link", 1000).is_err(),
            "symlinks are not followed"
        );
        assert!(s.upload("link", b"x").is_err(), "symlinks are not replaced");
        s.remove("link").unwrap();
        s.remove("a.so").unwrap();
        assert!(s.download("a.so", 1000).is_err());
        let dir = s.dir().to_path_buf();
        drop(s);
        assert!(!dir.exists());
        std::fs::remove_dir(&root).unwrap();
    }
}
