//! A byte stream read as packets (docs/rpc.md "Packet framing"), each body decoded by the
//! decoder of its code, as the server's loop does. The limit comes from the first input byte so
//! that both the limit check and huge accepted lengths are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mote_rpc::wire::{
    decode_call_func, decode_copy_from_remote, decode_copy_to_remote, decode_init_server,
    decode_seq, frame, read_packet, RpcCode,
};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let max = match sel % 3 {
        0 => 64,
        1 => 1 << 20,
        _ => u64::MAX,
    };
    for _ in 0..16 {
        let Ok(p) = read_packet(&mut rest, max) else {
            break;
        };
        assert!(p.body.len() as u64 + 4 <= max);
        match p.rpc_code() {
            Some(RpcCode::InitServer) => drop(decode_init_server(&p.body)),
            Some(RpcCode::CallFunc) => drop(decode_call_func(&p.body)),
            Some(RpcCode::CopyToRemote) => {
                if let Ok((t, d)) = decode_copy_to_remote(&p.body) {
                    assert!(d.len() <= p.body.len());
                    let _ = t.nbytes();
                }
            }
            Some(RpcCode::CopyFromRemote) => drop(decode_copy_from_remote(&p.body)),
            Some(code) => {
                drop(decode_seq(&p.body));
                let f = frame(code, &p.body);
                assert_eq!(f.len(), 12 + p.body.len());
            }
            None => {}
        }
    }
});
