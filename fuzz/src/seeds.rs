//! `seeds OUT_DIR FILE...`: the seed corpora for every fuzz target, from zoo files (model
//! libraries, `.tar` exports, `.npz` inputs), a few RPC frames written here and the crafted
//! models of `mote::fuzzing::craft` (loops, recursion) for `run_code_free`. Each seed goes to
//! `OUT_DIR/<target>/<name>`; prints how many each target got.

use std::collections::BTreeMap;
use std::path::PathBuf;

use mote_rpc::wire::{self, Arg, Put, RpcCode};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(out) = args.next().map(PathBuf::from) else {
        eprintln!("usage: seeds OUT_DIR FILE...");
        std::process::exit(2);
    };
    let mut seeds: BTreeMap<&'static str, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    let mut add = |target: &'static str, name: String, bytes: Vec<u8>| {
        seeds.entry(target).or_default().push((name, bytes));
    };
    for file in args.map(PathBuf::from) {
        let Ok(bytes) = std::fs::read(&file) else {
            eprintln!("seeds: cannot read {}", file.display());
            std::process::exit(1);
        };
        let stem = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match file.extension().and_then(|e| e.to_str()) {
            Some("npz") => {
                npz_entries(&bytes, &stem, &mut add);
                add("npy", stem, bytes);
            }
            Some("so") | Some("tar") | Some("o") | Some("dylib") => {
                if file.extension().is_some_and(|e| e == "so") {
                    add("elf", stem.clone(), bytes.clone());
                }
                for (i, (target, seed)) in mote::fuzzing::seeds(&bytes).into_iter().enumerate() {
                    let target = match target {
                        "blob" => "module_blob",
                        t => t,
                    };
                    add(target, format!("{stem}.{i}"), seed);
                }
                if let Some(tar) = mote::fuzzing::gunzipped(&bytes) {
                    add("model_code_free", format!("{stem}.plain"), tar.clone());
                    add("run_code_free", format!("{stem}.plain"), tar);
                }
                add("model_code_free", stem.clone(), bytes.clone());
                add("run_code_free", stem, bytes);
            }
            _ => {}
        }
    }
    for (name, file) in crafted() {
        add("run_code_free", name.to_string(), file);
    }
    for (i, frame) in rpc_frames().into_iter().enumerate() {
        add("rpc_wire", format!("frame{i}"), frame);
    }
    for (target, list) in &seeds {
        let dir = out.join(target);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("seeds: {}: {e}", dir.display());
            std::process::exit(1);
        }
        for (name, bytes) in list {
            if let Err(e) = std::fs::write(dir.join(name), bytes) {
                eprintln!("seeds: {name}: {e}");
                std::process::exit(1);
            }
        }
        println!("{target}: {} seeds", list.len());
    }
}

/// Each `.npy` inside an `.npz` (read by Mote's own zip reader).
fn npz_entries(bytes: &[u8], stem: &str, add: &mut impl FnMut(&'static str, String, Vec<u8>)) {
    let Ok(entries) = mote::npy::npz_entries(bytes, stem) else {
        return;
    };
    for (i, (_, data)) in entries.into_iter().enumerate() {
        add("npy", format!("{stem}.{i}.npy"), data.into_owned());
    }
}

/// Models TVM would not write, each stopped by a budget or an argument: an endless loop (the
/// instruction budget), endless recursion with small frames (the stack budget) and with huge
/// ones (the register budget), a recursion and a loop that end (`mote.test.ne` and
/// `mote.test.add`, which the target registers).
fn crafted() -> Vec<(&'static str, Vec<u8>)> {
    use mote::fuzzing::craft;
    vec![
        ("craft-endless-loop.tar", craft::endless_loop()),
        ("craft-self-recursion-4.tar", craft::self_recursion(4)),
        (
            "craft-self-recursion-1m.tar",
            craft::self_recursion(1 << 20),
        ),
        ("craft-countdown.tar", craft::countdown()),
        ("craft-counted-loop.tar", craft::counted_loop()),
    ]
}

/// One seed per decoder of the `rpc_wire` target (its first byte picks the decoder).
fn rpc_frames() -> Vec<Vec<u8>> {
    let tensor = wire::WireTensor {
        data: 0,
        device: wire::Device {
            device_type: 1,
            device_id: 0,
        },
        dtype: wire::WireDType {
            code: 2,
            bits: 32,
            lanes: 1,
        },
        shape: vec![2, 3],
        byte_offset: 0,
    };
    let args = vec![
        Arg::Int(7),
        Arg::Float(0.5),
        Arg::Str("tvm.rpc.server.upload".into()),
        Arg::RawStr("mote".into()),
        Arg::Bytes(vec![1, 2, 3]),
        Arg::Function(3),
        Arg::Tensor(tensor.clone()),
    ];
    let seq = wire::encode_seq(&args);
    let with = |which: u8, body: &[u8]| {
        let mut v = vec![which];
        v.extend_from_slice(body);
        v
    };
    let mut call = Vec::new();
    call.put_u64(5);
    call.extend_from_slice(&seq);
    let mut init = Vec::new();
    init.put_bytes(b"server:mote");
    init.extend_from_slice(&seq);
    let mut to_remote = Vec::new();
    to_remote.put_tensor(&tensor);
    to_remote.put_u64(24);
    to_remote.extend_from_slice(&[0u8; 24]);
    let mut from_remote = Vec::new();
    from_remote.put_tensor(&tensor);
    from_remote.put_u64(24);
    let mut hello = Vec::new();
    hello.extend_from_slice(&wire::RPC_MAGIC.to_le_bytes());
    hello.extend_from_slice(&11i32.to_le_bytes());
    hello.extend_from_slice(b"client:mote");
    vec![
        with(0, &wire::frame(RpcCode::CallFunc, &call)),
        with(1, &seq),
        with(2, &init),
        with(3, &call),
        with(4, &to_remote),
        with(5, &from_remote),
        with(6, &hello),
    ]
}
