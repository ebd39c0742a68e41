//! The bodies that are not plain packed sequences (docs/rpc.md "Message bodies"): kInitServer,
//! kCallFunc, kCopyToRemote, kCopyFromRemote, and a bare DLTensor record. The first byte picks
//! the decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mote_rpc::wire::{
    decode_call_func, decode_copy_from_remote, decode_copy_to_remote, decode_init_server, Cursor,
};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    match sel % 5 {
        0 => drop(decode_init_server(body)),
        1 => drop(decode_call_func(body)),
        2 => {
            if let Ok((t, d)) = decode_copy_to_remote(body) {
                assert!(d.len() <= body.len());
                let _ = t.nbytes();
            }
        }
        3 => {
            if let Ok((t, _)) = decode_copy_from_remote(body) {
                let _ = t.nbytes();
            }
        }
        _ => {
            if let Ok(t) = Cursor::new(body).tensor() {
                assert!(t.shape.len() * 8 <= body.len());
                let _ = t.nbytes();
            }
        }
    }
});
