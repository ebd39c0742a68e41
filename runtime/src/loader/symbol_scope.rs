//! Whether the symbols model libraries import from the process can reach them, by the rules
//! of the platform's dynamic linker (docs/android.md §2-§4, docs/tvm-format.md §1.2).
//!
//! On glibc a library opened with `dlopen` resolves against the global scope: the main program
//! (what `dlopen(NULL)` returns and searches) and libraries opened `RTLD_GLOBAL`. On Android,
//! bionic resolves a `dlopen`ed library against its namespace's *global group* (the executable
//! and the libraries whose own `DT_FLAGS_1` has `DF_1_GLOBAL`) and its own `DT_NEEDED`
//! closure; an app's JNI library lives in the app's classloader namespace, which
//! `dlopen(NULL)` does not search, and opening it again with `RTLD_GLOBAL` does not add it to
//! the global group. So on Android the object that contains Mote must export the symbol and
//! carry `DF_1_GLOBAL` (the JNI library is linked with `-z global`), unless it is the
//! executable itself.

use std::ffi::{c_int, c_void, CStr};

/// `DT_FLAGS_1` and its `DF_1_GLOBAL` bit (ELF gABI; bionic reads them in
/// `soinfo::set_dt_flags_1`).
const DT_FLAGS_1: i64 = 0x6fff_fffb;
const DF_1_GLOBAL: u64 = 0x2;

/// One entry of a `PT_DYNAMIC` array (`Elf64_Dyn`; `d_un` read as its value member).
#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

/// What the dynamic linker knows of the loaded object containing an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectScope {
    /// The object is the main program (its program headers are the ones at `AT_PHDR`).
    pub is_main_program: bool,
    /// Its `DT_FLAGS_1` has `DF_1_GLOBAL`.
    pub df_1_global: bool,
}

struct Search {
    addr: usize,
    main_phdr: usize,
    found: Option<ObjectScope>,
}

/// The object (program or library) whose loaded segments contain `addr`, by walking the
/// loader's list of objects (`dl_iterate_phdr`, in bionic's libdl.so since API 21).
pub(crate) fn object_containing(addr: *const c_void) -> Option<ObjectScope> {
    // SAFETY: getauxval only reads the process's auxiliary vector.
    let main_phdr = unsafe { libc::getauxval(libc::AT_PHDR) } as usize;
    let mut search = Search {
        addr: addr as usize,
        main_phdr,
        found: None,
    };
    // SAFETY: the callback only reads the `dl_phdr_info` the loader passes for the duration of
    // the call and writes `search`, which outlives the call through the `data` pointer.
    unsafe {
        libc::dl_iterate_phdr(Some(visit), (&raw mut search).cast());
    }
    search.found
}

/// `dl_iterate_phdr`'s callback: 1 (stop) once the object is found. No panic may leave it
/// (it runs inside the C library's loop), so a panic ends the walk with nothing found.
unsafe extern "C" fn visit(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> c_int {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `data` is the `Search` passed by `object_containing`, alive and unaliased for
        // the whole iteration; `info` is valid for this call (dl_iterate_phdr's contract).
        let (search, info) = unsafe { (&mut *data.cast::<Search>(), &*info) };
        visit_object(search, info)
    }))
    .unwrap_or(1)
}

fn visit_object(search: &mut Search, info: &libc::dl_phdr_info) -> c_int {
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: the loader's program header table for this object has `dlpi_phnum` entries.
    let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let base = info.dlpi_addr as usize;
    let contains = phdrs.iter().any(|p| {
        p.p_type == libc::PT_LOAD && {
            let start = base.wrapping_add(p.p_vaddr as usize);
            search.addr >= start && search.addr - start < p.p_memsz as usize
        }
    });
    if !contains {
        return 0;
    }
    let mut df_1_global = false;
    if let Some(dynamic) = phdrs.iter().find(|p| p.p_type == libc::PT_DYNAMIC) {
        let mut entry = base.wrapping_add(dynamic.p_vaddr as usize) as *const Dyn;
        let end = (entry as usize).saturating_add(dynamic.p_memsz as usize);
        // The array ends with DT_NULL and lies inside the segment.
        while (entry as usize) + std::mem::size_of::<Dyn>() <= end {
            // SAFETY: `entry` lies inside the mapped PT_DYNAMIC segment (checked against its
            // size above); the loader mapped it readable.
            let d = unsafe { &*entry };
            if d.tag == 0 {
                break;
            }
            if d.tag == DT_FLAGS_1 {
                df_1_global = d.val & DF_1_GLOBAL != 0;
            }
            // SAFETY: stays within the segment (loop condition).
            entry = unsafe { entry.add(1) };
        }
    }
    search.found = Some(ObjectScope {
        is_main_program: info.dlpi_phdr as usize == search.main_phdr,
        df_1_global,
    });
    1
}

/// The Android rule (module docs): `Ok` when a model library opened later by this process's
/// Mote resolves `name` to `ours`; otherwise the reason.
#[cfg_attr(not(target_os = "android"), allow(dead_code))]
pub(crate) fn check_bionic(ours: *const c_void, name: &CStr) -> Result<(), String> {
    let scope = object_containing(ours)
        .ok_or_else(|| "the loader does not list the object that contains Mote".to_string())?;
    // SAFETY: Dl_info is plain C data (pointers and integers); all-zero is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads loader data for an address in our own image and writes `info`.
    let known = unsafe { libc::dladdr(ours, &mut info) } != 0 && !info.dli_fname.is_null();
    let file = if known {
        // SAFETY: dli_fname is a NUL-terminated path owned by the loader, valid while loaded.
        unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned()
    } else {
        "the object that contains Mote".to_string()
    };
    // Exported: a lookup in the object's own handle finds the symbol (only dynamic symbols are
    // found). The main program's handle is what dlopen(NULL) returns.
    let exported = {
        // SAFETY: dlopen with RTLD_NOLOAD only returns an already loaded object's handle (or
        // NULL); dlsym gets a valid C string; the handle is released at once.
        unsafe {
            let h = if scope.is_main_program || !known {
                libc::dlopen(std::ptr::null(), libc::RTLD_LAZY)
            } else {
                libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD)
            };
            if h.is_null() {
                false
            } else {
                let p = libc::dlsym(h, name.as_ptr());
                libc::dlclose(h);
                p.cast_const() == ours
            }
        }
    };
    let name = name.to_string_lossy();
    if !exported {
        return Err(format!(
            "{name} is not exported by {file}, so model libraries cannot call it: export it \
             (docs/android.md, section 4)"
        ));
    }
    if !scope.is_main_program && !scope.df_1_global {
        return Err(format!(
            "{file} exports {name} but is not in the linker's global group (its DT_FLAGS_1 lacks \
             DF_1_GLOBAL), so model libraries cannot call it: link it with -Wl,-z,global \
             (docs/android.md, section 4)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    /// A C compiler for the architecture the tests run on: `MOTE_TEST_CC`, else Debian's
    /// `<arch>-linux-gnu-gcc` (the cross compiler when the tests run under qemu, the native
    /// one otherwise), else `cc`.
    fn compiler() -> String {
        if let Ok(cc) = std::env::var("MOTE_TEST_CC") {
            return cc;
        }
        let gcc = format!("{}-linux-gnu-gcc", std::env::consts::ARCH);
        let found = Command::new(&gcc)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if found {
            gcc
        } else {
            "cc".into()
        }
    }

    /// Builds a shared library exporting `probe`, with and without `-z global`.
    fn build(dir: &Path, name: &str, global: bool) -> std::path::PathBuf {
        let src = dir.join("probe.c");
        std::fs::write(&src, "int probe(void) { return 7; }\n").expect("write probe.c");
        let out = dir.join(name);
        let mut cmd = Command::new(compiler());
        cmd.args(["-shared", "-fPIC", "-o"]).arg(&out).arg(&src);
        if global {
            cmd.arg("-Wl,-z,global");
        }
        let status = cmd
            .status()
            .expect("cc must be installed (the unit tests build a library)");
        assert!(status.success(), "cc failed");
        out
    }

    fn probe_of(path: &Path) -> (*mut c_void, *const c_void) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a library built just above; its only code is `probe`.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!h.is_null(), "dlopen {path:?}");
        // SAFETY: valid handle and C string.
        let p = unsafe { libc::dlsym(h, c"probe".as_ptr()) };
        assert!(!p.is_null());
        (h, p.cast_const())
    }

    #[test]
    fn df_1_global_is_read_from_the_loaded_object() {
        let dir = std::env::temp_dir().join(format!("mote-symbol-scope-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let global = build(&dir, "libglobal.so", true);
        let local = build(&dir, "liblocal.so", false);
        let (hg, pg) = probe_of(&global);
        let (hl, pl) = probe_of(&local);
        assert_eq!(
            object_containing(pg),
            Some(ObjectScope {
                is_main_program: false,
                df_1_global: true
            })
        );
        assert_eq!(
            object_containing(pl),
            Some(ObjectScope {
                is_main_program: false,
                df_1_global: false
            })
        );
        // The bionic rule: exported by both, but only the -z global one is accepted.
        assert_eq!(check_bionic(pg, c"probe"), Ok(()));
        let err = check_bionic(pl, c"probe").expect_err("a library without DF_1_GLOBAL");
        assert!(
            err.contains("DF_1_GLOBAL") && err.contains("liblocal.so"),
            "{err}"
        );
        // Not exported under that name: refused, naming the file.
        let err = check_bionic(pg, c"not_there").expect_err("a name the library does not export");
        assert!(err.contains("not exported"), "{err}");
        // The test program itself is the main program.
        let main_fn = df_1_global_is_read_from_the_loaded_object as *const c_void;
        assert!(object_containing(main_fn).is_some_and(|s| s.is_main_program));
        // SAFETY: handles from dlopen above, nothing of the libraries is used any more.
        unsafe {
            libc::dlclose(hg);
            libc::dlclose(hl);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
