//! `tvm.rpc.server.download_linked_module(name)`: what TVM 0.27's server does (its
//! `python/tvm/rpc/server.py`): a `.so` or `.dylib` upload comes back as it is; an object file
//! `.o`, or a `.tar` of them (what `export_library("x.tar")` makes: a tar, gzip-compressed or
//! not), is linked into a shared library with the server's C compiler (`$CXX`, `$CC`, else the
//! first of g++, gcc, clang++, clang, c++, cc on the PATH, run as `CC -shared -fPIC -o out
//! objects...`), and the library's bytes come back; any other name is an error.
//!
//! Unlike TVM's server, nothing is left in the sandbox: the members and the library are made in
//! a folder of their own inside it, removed before the answer. The tar is read here (never by a
//! `tar` program): only regular files with plain names, each at most the upload limit, the
//! whole decompressed at most the upload limit too. A code-free server runs no linker.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
#[cfg(not(any(target_os = "android", target_os = "ios")))]
use std::process::{Command, Stdio};
#[cfg(not(any(target_os = "android", target_os = "ios")))]
use std::time::{Duration, Instant};

use crate::sandbox::Sandbox;
use crate::session::RequestError;

/// Longest a link may take before it is killed.
#[cfg(not(any(target_os = "android", target_os = "ios")))]
const LINK_TIMEOUT: Duration = Duration::from_secs(120);

/// Most members a tar may have.
const MAX_MEMBERS: usize = 1024;

/// The bytes of `name` linked into a shared library (see the module docs). `max` bounds the
/// answer; `max_input` the upload and its decompressed contents.
pub(crate) fn linked_module(
    sandbox: &Sandbox,
    name: &str,
    max: u64,
    max_input: u64,
    code_free: bool,
) -> Result<Vec<u8>, RequestError> {
    if name.ends_with(".so") || name.ends_with(".dylib") {
        return sandbox.download(name, max);
    }
    let tar = name.ends_with(".tar");
    if !tar && !name.ends_with(".o") {
        return Err(RequestError::Invalid(format!(
            "download_linked_module: do not know how to link {name:?} (a .o, .tar, .so or .dylib \
             is expected, as with TVM's server)"
        )));
    }
    if code_free {
        return Err(RequestError::Unsupported(format!(
            "download_linked_module {name:?}: a code-free server runs no linker"
        )));
    }
    let input = sandbox.download(name, max_input)?;
    let work = WorkDir::create(sandbox.dir())?;
    let objects = if tar {
        extract_tar(&input, max_input, &work.0)?
    } else {
        let path = work.0.join("lib0.o");
        write_new(&path, &input)?;
        vec![path]
    };
    drop(input);
    if objects.is_empty() {
        return Err(RequestError::Invalid(format!(
            "download_linked_module: {name:?} holds no files to link"
        )));
    }
    let out = work.0.join("linked.so");
    link(&objects, &out, &work.0)?;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&out)
        .map_err(|e| {
            RequestError::Io(format!("download_linked_module: the linked library: {e}"))
        })?;
    let mut bytes = Vec::new();
    f.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| RequestError::Io(format!("download_linked_module: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(RequestError::Limit(format!(
            "download_linked_module: the linked library has more than the {max} bytes a reply \
             may carry"
        )));
    }
    log::info!(
        "download_linked_module {name:?}: linked {} file(s), {} bytes",
        objects.len(),
        bytes.len()
    );
    Ok(bytes)
}

/// A fresh folder inside the sandbox, removed with its contents when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    fn create(parent: &Path) -> Result<WorkDir, RequestError> {
        for n in 0..1000u32 {
            // Client names cannot start with a dot folder like this one and be a folder: the
            // sandbox only ever makes regular files from client names.
            let dir = parent.join(format!(".mote-link-{n}"));
            match fs::create_dir(&dir) {
                Ok(()) => return Ok(WorkDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(RequestError::Io(format!("download_linked_module: {e}"))),
            }
        }
        Err(RequestError::Io(
            "download_linked_module: no free work folder".into(),
        ))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn write_new(path: &Path, data: &[u8]) -> Result<(), RequestError> {
    let io = |e: std::io::Error| RequestError::Io(format!("download_linked_module: {e}"));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io)?;
    f.write_all(data).map_err(io)
}

/// Extracts the regular files of a tar (gzip-compressed or not; read by Mote's own tar reader,
/// `mote::tar`, the one that reads a model's `.tar`) into `dir`; returns their paths in tar
/// order. Folders (`./`) and pax headers are skipped; links, devices, names with folders and
/// duplicates are refused; at most `max` bytes decompressed.
pub(crate) fn extract_tar(
    input: &[u8],
    max: u64,
    dir: &Path,
) -> Result<Vec<PathBuf>, RequestError> {
    let failed = |e: mote::Error| match e {
        mote::Error::ResourceExhausted { .. } => RequestError::Limit(format!(
            "download_linked_module: the tar decompresses to more than {max} bytes"
        )),
        e => RequestError::Invalid(format!("download_linked_module: tar: {e}")),
    };
    let bad = |m: String| RequestError::Invalid(format!("download_linked_module: tar: {m}"));
    let tar = mote::tar::Tar::new(input, max).map_err(failed)?;
    let mut out = Vec::new();
    for entry in tar.entries().map_err(failed)? {
        let name = &entry.name;
        match entry.kind {
            mote::tar::TarKind::File => {
                let plain = name.strip_prefix("./").unwrap_or(name);
                if plain.is_empty()
                    || plain == "."
                    || plain == ".."
                    || plain.contains('/')
                    || plain.contains('\\')
                    || plain.len() > 255
                {
                    return Err(bad(format!("member {name:?} is not a plain file name")));
                }
                if out.len() >= MAX_MEMBERS {
                    return Err(bad(format!("more than {MAX_MEMBERS} members")));
                }
                let path = dir.join(plain);
                if out.contains(&path) {
                    return Err(bad(format!("member {name:?} appears twice")));
                }
                write_new(&path, entry.data)?;
                out.push(path);
            }
            // A folder (`./`), pax headers: nothing to link.
            mote::tar::TarKind::Folder | mote::tar::TarKind::Pax => {}
            mote::tar::TarKind::Other(t) => {
                return Err(bad(format!(
                    "member {name:?} is not a regular file (type {:?})",
                    t as char
                )))
            }
        }
    }
    Ok(out)
}

/// The C compiler that links, as TVM's `tvm.support.cc.get_cc` finds it.
#[cfg(not(any(target_os = "android", target_os = "ios")))]
fn compiler() -> Option<PathBuf> {
    for var in ["CXX", "CC"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return Some(PathBuf::from(v));
        }
    }
    let path = std::env::var_os("PATH")?;
    for cc in ["g++", "gcc", "clang++", "clang", "c++", "cc"] {
        for d in std::env::split_paths(&path) {
            let p = d.join(cc);
            if fs::metadata(&p).is_ok_and(|m| m.is_file()) {
                return Some(p);
            }
        }
    }
    None
}

/// Phones have no C compiler (and iOS no processes to run one): the server answers so, and its
/// library carries no process-spawning code (the Android library's imports stay those of
/// bindings-java/android/stubs).
#[cfg(any(target_os = "android", target_os = "ios"))]
fn link(_objects: &[PathBuf], _out: &Path, _dir: &Path) -> Result<(), RequestError> {
    Err(RequestError::Unsupported(
        "download_linked_module: a phone has no C compiler to link with".into(),
    ))
}

/// Runs `CC -shared -fPIC -o out objects...` in `dir`, bounded by [`LINK_TIMEOUT`].
#[cfg(not(any(target_os = "android", target_os = "ios")))]
fn link(objects: &[PathBuf], out: &Path, dir: &Path) -> Result<(), RequestError> {
    let cc = compiler().ok_or_else(|| {
        RequestError::Unsupported(
            "download_linked_module: no C compiler on the server to link with (set CXX)".into(),
        )
    })?;
    let io = |e: std::io::Error| {
        RequestError::Io(format!(
            "download_linked_module: cannot run {}: {e}",
            cc.display()
        ))
    };
    let log_path = dir.join("link.log");
    let log = fs::File::create(&log_path).map_err(io)?;
    // Object paths are absolute, so no member name can pass for an option.
    let mut child = Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(out)
        .args(objects)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(io)?)
        .stderr(log)
        .spawn()
        .map_err(io)?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait().map_err(io)? {
            Some(s) => break s,
            None if started.elapsed() > LINK_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RequestError::Io(format!(
                    "download_linked_module: the link took longer than {} s",
                    LINK_TIMEOUT.as_secs()
                )));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    if !status.success() {
        let mut text = String::new();
        if let Ok(f) = fs::File::open(&log_path) {
            let _ = f.take(2048).read_to_string(&mut text);
        }
        return Err(RequestError::Invalid(format!(
            "download_linked_module: {} failed ({status}): {}",
            cc.display(),
            text.trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, size: usize, kind: u8) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..107].copy_from_slice(b"0000644");
        h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        h[156] = kind;
        h[257..263].copy_from_slice(b"ustar\0");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        h
    }

    fn tar(members: &[(&str, &[u8], u8)]) -> Vec<u8> {
        let mut t = Vec::new();
        for (name, data, kind) in members {
            t.extend(header(name, data.len(), *kind));
            t.extend_from_slice(data);
            t.resize(t.len().div_ceil(512) * 512, 0);
        }
        t.extend([0u8; 1024]);
        t
    }

    fn tmp(label: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mote-link-{}-{label}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn extracts_plain_members_of_plain_and_gzip_tars() {
        let t = tar(&[
            ("./", b"", b'5'),
            ("./lib0.o", b"abc", b'0'),
            ("devc.o", b"xy", 0),
        ]);
        for (label, bytes) in [
            ("plain", t.clone()),
            ("gz", {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(&t).unwrap();
                e.finish().unwrap()
            }),
        ] {
            let d = tmp(label);
            let files = extract_tar(&bytes, 1 << 20, &d).unwrap();
            assert_eq!(files, vec![d.join("lib0.o"), d.join("devc.o")]);
            assert_eq!(fs::read(d.join("lib0.o")).unwrap(), b"abc");
            assert_eq!(fs::read(d.join("devc.o")).unwrap(), b"xy");
            fs::remove_dir_all(&d).unwrap();
        }
    }

    #[test]
    fn refuses_escapes_links_duplicates_bombs_and_damage() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("folder", tar(&[("../evil.o", b"x", b'0')])),
            ("absolute", tar(&[("/etc/evil", b"x", b'0')])),
            ("nested", tar(&[("a/b.o", b"x", b'0')])),
            ("symlink", tar(&[("l.o", b"", b'2')])),
            (
                "duplicate",
                tar(&[("a.o", b"x", b'0'), ("a.o", b"y", b'0')]),
            ),
            ("too long", {
                let mut t = tar(&[("a.o", &[7u8; 600], b'0')]);
                t.truncate(700);
                t
            }),
            ("checksum", {
                let mut t = tar(&[("a.o", b"x", b'0')]);
                t[0] = b'b';
                t
            }),
        ];
        for (what, bytes) in cases {
            let d = tmp("bad");
            let r = extract_tar(&bytes, 1 << 20, &d);
            assert!(matches!(r, Err(RequestError::Invalid(_))), "{what}: {r:?}");
            assert!(!d.parent().unwrap().join("evil.o").exists());
            fs::remove_dir_all(&d).unwrap();
        }
        // A gzip bomb (a tar whose member is 4 MiB of zeros) stops at the limit.
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&tar(&[("zeros.o", &vec![0u8; 4 << 20], b'0')]))
            .unwrap();
        let bomb = e.finish().unwrap();
        let d = tmp("bomb");
        assert!(matches!(
            extract_tar(&bomb, 1 << 20, &d),
            Err(RequestError::Limit(_))
        ));
        fs::remove_dir_all(&d).unwrap();
    }
}
