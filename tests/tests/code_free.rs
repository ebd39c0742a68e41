//! Code-free loading (docs/code-free.md): the offload zoo's models whose program calls no
//! compiled kernel (manifest `code_free: true`) are read as data — from the `.so`, from the
//! `.tar` that `export_library` writes, and from memory — and must match TVM's outputs; the
//! others are refused with their kernels named; corrupt files are typed errors; and the files
//! of the other architecture's zoo (`MOTE_CODE_FREE_FOREIGN_ZOO_DIR`) run the same here.
//!
//! Needs `MOTE_OFFLOAD_ZOO_DIR` (scripts/offload-zoo.sh) and `MOTE_CODE_FREE_FOREIGN_ZOO_DIR`
//! (the offload zoo of the other architecture: aarch64 on x86_64, x86_64 under qemu); tests
//! never skip.

use std::path::{Path, PathBuf};

use mote::{Error, LoadOptions, Model, Tensor, Value};
use mote_tests::offload_zoo;
use serde_json::Value as Json;

fn code_free() -> LoadOptions {
    LoadOptions::default().code_free(true)
}

fn foreign_dir() -> PathBuf {
    match std::env::var_os("MOTE_CODE_FREE_FOREIGN_ZOO_DIR") {
        Some(d) => PathBuf::from(d),
        None => panic!(
            "MOTE_CODE_FREE_FOREIGN_ZOO_DIR is not set: export the offload zoo of the other \
             architecture (on x86_64: `MOTE_AARCH64_LINK=\"scripts/in-trixie.sh aarch64-linux-gnu-gcc\" \
             scripts/offload-zoo.sh --target aarch64 | tail -1`; scripts/test-aarch64.sh sets it to \
             the x86_64 one)"
        ),
    }
}

fn entries(dir: &Path) -> Vec<Json> {
    offload_zoo_manifest(dir)["models"]
        .as_array()
        .expect("manifest has `models`")
        .clone()
}

fn offload_zoo_manifest(dir: &Path) -> Json {
    mote_tests::manifest_in(dir)
}

fn is_code_free(entry: &Json) -> bool {
    entry["code_free"].as_bool().unwrap_or_else(|| {
        panic!(
            "{}: no `code_free` in the manifest: rebuild the offload zoo",
            entry["name"]
        )
    })
}

/// Run every case of `entry` (from the zoo in `dir`) at 1 and 2 threads with poisoned memory,
/// compare with TVM's outputs, and return the outputs of the last run.
fn check_cases(dir: &Path, entry: &Json, model: &Model, what: &str) -> Vec<Tensor> {
    let name = entry["name"].as_str().expect("name");
    let mut last = Vec::new();
    for threads in [1, 2] {
        let mut session = mote_tests::poisoned_session(model, threads);
        for case in entry["cases"].as_array().expect("cases") {
            let cname = format!("{name}.{} ({what}, {threads} threads)", case["case"]);
            let args: Vec<Value> =
                mote_tests::load_indexed_in(dir, case["inputs"].as_str().expect("inputs"), "arg")
                    .into_iter()
                    .map(Value::Tensor)
                    .collect();
            let expected = mote_tests::load_indexed_in(
                dir,
                case["expected"].as_str().expect("expected"),
                "out",
            );
            let (rtol, atol) = (
                case["tolerance"]["rtol"].as_f64().expect("rtol"),
                case["tolerance"]["atol"].as_f64().expect("atol"),
            );
            // Twice per session: the second run reuses (poisoned) buffers.
            for _ in 0..2 {
                let out = session
                    .call(case["function"].as_str().expect("function"), &args)
                    .unwrap_or_else(|e| panic!("{cname}: {e}"))
                    .flatten_tensors();
                assert_eq!(out.len(), expected.len(), "{cname}: number of outputs");
                for (i, (g, w)) in out.iter().zip(&expected).enumerate() {
                    mote_tests::assert_close(&format!("{cname} out{i}"), g, w, rtol, atol);
                }
                last = out;
            }
        }
    }
    last
}

fn same_bits(a: &[Tensor], b: &[Tensor]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.shape() == y.shape()
                && x.dtype() == y.dtype()
                && mote_tests::to_f64(x) == mote_tests::to_f64(y)
        })
}

/// Every code-free model of a zoo, loaded code-free from each container it has, matches TVM.
/// The `.so` is mapped as data and keeps the weights only offloaded regions read in the file
/// (as many as a mapped load keeps, when `compare_with_mapped`); the `.tar` (gzip) and the
/// bytes in memory keep none. Returns how many models were checked.
fn run_code_free_models(dir: &Path, compare_with_mapped: bool) -> usize {
    let mut checked = 0;
    let mut models_with_weights_in_file = 0;
    let mut flavours = std::collections::BTreeSet::new();
    for entry in entries(dir).iter().filter(|e| is_code_free(e)) {
        let name = entry["name"].as_str().expect("name");
        let so = dir.join(entry["file"].as_str().expect("file"));
        let archive = entry["archive"].as_str().unwrap_or_else(|| {
            panic!("{name}: a code-free model must have its .tar (`archive`) in the manifest")
        });
        let tar = dir.join(archive);
        let bytes = std::fs::read(&so).unwrap_or_else(|e| panic!("{}: {e}", so.display()));
        // A copy read into memory, then truncated before its model runs: nothing of the file
        // may still be in use (a mapping would fault with SIGBUS).
        static SCRATCH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SCRATCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let scratch =
            std::env::temp_dir().join(format!("mote-code-free-read-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("scratch folder");
        let copy = scratch.join(format!("{name}.so"));
        std::fs::copy(&so, &copy).unwrap_or_else(|e| panic!("{}: {e}", copy.display()));
        let loads = [
            ("code-free .so", Model::load_with(&so, code_free())),
            ("code-free .tar", Model::load_with(&tar, code_free())),
            (
                "code-free from memory",
                Model::load_from_memory_with(&bytes, code_free()),
            ),
            (
                "code-free .so read into memory, then truncated",
                Model::load_with(&copy, code_free().read_into_memory(true)),
            ),
        ];
        std::fs::File::create(&copy)
            .unwrap_or_else(|e| panic!("truncating {}: {e}", copy.display()));
        let _ = std::fs::remove_dir_all(&scratch);
        let mut outs = Vec::new();
        let mut so_in_file = (0, 0);
        let mut constants = None;
        for (what, model) in loads {
            let model = model.unwrap_or_else(|e| panic!("{name} ({what}): {e}"));
            let in_file = model.constants_in_file();
            if what == "code-free .so" {
                so_in_file = in_file;
            } else {
                assert_eq!(
                    in_file,
                    (0, 0),
                    "{name} ({what}): weights left in its input"
                );
            }
            let all = model.constant_bytes();
            assert_eq!(
                *constants.get_or_insert(all),
                all,
                "{name} ({what}): constants"
            );
            assert!(
                model.is_loaded_code_free(),
                "{name} ({what}): not loaded code-free"
            );
            assert!(
                model.is_code_free(),
                "{name} ({what}): is_code_free() is false"
            );
            assert!(model.kernels().is_empty(), "{name} ({what}): calls kernels");
            assert_eq!(
                model.partition_plan(&[]).len() as u64,
                entry["subgraphs"].as_u64().expect("subgraphs"),
                "{name} ({what}): number of mote.subgraph calls"
            );
            outs.push((what, check_cases(dir, entry, &model, what)));
        }
        if so_in_file.0 > 0 {
            models_with_weights_in_file += 1;
        }
        if compare_with_mapped {
            let mapped = Model::load(&so).unwrap_or_else(|e| panic!("{name} (mapped): {e}"));
            assert!(
                !mapped.is_loaded_code_free() && mapped.is_code_free(),
                "{name} (mapped)"
            );
            assert_eq!(
                so_in_file,
                mapped.constants_in_file(),
                "{name}: weights left in the file, code-free .so against mapped"
            );
            let m = check_cases(dir, entry, &mapped, "mapped");
            for (what, o) in &outs {
                assert!(same_bits(&m, o), "{name}: {what} and mapped outputs differ");
            }
        }
        flavours.insert(entry["partition"].as_str().unwrap_or("?").to_string());
        checked += 1;
    }
    assert!(
        checked >= 6,
        "only {checked} code-free models in {}",
        dir.display()
    );
    assert!(
        flavours.contains("acl") && flavours.contains("bnns"),
        "code-free models of both flavours expected, found {flavours:?}"
    );
    assert!(
        models_with_weights_in_file > 0,
        "no code-free .so in {} left a weight in its file",
        dir.display()
    );
    checked
}

#[test]
fn code_free_models_load_without_mapping_and_match_tvm() {
    let n = run_code_free_models(&offload_zoo::dir(), true);
    eprintln!("code_free: {n} models checked from .so, .tar and memory");
}

#[test]
fn code_free_files_of_the_other_architecture_run_the_same() {
    let dir = foreign_dir();
    let target = offload_zoo_manifest(&dir)["target"]
        .as_str()
        .unwrap_or("?")
        .to_string();
    let here = offload_zoo_manifest(&offload_zoo::dir())["target"]
        .as_str()
        .unwrap_or("?")
        .to_string();
    assert_ne!(
        target, here,
        "MOTE_CODE_FREE_FOREIGN_ZOO_DIR must be the offload zoo of another architecture than {here}"
    );
    let n = run_code_free_models(&dir, false);
    eprintln!("code_free: {n} models of the {target} zoo ran code-free on {here}");
}

#[test]
fn reading_into_memory_needs_a_code_free_load() {
    let dir = offload_zoo::dir();
    let entry = entries(&dir)
        .into_iter()
        .find(is_code_free)
        .expect("a code-free model");
    let so = dir.join(entry["file"].as_str().expect("file"));
    let err = Model::load_with(&so, LoadOptions::default().read_into_memory(true))
        .map(|_| ())
        .expect_err("a mapped load cannot read the file into memory");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("code-free")),
        "{err:?}"
    );
}

#[test]
fn libraries_with_kernels_are_refused_naming_them() {
    let dir = offload_zoo::dir();
    let mut refused = 0;
    for entry in entries(&dir).iter().filter(|e| !is_code_free(e)) {
        let name = entry["name"].as_str().expect("name");
        let so = dir.join(entry["file"].as_str().expect("file"));
        let mapped = Model::load(&so).unwrap_or_else(|e| panic!("{name} (mapped): {e}"));
        assert!(
            !mapped.is_code_free(),
            "{name}: mapped model says code-free"
        );
        let called = mapped.kernels();
        assert!(
            !called.is_empty(),
            "{name}: not code-free but calls no kernel"
        );
        let mut files = vec![so.clone()];
        if let Some(a) = entry["archive"].as_str() {
            files.push(dir.join(a)); // aarch64: lib0.o + devc.o
        }
        for file in files {
            match Model::load_with(&file, code_free()) {
                Err(Error::Unsupported(m)) => {
                    assert!(m.contains("is not code-free"), "{name}: {m}");
                    for k in &called {
                        assert!(
                            m.contains(k.as_str()),
                            "{name}: the refusal does not name {k}: {m}"
                        );
                    }
                }
                Err(e) => panic!(
                    "{name} ({}): expected Unsupported, got {e:?}",
                    file.display()
                ),
                Ok(_) => panic!(
                    "{name} ({}): a library calling kernels loaded code-free",
                    file.display()
                ),
            }
            refused += 1;
        }
    }
    assert!(refused >= 10, "only {refused} files refused");
}

/// Where the blob's payload starts in a file: the executable's kind string is its first
/// module entry (docs/tvm-format.md §2.2-§2.3).
fn blob_region(bytes: &[u8]) -> std::ops::Range<usize> {
    let key = b"relax.VMExecutable";
    let at = bytes
        .windows(key.len())
        .position(|w| w == key)
        .expect("the file holds the module blob");
    at.saturating_sub(64)..(at + 4096).min(bytes.len())
}

#[test]
fn corrupt_code_free_files_are_typed_errors() {
    let dir = offload_zoo::dir();
    let entry = entries(&dir)
        .into_iter()
        .find(|e| is_code_free(e) && e["name"] == "mlp_bnns")
        .expect("mlp_bnns is a code-free model of the offload zoo");
    let mut errors = 0;
    let so = entry["file"].as_str().expect("file");
    let bytes = std::fs::read(dir.join(so)).expect("read");
    // Truncations: the blob lies within the file (and the section headers at its end), so
    // cutting before the end must fail.
    for cut in (0..bytes.len()).step_by(41).chain([bytes.len() - 1]) {
        match Model::load_from_memory_with(&bytes[..cut], code_free()) {
            Ok(_) => panic!("{so} cut at {cut} bytes loaded"),
            Err(_) => errors += 1,
        }
    }
    // Flips in and around the blob: an error or a model that still runs; never a panic.
    let region = blob_region(&bytes);
    for i in region.step_by(3) {
        let mut f = bytes.clone();
        f[i] ^= 0xa5;
        match Model::load_from_memory_with(&f, code_free()) {
            Ok(model) => {
                // A flip in a weight or a name may leave a valid model; it must still run
                // or fail with a typed error.
                if let Ok(mut s) = model.session() {
                    let _ = s.call("main", &[]);
                }
            }
            // Which error depends on the byte (a count, a name, an opcode): any typed one.
            Err(_) => errors += 1,
        }
    }
    // The .tar is gzip-compressed: every cut must be refused, and every flip after the
    // header's time and OS bytes (which no checksum covers) refused or harmless.
    let tar = entry["archive"].as_str().expect("archive");
    let bytes = std::fs::read(dir.join(tar)).expect("read");
    for cut in (0..bytes.len()).step_by(13) {
        match Model::load_from_memory_with(&bytes[..cut], code_free()) {
            Ok(_) => panic!("{tar} cut at {cut} bytes loaded"),
            Err(Error::Format(_) | Error::Unsupported(_)) => errors += 1,
            Err(e) => panic!("{tar} cut at {cut}: unexpected error {e:?}"),
        }
    }
    for i in (10..bytes.len()).step_by(5) {
        let mut f = bytes.clone();
        f[i] ^= 0x10;
        match Model::load_from_memory_with(&f, code_free()) {
            // Deflate has bits that change nothing (an unused code length, say): the content,
            // checked by gzip's CRC, is the original, so it must still match TVM.
            Ok(model) => {
                check_cases(
                    &dir,
                    &entry,
                    &model,
                    &format!("{tar} with byte {i} flipped"),
                );
            }
            Err(Error::Format(_) | Error::Unsupported(_)) => errors += 1,
            Err(e) => panic!("{tar} with byte {i} flipped: unexpected error {e:?}"),
        }
    }
    assert!(errors > 100, "only {errors} corruptions were refused");
}
