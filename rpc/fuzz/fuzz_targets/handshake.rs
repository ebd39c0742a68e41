//! The client handshake (docs/rpc.md "Handshake"): never panics, keys stay under the cap, the
//! key/option split and `-timeout=` parsing are total, and an accepted hello re-encodes to the
//! bytes it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mote_rpc::wire::{read_client_handshake, write_handshake, MAX_KEY_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(h) = read_client_handshake(&mut &data[..]) else {
        return;
    };
    assert!(h.raw.len() <= MAX_KEY_LEN);
    let key = h.key();
    assert!(!key.contains(char::is_whitespace));
    let _ = h.options();
    if let Some(t) = h.timeout_secs() {
        assert!(t.is_finite() && t > 0.0);
    }
    let mut back = Vec::new();
    write_handshake(&mut back, &h.raw).expect("writing to a Vec");
    assert_eq!(&back[..], &data[..back.len()]);
});
