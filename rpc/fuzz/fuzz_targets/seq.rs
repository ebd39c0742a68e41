//! Packed sequences (docs/rpc.md "Packed sequences"): decoding never panics, and whatever
//! decodes re-encodes to the same length, the same values, and a fixed point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mote_rpc::wire::{decode_seq, encode_seq, Arg};

fn same(a: &[Arg], b: &[Arg]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Arg::Float(p), Arg::Float(q)) => p.to_bits() == q.to_bits(),
            _ => x == y,
        })
}

fuzz_target!(|data: &[u8]| {
    let Ok(v) = decode_seq(data) else { return };
    let e = encode_seq(&v);
    assert_eq!(e.len(), data.len());
    let v2 = decode_seq(&e).expect("a re-encoded sequence decodes");
    assert!(same(&v, &v2));
    assert_eq!(encode_seq(&v2), e);
    for a in &v {
        if let Arg::Tensor(t) = a {
            let _ = t.nbytes();
        }
    }
});
