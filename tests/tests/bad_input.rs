//! Bad input gives a typed error with context, never a panic or a crash.

use std::path::PathBuf;

use mote::{DType, Error, Model, Tensor, Value};
use mote_tests::*;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mote-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn mlp_bytes() -> Vec<u8> {
    std::fs::read(zoo_path("mlp.so")).unwrap()
}

/// Where the VM executable's bytes start inside the file (after its magic).
fn executable_offset(lib: &[u8]) -> usize {
    let magic = 0xD225_DE2F_4214_151Eu64.to_le_bytes();
    lib.windows(8)
        .position(|w| w == magic)
        .expect("executable magic in mlp.so")
}

fn mlp_args() -> Vec<Value> {
    load_args("mlp.forward.inputs.npz")
        .into_iter()
        .map(Value::Tensor)
        .collect()
}

#[test]
fn missing_file_is_an_io_error() {
    let e = Model::load("/nonexistent/model.so").err().unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
}

#[test]
fn not_a_library_is_a_load_error() {
    let p = scratch("garbage.so");
    std::fs::write(&p, b"this is not an ELF file at all").unwrap();
    let e = Model::load(&p).err().unwrap();
    assert!(matches!(e, Error::Load { .. }), "{e:?}");
    assert!(e.to_string().contains("bad magic"), "{e}");
    std::fs::write(&p, b"").unwrap();
    assert!(matches!(Model::load(&p).err().unwrap(), Error::Load { .. }));
}

#[test]
fn truncated_library_is_a_load_error() {
    let mlp = mlp_bytes();
    truncated_library_is_refused("mlp", &mlp, &[mlp.len() / 2, mlp.len() / 10, 64]);
    // A kernel-only library's kernels are listed from its section headers, the last bytes of
    // the file: one byte less is enough to refuse it.
    let gemm = gemm_bytes();
    truncated_library_is_refused("gemm", &gemm, &[gemm.len() - 1, gemm.len() / 2, 64]);
}

fn truncated_library_is_refused(lib: &str, bytes: &[u8], keep: &[usize]) {
    for (i, &keep) in keep.iter().enumerate() {
        let p = scratch(&format!("truncated-{lib}-{i}.so"));
        std::fs::write(&p, &bytes[..keep]).unwrap();
        let e = Model::load(&p)
            .err()
            .expect("a truncated library must not load");
        assert!(matches!(e, Error::Load { .. } | Error::Format(_)), "{e:?}");
    }
}

#[test]
fn wrong_executable_magic_or_version_is_reported() {
    let mut bytes = mlp_bytes();
    let at = executable_offset(&bytes);
    bytes[at] ^= 0xff;
    let p = scratch("badmagic.so");
    std::fs::write(&p, &bytes).unwrap();
    let e = Model::load(&p).err().unwrap();
    assert!(matches!(e, Error::Format(_)), "{e:?}");
    assert!(e.to_string().contains("bad magic"), "{e}");

    let mut bytes = mlp_bytes();
    let at = executable_offset(&bytes) + 16; // after magic and the version's length
    assert_eq!(&bytes[at..at + 4], b"0.14");
    bytes[at..at + 4].copy_from_slice(b"9.99");
    let p = scratch("badversion.so");
    std::fs::write(&p, &bytes).unwrap();
    let e = Model::load(&p).err().unwrap();
    assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
}

#[test]
fn corrupted_executable_bytes_never_crash() {
    let pristine = mlp_bytes();
    let start = executable_offset(&pristine);
    // The blob's length field sits 8 bytes before the executable's kind string... it is enough
    // to corrupt bytes from the executable start over its whole length.
    let len = pristine.len().min(start + 2300) - start;
    let args = mlp_args();
    let (mut loaded, mut failed) = (0, 0);
    for (k, off) in (0..len).step_by(7).enumerate() {
        let mut bytes = pristine.clone();
        bytes[start + off] ^= 0x5a;
        let p = scratch(&format!("corrupt{k}.so"));
        std::fs::write(&p, &bytes).unwrap();
        match Model::load(&p) {
            Ok(m) => {
                loaded += 1;
                // Running may succeed (e.g. a changed weight) or fail; it must not crash.
                if let Ok(mut s) = m.session() {
                    let _ = s.call("forward", &args);
                }
            }
            Err(e) => {
                failed += 1;
                assert!(!e.to_string().is_empty());
            }
        }
        std::fs::remove_file(&p).unwrap();
    }
    assert!(
        failed > 0 && loaded + failed > 100,
        "loaded {loaded}, failed {failed}"
    );
}

#[test]
fn missing_kernel_symbol_is_named_at_load() {
    let mut bytes = mlp_bytes();
    let start = executable_offset(&bytes);
    // The function table entry for kernel `relu`: u64 length 4, then the name.
    let needle = [&4u64.to_le_bytes()[..], b"relu"].concat();
    let at = start
        + bytes[start..]
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("relu entry");
    bytes[at + 8..at + 12].copy_from_slice(b"relv");
    let p = scratch("missing_kernel.so");
    std::fs::write(&p, &bytes).unwrap();
    match Model::load(&p).err().unwrap() {
        Error::MissingFunctions { names } => assert_eq!(names, ["relv"]),
        e => panic!("{e:?}"),
    }
}

#[test]
fn unknown_function_lists_the_real_ones() {
    let m = Model::load(zoo_path("mlp.so")).unwrap();
    let e = m.session().unwrap().call("nope", &[]).err().unwrap();
    match &e {
        Error::UnknownFunction { name, available } => {
            assert_eq!(name, "nope");
            assert_eq!(available, &["forward"]);
        }
        e => panic!("{e:?}"),
    }
    // A kernel is not a callable Relax function.
    assert!(matches!(
        m.session().unwrap().call("relu", &[]),
        Err(Error::UnknownFunction { .. })
    ));
}

#[test]
fn wrong_argument_count_shape_and_dtype() {
    let m = Model::load(zoo_path("mlp.so")).unwrap();
    let mut s = m.session().unwrap();
    let mut args = mlp_args();

    let e = s.call("forward", &args[..2]).err().unwrap();
    assert!(
        matches!(
            e,
            Error::ArgumentCount {
                expected: 5,
                given: 2,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("fc1.weight"), "{e}");

    let good_x = args[0].clone();
    args[0] = Value::Tensor(Tensor::zeros(&[3, 16], DType::F32).unwrap());
    let e = s.call("forward", &args).err().unwrap();
    assert!(matches!(e, Error::Mismatch(_)), "{e:?}");
    assert!(e.to_string().contains("expected 2, got 3"), "{e}");

    args[0] = Value::Tensor(Tensor::zeros(&[2, 16, 1], DType::F32).unwrap());
    let e = s.call("forward", &args).err().unwrap();
    assert!(e.to_string().contains("rank 2"), "{e}");

    args[0] = Value::Tensor(Tensor::zeros(&[2, 16], DType::F64).unwrap());
    let e = s.call("forward", &args).err().unwrap();
    assert!(matches!(e, Error::Mismatch(_)), "{e:?}");
    assert!(
        e.to_string().contains("float32") && e.to_string().contains("float64"),
        "{e}"
    );

    args[0] = Value::Int(3);
    assert!(matches!(s.call("forward", &args), Err(Error::Mismatch(_))));

    // Weights are not checked by the bytecode: the kernel's own check reports them.
    args[0] = good_x;
    args[1] = Value::Tensor(Tensor::zeros(&[16, 32], DType::F32).unwrap());
    let e = s.call("forward", &args).err().unwrap();
    assert!(matches!(e, Error::Kernel { .. }), "{e:?}");
    assert!(e.to_string().contains("shape"), "{e}");

    // The session is still usable.
    let out = s.call("forward", &mlp_args()).unwrap().flatten_tensors();
    assert_close(
        "after errors",
        &out[0],
        &load_outputs("mlp.forward.expected.npz")[0],
        1e-5,
        1e-5,
    );
}

#[test]
fn a_kernel_error_surfaces_and_the_process_lives_on() {
    let m = Model::load(zoo_path("raise.so")).unwrap();
    let mut s = m.session().unwrap();
    for _ in 0..3 {
        let bad: Vec<Value> = load_args("raise.negative.inputs.npz")
            .into_iter()
            .map(Value::Tensor)
            .collect();
        match s.call("main", &bad).err().unwrap() {
            Error::Kernel {
                kernel, message, ..
            } => {
                assert_eq!(kernel, "checked_scale");
                assert!(
                    message.contains("first element must be non-negative"),
                    "{message}"
                );
            }
            e => panic!("{e:?}"),
        }
        let ok: Vec<Value> = load_args("raise.ok.inputs.npz")
            .into_iter()
            .map(Value::Tensor)
            .collect();
        let out = s.call("main", &ok).unwrap().flatten_tensors();
        assert_close(
            "raise.ok",
            &out[0],
            &load_outputs("raise.ok.expected.npz")[0],
            1e-5,
            1e-5,
        );
    }
}

#[test]
fn an_unregistered_packed_function_is_a_kernel_error_naming_it() {
    // This test binary never registers `mote.zoo.scale_shift`.
    let m = Model::load(zoo_path("packed.so")).unwrap();
    let mut s = m.session().unwrap();
    let args: Vec<Value> = load_args("packed.main.inputs.npz")
        .into_iter()
        .map(Value::Tensor)
        .collect();
    let e = s.call("main", &args).err().unwrap();
    assert!(matches!(e, Error::Kernel { .. }), "{e:?}");
    assert!(e.to_string().contains("mote.zoo.scale_shift"), "{e}");
}

// ---- kernel-only libraries: their kernels are listed from the ELF dynamic symbol table ----

fn gemm_bytes() -> Vec<u8> {
    std::fs::read(zoo_path("gemm.so")).unwrap()
}

fn u64_at(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

/// (offset of the section-header table, entry size, count, index of `.dynsym`) of a 64-bit ELF
/// file. The system loader never reads section headers, so corrupting them can only affect
/// Mote's own listing.
fn section_headers(lib: &[u8]) -> (usize, usize, usize, usize) {
    let shoff = u64_at(lib, 40);
    let entsize = u16::from_le_bytes([lib[58], lib[59]]) as usize;
    let count = u16::from_le_bytes([lib[60], lib[61]]) as usize;
    let dynsym = (0..count)
        .find(|i| lib[shoff + i * entsize + 4] == 11)
        .expect("a .dynsym section");
    (shoff, entsize, count, dynsym)
}

fn load_kernel_bytes(name: &str, bytes: &[u8]) -> mote::Result<Model> {
    let p = scratch(name);
    std::fs::write(&p, bytes).unwrap();
    let r = Model::load(&p);
    std::fs::remove_file(&p).unwrap();
    r
}

#[test]
fn a_malformed_dynamic_symbol_table_is_a_format_error() {
    let good = gemm_bytes();
    let (shoff, entsize, count, dynsym) = section_headers(&good);
    let h = shoff + dynsym * entsize;
    let format_error = |what: &str, bytes: &[u8], needle: &str| match load_kernel_bytes(
        &format!("symtab-{what}.so"),
        bytes,
    ) {
        Err(Error::Format(m)) => assert!(m.contains(needle), "{what}: {m}"),
        r => panic!("{what}: expected a format error, got {:?}", r.map(|_| ())),
    };
    let mut b = good.clone();
    b[40..48].copy_from_slice(&(good.len() as u64 + 1).to_le_bytes());
    format_error("table-past-end", &b, "past the end");
    let mut b = good.clone();
    b[40..48].fill(0);
    format_error("no-headers", &b, "no section headers");
    let mut b = good.clone();
    b[h + 40..h + 44].copy_from_slice(&(count as u32 + 5).to_le_bytes());
    format_error("link-out-of-range", &b, "string table");
    let mut b = good.clone();
    b[h + 24..h + 32].copy_from_slice(&(good.len() as u64 - 8).to_le_bytes());
    format_error("symbols-past-end", &b, "outside the file");
    let mut b = good.clone();
    b[h + 56..h + 64].copy_from_slice(&4u64.to_le_bytes());
    format_error("tiny-entries", &b, "symbol size");
    // The same library, intact, loads as a kernel library.
    assert!(load_kernel_bytes("symtab-intact.so", &good)
        .unwrap()
        .is_kernel_library());
}

#[test]
fn corrupted_section_headers_never_crash_a_kernel_library() {
    let good = gemm_bytes();
    let (shoff, entsize, count, _) = section_headers(&good);
    let (mut loaded, mut failed) = (0, 0);
    for (k, off) in (0..entsize * count).step_by(3).enumerate() {
        let mut b = good.clone();
        b[shoff + off] ^= 0xa5;
        match load_kernel_bytes(&format!("shdr{k}.so"), &b) {
            Ok(m) => {
                loaded += 1;
                // Whatever is listed was found by the system loader: a subset of the truth.
                for n in m.function_names() {
                    assert!(n == "gemm" || n == "main", "listed `{n}`");
                }
            }
            Err(e) => {
                failed += 1;
                assert!(
                    matches!(e, Error::Format(_) | Error::Unsupported(_)),
                    "corrupting byte {off} of the section headers: {e:?}"
                );
            }
        }
    }
    assert!(failed > 0 && loaded > 0, "loaded {loaded}, failed {failed}");
}

#[test]
fn a_library_with_neither_blob_nor_kernels_is_unsupported() {
    // Rename the kernels in every string table: the loader still maps the file, but nothing
    // named __tvm_ffi_<name> is left.
    let mut b = gemm_bytes();
    let mut renamed = 0;
    for name in [&b"__tvm_ffi_gemm\0"[..], b"__tvm_ffi_main\0"] {
        while let Some(at) = b.windows(name.len()).position(|w| w == name) {
            b[at + 8] = b'X';
            renamed += 1;
        }
    }
    assert!(renamed >= 2);
    match load_kernel_bytes("no-kernels.so", &b) {
        Err(Error::Unsupported(m)) => assert!(m.contains("not a library exported by TVM"), "{m}"),
        r => panic!("{:?}", r.map(|_| ())),
    }
}
