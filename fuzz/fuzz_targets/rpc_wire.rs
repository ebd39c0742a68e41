//! The RPC wire: packet framing, the packed-sequence decoder and every request body decoder
//! (`mote_rpc::wire`). The first byte picks the decoder, the rest is its input.
#![no_main]

use mote_rpc::wire;

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    mote_fuzz::with_budget(body, |b| match which % 7 {
        0 => {
            let mut r = b;
            while let Ok(p) = wire::read_packet(&mut r, 1 << 20) {
                let _ = p.rpc_code();
            }
        }
        1 => {
            let _ = wire::decode_seq(b);
        }
        2 => {
            let _ = wire::decode_init_server(b);
        }
        3 => {
            let _ = wire::decode_call_func(b);
        }
        4 => {
            let _ = wire::decode_copy_to_remote(b);
        }
        5 => {
            let _ = wire::decode_copy_from_remote(b);
        }
        _ => {
            let _ = wire::read_client_handshake(&mut &b[..]);
        }
    });
});
