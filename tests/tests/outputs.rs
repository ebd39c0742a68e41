//! `Model::function_info`'s outputs, read from the bytecode, against what TVM's own runs
//! returned: for every case of the zoo, the offload zoo and the OpenCL zoo, the number of
//! outputs, each one's dtype and every dimension (a fixed one equal, a symbolic one equal to
//! the value the inputs bind its name to) (docs/tvm-format.md §9.3).

use std::collections::HashMap;
use std::path::Path;

use mote::{Dim, Model};
use mote_tests::*;

/// Check every case of the zoo in `dir`; returns how many outputs were checked.
fn check_zoo(dir: &Path) -> usize {
    let manifest = manifest_in(dir);
    let mut checked = 0;
    for entry in manifest["models"].as_array().expect("models") {
        let name = entry["name"].as_str().expect("name");
        let file = dir.join(entry["file"].as_str().expect("file"));
        let model = Model::load(&file).unwrap_or_else(|e| panic!("{name}: load: {e}"));
        for case in entry["cases"].as_array().expect("cases") {
            let function = case["function"].as_str().expect("function");
            let cname = format!("{name}.{}", case["case"].as_str().unwrap_or("?"));
            let info = model
                .function_info(function)
                .unwrap_or_else(|e| panic!("{cname}: {e}"));
            if entry["kind"] == "kernels" {
                assert!(info.outputs.is_none(), "{cname}: a kernel returns nothing");
                continue;
            }
            let Some(expected) = case["expected"].as_str() else {
                continue;
            };
            if !case["expect_error"].is_null() {
                continue;
            }
            let inputs = load_indexed_in(dir, case["inputs"].as_str().expect("inputs"), "arg");
            let want = load_indexed_in(dir, expected, "out");
            // The symbolic dimensions the inputs bind.
            let mut bound: HashMap<String, i64> = HashMap::new();
            for (p, t) in info.params.iter().zip(&inputs) {
                for (d, &v) in p.shape.iter().flatten().zip(t.shape()) {
                    if let Dim::Var(n) = d {
                        bound.insert(n.clone(), v);
                    }
                }
            }
            let outputs = info
                .outputs
                .unwrap_or_else(|| panic!("{cname}: outputs unknown"));
            assert_eq!(outputs.len(), want.len(), "{cname}: number of outputs");
            for (i, (o, w)) in outputs.iter().zip(&want).enumerate() {
                let what = format!("{cname} output {i} ({})", o.name);
                let expected_name = if want.len() == 1 {
                    "output".to_string()
                } else {
                    format!("output[{i}]")
                };
                assert_eq!(o.name, expected_name, "{what}: name");
                assert_eq!(o.dtype, Some(w.dtype()), "{what}: dtype");
                let shape = o
                    .shape
                    .as_ref()
                    .unwrap_or_else(|| panic!("{what}: shape unknown"));
                assert_eq!(shape.len(), w.shape().len(), "{what}: rank");
                for (d, &v) in shape.iter().zip(w.shape()) {
                    match d {
                        Dim::Fixed(f) => assert_eq!(*f, v, "{what}: shape {shape:?}"),
                        Dim::Var(n) => assert_eq!(
                            bound.get(n),
                            Some(&v),
                            "{what}: `{n}` in {shape:?}, inputs bind {bound:?}"
                        ),
                    }
                }
                checked += 1;
            }
        }
    }
    checked
}

fn zoo_env(var: &str) -> std::path::PathBuf {
    std::env::var_os(var)
        .map(Into::into)
        .unwrap_or_else(|| panic!("{var} is not set (scripts/test.sh sets it)"))
}

#[test]
fn outputs_match_tvm_on_the_zoo() {
    let n = check_zoo(&zoo_dir());
    eprintln!("zoo: {n} outputs checked");
    assert!(n >= 18, "only {n} outputs checked");
}

#[test]
fn outputs_match_tvm_on_the_offload_zoo() {
    let n = check_zoo(&zoo_env("MOTE_OFFLOAD_ZOO_DIR"));
    eprintln!("offload zoo: {n} outputs checked");
    assert!(n >= 75, "only {n} outputs checked");
}

/// Under `opencl_zoo::`, the name the runs without the x86_64 OpenCL zoo skip (the aarch64 and
/// ThreadSanitizer runs in the chroot).
mod opencl_zoo {
    #[test]
    fn outputs_match_tvm() {
        let n = super::check_zoo(&super::zoo_env("MOTE_OPENCL_ZOO_DIR"));
        eprintln!("OpenCL zoo: {n} outputs checked");
        assert!(n >= 4, "only {n} outputs checked");
    }
}
