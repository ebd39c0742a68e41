//! Link the zoo's system-library builds (`MOTE_ZOO_DIR`, the manifest's `system_lib` entries)
//! into this package's test binary: each model's objects go into a static archive linked
//! whole (`+whole-archive`), since nothing in the program refers to them by name
//! (docs/system-lib.md §5).
//!
//! Building never fails for want of a zoo (clippy runs before one exists): the tests are told
//! what happened through `MOTE_SYSLIB_*` and fail at run time, saying why.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=MOTE_ZOO_DIR");
    let (zoo, linked, problem) = match std::env::var_os("MOTE_ZOO_DIR") {
        None => (
            String::new(),
            String::new(),
            "MOTE_ZOO_DIR was unset when this test was built, so no model is linked in: \
             run `MOTE_ZOO_DIR=$(scripts/zoo.sh | tail -1) cargo test -p mote-system-lib-tests`"
                .to_string(),
        ),
        Some(dir) => {
            let dir = PathBuf::from(dir);
            match link_models(&dir) {
                Ok(linked) => (dir.display().to_string(), linked.join(","), String::new()),
                Err(why) => (dir.display().to_string(), String::new(), why),
            }
        }
    };
    println!("cargo:rustc-env=MOTE_SYSLIB_ZOO={zoo}");
    println!("cargo:rustc-env=MOTE_SYSLIB_LINKED={linked}");
    println!("cargo:rustc-env=MOTE_SYSLIB_PROBLEM={problem}");
}

/// Link every system library of the zoo at `dir`; returns `name:prefix` for each.
fn link_models(dir: &Path) -> Result<Vec<String>, String> {
    let manifest_path = dir.join("manifest.json");
    println!("cargo:rerun-if-changed={}", manifest_path.display());
    let text = std::fs::read_to_string(&manifest_path).map_err(|e| {
        format!(
            "MOTE_ZOO_DIR at build time: {}: {e}",
            manifest_path.display()
        )
    })?;
    let manifest: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let zoo_arch = manifest["target"].as_str().unwrap_or("");
    if zoo_arch != arch {
        return Err(format!(
            "the zoo at {} was built for {zoo_arch}, this test for {arch}: build with that \
             target's zoo in MOTE_ZOO_DIR",
            dir.display()
        ));
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    println!("cargo:rustc-link-search=native={}", out.display());
    let mut linked = Vec::new();
    for model in manifest["models"].as_array().into_iter().flatten() {
        let Some(sys) = model.get("system_lib") else {
            continue;
        };
        let name = model["name"].as_str().ok_or("a model without a name")?;
        let prefix = sys["prefix"]
            .as_str()
            .ok_or("system_lib without a prefix")?;
        let archive = dir.join(
            sys["archive"]
                .as_str()
                .ok_or("system_lib without an archive")?,
        );
        println!("cargo:rerun-if-changed={}", archive.display());
        let objs = out.join(format!("{name}.objs"));
        let _ = std::fs::remove_dir_all(&objs);
        std::fs::create_dir_all(&objs).map_err(|e| e.to_string())?;
        run(Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&objs))?;
        // Distinct member names: every model has a lib0.o.
        let mut members = Vec::new();
        for entry in std::fs::read_dir(&objs).map_err(|e| e.to_string())? {
            let path = entry.map_err(|e| e.to_string())?.path();
            let file = path.file_name().unwrap_or_default().to_string_lossy();
            let renamed = objs.join(format!("{name}.{file}"));
            std::fs::rename(&path, &renamed).map_err(|e| e.to_string())?;
            members.push(renamed);
        }
        let lib = out.join(format!("libmote_syslib_{name}.a"));
        let _ = std::fs::remove_file(&lib);
        run(Command::new(archiver()).arg("crs").arg(&lib).args(&members))?;
        println!("cargo:rustc-link-lib=static:+whole-archive=mote_syslib_{name}");
        linked.push(format!("{name}:{prefix}"));
    }
    if linked.is_empty() {
        return Err(format!(
            "the zoo at {} has no system-library builds (an older python/zoo.py built it): \
             rebuild it with scripts/zoo.sh",
            dir.display()
        ));
    }
    Ok(linked)
}

/// The target's `ar`, named as the cc crate's conventions name it (the trixie chroot sets
/// `AR_aarch64_unknown_linux_gnu`).
fn archiver() -> String {
    let target = std::env::var("TARGET").unwrap_or_default();
    [
        format!("AR_{}", target.replace('-', "_")),
        format!("AR_{target}"),
        "TARGET_AR".into(),
        "AR".into(),
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok())
    .unwrap_or_else(|| "ar".into())
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{shown} failed ({s})")),
        Err(e) => Err(format!("cannot run {shown}: {e}")),
    }
}
