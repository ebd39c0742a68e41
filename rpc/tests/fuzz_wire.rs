//! A self-contained mutational fuzzer over the wire layer (`mote_rpc::wire`), run as a normal
//! test on stable Rust: no nightly, no dependencies. The byte layouts it builds its seeds from
//! are those of docs/rpc.md "Wire format" (TVM 0.27's RPC protocol, spec §5.2-§5.6 and the
//! §5.10 trace), written again here from the spec rather than through the crate's encoder, so
//! that the encoder is checked against an independent copy.
//!
//! Properties, checked on every input:
//! 1. no decoder panics (each call runs under `catch_unwind`; a panic prints the input in hex);
//! 2. no decoder allocates more than the input justifies: a counting global allocator measures
//!    the peak of live heap bytes of the fuzzing thread during each call, which must stay under
//!    `alloc_bound(len)` (see there);
//! 3. for every packed sequence that decodes, `encode(decode(x))` has the length of `x`, decodes
//!    to the same values, and is a fixed point; for inputs produced by the spec encoder it is
//!    `x` itself;
//! 4. for generated values, `decode(encode(v)) == v`, and the crate's encoding equals the spec
//!    encoding byte for byte;
//! 5. a packet stream read through a reader that returns short reads and `Interrupted` errors
//!    gives exactly the results of reading it from a slice.
//!
//! `MOTE_FUZZ_ITERS` sets the number of mutated inputs (default below: about 5-10 s in a debug
//! build on a 2-core machine); `MOTE_FUZZ_SEED` the PRNG seed (default fixed, so a failure
//! reproduces). The test prints executions and executions per second.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{self, Read};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use mote_rpc::wire::{
    self, decode_call_func, decode_copy_from_remote, decode_copy_to_remote, decode_init_server,
    decode_seq, encode_seq, frame, read_client_handshake, read_packet, return_frame, Arg, Cursor,
    Device, Packet, Put, Ret, RpcCode, WireDType, WireError, WireTensor,
};

// ---------------------------------------------------------------------------------------------
// Counting allocator: the peak of live bytes allocated by the current thread.

struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // `try_with`: the allocator may run while this thread's locals are being torn down.
    let _ = LIVE.try_with(|l| {
        let v = l.get() + delta;
        l.set(v);
        let _ = PEAK.try_with(|p| {
            if v > p.get() {
                p.set(v)
            }
        });
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// updates thread-local counters, which never allocate (const-initialised `Cell`s).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize);
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize));
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Count the moment both blocks may exist, then the release of the old one.
        note(new_size as isize);
        note(-(layout.size() as isize));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns its result with the peak of extra live heap bytes it needed.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let r = f();
    let peak = PEAK.with(Cell::get);
    (r, (peak - base).max(0) as usize)
}

/// What decoding `len` input bytes may cost at most. By construction of the decoders:
/// - a sequence's `Vec<Arg>` is reserved for at most one value per 4 input bytes (every value
///   carries a 4-byte type index), so `size_of::<Arg>() * (len / 4 + 1)`;
/// - strings, byte arrays and shapes copy input bytes (at most `len` in all); a packet body read
///   through `read_to_end` may double its buffer while growing (`2 * len`);
/// - a handshake key buffer is allocated before it is read, capped at `MAX_KEY_LEN` (4096);
/// - plus a constant for error values and `io::Error`s.
///
/// The bound is linear in the input: a length field claiming 2^60 bytes with 20 bytes behind it
/// may not cost more than 20 honest bytes would.
fn alloc_bound(len: usize) -> usize {
    std::mem::size_of::<Arg>() * (len / 4 + 1) + 3 * len + wire::MAX_KEY_LEN + 1024
}

// ---------------------------------------------------------------------------------------------
// PRNG (splitmix64): small, seedable, good enough for choosing mutations.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// The spec encoder: an independent writer of the layouts of docs/rpc.md, which also records
// where its length, count and index fields are, so mutations can aim at them.

/// A field of an encoding the mutator may set to a hostile value.
#[derive(Clone, Copy, Debug)]
struct Field {
    at: usize,
    width: usize,
}

#[derive(Default)]
struct SpecOut {
    b: Vec<u8>,
    fields: Vec<Field>,
}

impl SpecOut {
    fn i32(&mut self, v: i32) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn field32(&mut self, v: i32) {
        self.fields.push(Field {
            at: self.b.len(),
            width: 4,
        });
        self.i32(v);
    }
    fn field64(&mut self, v: u64) {
        self.fields.push(Field {
            at: self.b.len(),
            width: 8,
        });
        self.u64(v);
    }
    fn len_bytes(&mut self, data: &[u8]) {
        self.field64(data.len() as u64);
        self.b.extend_from_slice(data);
    }
    /// §5.5 "DLTensor wire record".
    fn tensor(&mut self, t: &WireTensor) {
        self.u64(t.data);
        self.i32(t.device.device_type);
        self.i32(t.device.device_id);
        self.field32(t.shape.len() as i32);
        self.b.push(t.dtype.code);
        self.b.push(t.dtype.bits);
        self.b.extend_from_slice(&t.dtype.lanes.to_le_bytes());
        for &d in &t.shape {
            self.field64(d as u64);
        }
        self.field64(t.byte_offset);
    }
    /// §5.5: one value, type index first.
    fn arg(&mut self, a: &Arg) {
        match a {
            Arg::None => self.field32(0),
            Arg::Int(v) => {
                self.field32(1);
                self.u64(*v as u64);
            }
            Arg::Bool(v) => {
                self.field32(2);
                self.u64(*v as u64);
            }
            Arg::Float(v) => {
                self.field32(3);
                self.u64(v.to_bits());
            }
            Arg::OpaquePtr(v) => {
                self.field32(4);
                self.u64(*v);
            }
            Arg::DataType(d) => {
                self.field32(5);
                self.b.extend_from_slice(&[d.code, d.bits]);
                self.b.extend_from_slice(&d.lanes.to_le_bytes());
                self.i32(0); // padding
            }
            Arg::Device(d) => {
                self.field32(6);
                self.i32(d.device_type);
                self.i32(d.device_id);
            }
            Arg::Tensor(t) => {
                self.field32(7);
                self.tensor(t);
            }
            Arg::RawStr(s) => {
                self.field32(8);
                self.len_bytes(s.as_bytes());
            }
            Arg::ByteArray(b) => {
                self.field32(9);
                self.len_bytes(b);
            }
            Arg::Function(h) => {
                self.field32(68);
                self.u64(*h);
            }
            Arg::Module(h) => {
                self.field32(73);
                self.u64(*h);
            }
            Arg::Str(s) => {
                self.field32(65);
                self.field32(65);
                self.len_bytes(s.as_bytes());
            }
            Arg::Bytes(b) => {
                self.field32(66);
                self.field32(66);
                self.len_bytes(b);
            }
            Arg::ObjectRef { type_index, handle } => {
                self.field32(*type_index);
                self.field32(115);
                self.u64(*handle);
            }
        }
    }
    fn seq(&mut self, args: &[Arg]) {
        self.field32(args.len() as i32);
        for a in args {
            self.arg(a);
        }
    }
}

fn spec_seq(args: &[Arg]) -> SpecOut {
    let mut o = SpecOut::default();
    o.seq(args);
    o
}

/// The encoded size of a value per the table of §5.5, computed without encoding.
fn spec_size(a: &Arg) -> usize {
    4 + match a {
        Arg::None => 0,
        Arg::Int(_) | Arg::Bool(_) | Arg::Float(_) | Arg::OpaquePtr(_) => 8,
        Arg::DataType(_) | Arg::Device(_) => 8,
        Arg::Tensor(t) => 8 + 8 + 4 + 4 + 8 * t.shape.len() + 8,
        Arg::RawStr(s) => 8 + s.len(),
        Arg::ByteArray(b) => 8 + b.len(),
        Arg::Function(_) | Arg::Module(_) => 8,
        Arg::Str(s) => 4 + 8 + s.len(),
        Arg::Bytes(b) => 4 + 8 + b.len(),
        Arg::ObjectRef { .. } => 4 + 8,
    }
}

/// Float-aware equality (NaN payloads compare by bits).
fn same_arg(a: &Arg, b: &Arg) -> bool {
    match (a, b) {
        (Arg::Float(x), Arg::Float(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn same_seq(a: &[Arg], b: &[Arg]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_arg(x, y))
}

// ---------------------------------------------------------------------------------------------
// Value generators.

fn gen_string(r: &mut Rng) -> String {
    const PIECES: &[&str] = &[
        "m.so",
        "tvm.rpc.server.upload",
        "../x",
        "/abs",
        "a\0b",
        "é",
        "日本",
        "",
        " ",
        "0.8.0",
        "\u{10FFFF}",
    ];
    let mut s = String::new();
    for _ in 0..r.below(4) {
        if r.chance(2) {
            s.push_str(PIECES[r.below(PIECES.len())]);
        } else {
            s.push(char::from(b' ' + (r.below(95) as u8)));
        }
    }
    s
}

fn gen_dtype(r: &mut Rng) -> WireDType {
    const COMMON: &[(u8, u8)] = &[(0, 32), (0, 64), (1, 8), (2, 32), (2, 16), (2, 64), (1, 1)];
    if r.chance(4) {
        WireDType {
            code: r.next() as u8,
            bits: r.next() as u8,
            lanes: r.next() as u16,
        }
    } else {
        let (code, bits) = COMMON[r.below(COMMON.len())];
        WireDType {
            code,
            bits,
            lanes: 1,
        }
    }
}

fn gen_i64(r: &mut Rng) -> i64 {
    const EDGE: &[i64] = &[0, 1, -1, 16, i64::MAX, i64::MIN, 1 << 31, 1 << 62];
    if r.chance(3) {
        EDGE[r.below(EDGE.len())]
    } else {
        (r.next() % 64) as i64
    }
}

fn gen_tensor(r: &mut Rng) -> WireTensor {
    let ndim = r.below(5);
    WireTensor {
        data: if r.chance(2) { 0 } else { r.next() },
        device: Device {
            device_type: if r.chance(4) { r.next() as i32 } else { 1 },
            device_id: if r.chance(4) { r.next() as i32 } else { 0 },
        },
        dtype: gen_dtype(r),
        shape: (0..ndim).map(|_| gen_i64(r)).collect(),
        byte_offset: if r.chance(3) { r.next() } else { 0 },
    }
}

/// Outer indices that an `ObjectRef` survives a round trip with: the small-object forms and
/// every object index the decoder does not read as a bare handle (68 Function, 73 Module) or
/// refuse (70 Tensor).
fn gen_object_index(r: &mut Rng) -> i32 {
    loop {
        let ti = match r.below(4) {
            0 => 11,
            1 => 12,
            2 => 64 + r.below(64) as i32,
            _ => 64 + (r.next() % (i32::MAX as u64 - 64)) as i32,
        };
        if ti != 68 && ti != 70 && ti != 73 {
            return ti;
        }
    }
}

fn gen_arg(r: &mut Rng) -> Arg {
    match r.below(15) {
        0 => Arg::None,
        1 => Arg::Int(gen_i64(r)),
        2 => Arg::Bool(r.chance(2)),
        3 => Arg::Float(f64::from_bits(r.next())),
        4 => Arg::OpaquePtr(r.next()),
        5 => Arg::DataType(gen_dtype(r)),
        6 => Arg::Device(Device {
            device_type: r.next() as i32,
            device_id: r.next() as i32,
        }),
        7 => Arg::Tensor(gen_tensor(r)),
        8 => Arg::RawStr(gen_string(r)),
        9 => {
            let n = r.below(12);
            Arg::ByteArray(r.bytes(n))
        }
        10 => Arg::Function(r.next()),
        11 => Arg::Module(r.next()),
        12 => Arg::Str(gen_string(r)),
        13 => {
            let n = r.below(12);
            Arg::Bytes(r.bytes(n))
        }
        _ => Arg::ObjectRef {
            type_index: gen_object_index(r),
            handle: r.next(),
        },
    }
}

fn gen_args(r: &mut Rng) -> Vec<Arg> {
    let n = r.below(6);
    (0..n).map(|_| gen_arg(r)).collect()
}

// ---------------------------------------------------------------------------------------------
// Seeds.

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).expect("hex literal in the test"))
        .collect()
}

/// What a seed is: the decoder it is meant for. Every decoder sees every input anyway; the kind
/// only tells which canonical round trip a seed must satisfy.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Seq,
    Stream,
    Handshake,
    Raw,
}

#[derive(Clone)]
struct Seed {
    kind: Kind,
    bytes: Vec<u8>,
    fields: Vec<Field>,
}

fn frame_with_fields(code: i32, body: &SpecOut) -> Seed {
    let mut s = SpecOut::default();
    s.field64(4 + body.b.len() as u64);
    s.field32(code);
    let off = s.b.len();
    s.b.extend_from_slice(&body.b);
    s.fields.extend(body.fields.iter().map(|f| Field {
        at: f.at + off,
        width: f.width,
    }));
    Seed {
        kind: Kind::Stream,
        bytes: s.b,
        fields: s.fields,
    }
}

/// The bodies and frames of §5.6 and §5.10, byte sequences copied from the spec's trace, plus
/// one valid encoding of every type index of §5.5.
fn seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    let raw = |kind, bytes: Vec<u8>| Seed {
        kind,
        bytes,
        fields: Vec::new(),
    };
    // §5.2 handshake bytes, and one with the timeout option.
    out.push(raw(
        Kind::Handshake,
        hex("71 f2 0f 00 07 00 00 00 63 6c 69 65 6e 74 3a"),
    ));
    let mut h = SpecOut::default();
    h.field32(0xFF271);
    let key = b"client:abc -timeout=60";
    h.field32(key.len() as i32);
    h.b.extend_from_slice(key);
    out.push(Seed {
        kind: Kind::Handshake,
        bytes: h.b,
        fields: h.fields,
    });
    // §5.10 frames as captured.
    for f in [
        // #002 kInitServer "0.8.0" []
        "15 00 00 00 00 00 00 00 02 00 00 00 05 00 00 00 00 00 00 00 30 2e 38 2e 30 00 00 00 00",
        // #003 kReturn [None]
        "0c 00 00 00 00 00 00 00 04 00 00 00 01 00 00 00 00 00 00 00",
        // #005 kReturn [OpaquePtr]
        "14 00 00 00 00 00 00 00 04 00 00 00 01 00 00 00 04 00 00 00 20 92 ee 76 4b 56 00 00",
        // #130 kShutdown
        "04 00 00 00 00 00 00 00 01 00 00 00",
        // #073 kReturn [Int 70, DLTensor, OpaquePtr]
        "54 00 00 00 00 00 00 00 04 00 00 00 03 00 00 00 01 00 00 00 46 00 00 00 00 00 00 00 \
         07 00 00 00 40 1b 01 74 8f 7f 00 00 01 00 00 00 00 00 00 00 02 00 00 00 02 20 01 00 \
         01 00 00 00 00 00 00 00 08 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
         04 00 00 00 70 2b 01 74 8f 7f 00 00",
    ] {
        out.push(raw(Kind::Stream, hex(f)));
    }
    // §5.10 #006 (shortened blob), #014, #046 as packed sequences.
    let x = WireTensor {
        data: 0x7f8f7400fd40,
        device: Device::CPU,
        dtype: WireDType {
            code: 2,
            bits: 32,
            lanes: 1,
        },
        shape: vec![1, 16],
        byte_offset: 0,
    };
    for args in [
        vec![
            Arg::RawStr("m.so".into()),
            Arg::Bytes(b"\x7fELF\x02\x01\x01\0".to_vec()),
        ],
        vec![
            Arg::Module(0x7f8f74007eb8),
            Arg::RawStr("vm_load_executable".into()),
            Arg::Bool(true),
        ],
        vec![
            Arg::Tensor(WireTensor {
                data: 0,
                ..x.clone()
            }),
            Arg::None,
        ],
        vec![Arg::Device(Device::CPU), Arg::OpaquePtr(0)],
        vec![Arg::RawStr("tvm.rpc.server.upload".into())],
    ] {
        let s = spec_seq(&args);
        out.push(Seed {
            kind: Kind::Seq,
            bytes: s.b,
            fields: s.fields,
        });
    }
    // Every type index of §5.5 once, including the small forms 11/12 and an object reference.
    let mut every = vec![
        Arg::None,
        Arg::Int(-5),
        Arg::Bool(true),
        Arg::Float(1.5),
        Arg::OpaquePtr(7),
        Arg::DataType(x.dtype),
        Arg::Device(Device::CPU),
        Arg::Tensor(x.clone()),
        Arg::RawStr("x".into()),
        Arg::ByteArray(vec![1, 2]),
        Arg::Function(3),
        Arg::Module(4),
        Arg::Str("s".into()),
        Arg::Bytes(vec![9]),
        Arg::ObjectRef {
            type_index: 69,
            handle: 5,
        },
    ];
    let s = spec_seq(&every);
    out.push(Seed {
        kind: Kind::Seq,
        bytes: s.b,
        fields: s.fields,
    });
    // Small forms (outer 11 / 12) are not canonical: raw seeds.
    out.push(raw(
        Kind::Raw,
        hex("01 00 00 00 0c 00 00 00 42 00 00 00 01 00 00 00 00 00 00 00 61"),
    ));
    out.push(raw(
        Kind::Raw,
        hex("01 00 00 00 0b 00 00 00 41 00 00 00 01 00 00 00 00 00 00 00 61"),
    ));
    // Whole request frames of every kind the server reads (§5.6), built by the spec encoder.
    let mut init = SpecOut::default();
    init.len_bytes(b"0.8.0");
    init.seq(&[]);
    out.push(frame_with_fields(RpcCode::InitServer as i32, &init));
    let mut call = SpecOut::default();
    call.u64(0x564b76ee9220);
    call.seq(&every[..8]);
    out.push(frame_with_fields(RpcCode::CallFunc as i32, &call));
    let mut to = SpecOut::default();
    to.tensor(&x);
    to.len_bytes(&[0xAB; 64]);
    out.push(frame_with_fields(RpcCode::CopyToRemote as i32, &to));
    let mut from = SpecOut::default();
    from.tensor(&x);
    from.field64(64);
    out.push(frame_with_fields(RpcCode::CopyFromRemote as i32, &from));
    for code in [9, 10, 13, 14, 15, 17] {
        every.rotate_left(1);
        let s = spec_seq(&every[..3]);
        out.push(frame_with_fields(code, &s));
    }
    // A stream of two frames with an empty packet between.
    let mut two = out[3].bytes.clone();
    two.extend_from_slice(&[0; 8]);
    two.extend_from_slice(&out[4].bytes);
    out.push(raw(Kind::Raw, two));
    out
}

// ---------------------------------------------------------------------------------------------
// Mutations.

const BOUNDARY64: &[u64] = &[
    0,
    1,
    3,
    4,
    5,
    7,
    8,
    0x7f,
    0x80,
    0xff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    1 << 60,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX,
    u64::MAX - 3,
];

fn boundary(r: &mut Rng, len: usize) -> u64 {
    match r.below(4) {
        // Around the input's own size: off-by-one lengths.
        0 => (len as u64).wrapping_add(r.below(9) as u64).wrapping_sub(4),
        1 => r.next(),
        _ => BOUNDARY64[r.below(BOUNDARY64.len())],
    }
}

fn mutate(r: &mut Rng, seed: &Seed, other: &Seed) -> Vec<u8> {
    let mut b = seed.bytes.clone();
    let rounds = 1 + r.below(3);
    for _ in 0..rounds {
        let len = b.len();
        match r.below(10) {
            // Bit flip.
            0 if len > 0 => {
                let i = r.below(len);
                b[i] ^= 1 << r.below(8);
            }
            // Random byte.
            1 if len > 0 => {
                let i = r.below(len);
                b[i] = r.next() as u8;
            }
            // Insert bytes.
            2 => {
                let i = r.below(len + 1);
                let n = 1 + r.below(8);
                let ins = r.bytes(n);
                b.splice(i..i, ins);
            }
            // Delete a range.
            3 if len > 0 => {
                let i = r.below(len);
                let n = 1 + r.below((len - i).min(16));
                b.drain(i..i + n);
            }
            // Truncate.
            4 if len > 0 => b.truncate(r.below(len)),
            // A recorded length / count / index field set to a boundary value.
            5 | 6 if !seed.fields.is_empty() => {
                let f = seed.fields[r.below(seed.fields.len())];
                let v = boundary(r, len).to_le_bytes();
                if f.at + f.width <= b.len() {
                    b[f.at..f.at + f.width].copy_from_slice(&v[..f.width]);
                }
            }
            // Any 4- or 8-byte window set to a boundary value.
            7 if len >= 8 => {
                let w = if r.chance(2) { 4 } else { 8 };
                let i = r.below(len - w + 1);
                let v = boundary(r, len).to_le_bytes();
                b[i..i + w].copy_from_slice(&v[..w]);
            }
            // Splice: our head with another seed's tail.
            8 => {
                let cut = r.below(len + 1);
                let ocut = r.below(other.bytes.len() + 1);
                b.truncate(cut);
                b.extend_from_slice(&other.bytes[ocut..]);
            }
            // Duplicate a chunk (repeated fields, repeated packets).
            _ if len > 0 => {
                let i = r.below(len);
                let n = 1 + r.below((len - i).min(32));
                let chunk = b[i..i + n].to_vec();
                let at = r.below(b.len() + 1);
                b.splice(at..at, chunk);
            }
            _ => {}
        }
    }
    b
}

// ---------------------------------------------------------------------------------------------
// The oracles.

/// A reader handing out random short reads and `Interrupted` errors, to drive the framing code
/// through its partial-read paths.
struct Choppy<'a> {
    data: &'a [u8],
    rng: Rng,
}

impl Read for Choppy<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.rng.chance(5) {
            return Err(io::Error::from(io::ErrorKind::Interrupted));
        }
        let n = buf.len().min(self.data.len()).min(1 + self.rng.below(7));
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// The outcome of one packet read, comparable across readers (errors by variant only).
#[derive(Debug, PartialEq)]
enum PacketOutcome {
    Packet(Packet),
    Err(&'static str),
}

fn outcome(r: Result<Packet, WireError>) -> PacketOutcome {
    match r {
        Ok(p) => PacketOutcome::Packet(p),
        Err(e) => PacketOutcome::Err(match e {
            WireError::Io(_) => "Io",
            WireError::Closed => "Closed",
            WireError::Truncated { .. } => "Truncated",
            WireError::TooLarge { .. } => "TooLarge",
            _ => "other",
        }),
    }
}

struct Stats {
    execs: u64,
    decoder_calls: u64,
    seq_ok: u64,
    packets_ok: u64,
    bodies_ok: u64,
    handshakes_ok: u64,
    max_alloc_ratio: f64,
}

struct Fuzz {
    stats: Stats,
}

impl Fuzz {
    /// Runs `f` on `input` under `catch_unwind` and the allocation meter; fails loudly with the
    /// input on a panic or an allocation above the bound.
    fn check<T>(&mut self, name: &str, input: &[u8], f: impl FnOnce() -> T) -> T {
        self.stats.decoder_calls += 1;
        let (r, peak) = match catch_unwind(AssertUnwindSafe(|| measured(f))) {
            Ok(v) => v,
            Err(_) => panic!(
                "{name} panicked on input ({} bytes): {}",
                input.len(),
                to_hex(input)
            ),
        };
        let bound = alloc_bound(input.len());
        assert!(
            peak <= bound,
            "{name} allocated {peak} bytes (bound {bound}) for input ({} bytes): {}",
            input.len(),
            to_hex(input)
        );
        let ratio = peak as f64 / bound as f64;
        if ratio > self.stats.max_alloc_ratio {
            self.stats.max_alloc_ratio = ratio;
        }
        r
    }

    fn seq(&mut self, x: &[u8], canonical: bool) {
        let Ok(v) = self.check("decode_seq", x, || decode_seq(x)) else {
            return;
        };
        self.stats.seq_ok += 1;
        let e = encode_seq(&v);
        assert_eq!(
            e.len(),
            x.len(),
            "re-encoding changed the length of {}",
            to_hex(x)
        );
        if canonical {
            assert_eq!(e, x, "canonical input did not re-encode to itself");
        }
        let v2 = decode_seq(&e)
            .unwrap_or_else(|err| panic!("re-encoding of {} does not decode: {err}", to_hex(x)));
        assert!(same_seq(&v, &v2), "values changed through re-encoding");
        assert_eq!(encode_seq(&v2), e, "encoding is not a fixed point");
        assert_eq!(4 + v.iter().map(spec_size).sum::<usize>(), e.len());
        // Derived values are total too.
        for a in &v {
            if let Arg::Tensor(t) = a {
                check_nbytes(t);
            }
        }
        // The cursor API agrees with `decode_seq` value by value.
        let mut c = Cursor::new(x);
        let n = c.i32("count").expect("decoded above");
        assert_eq!(n as usize, v.len());
        for a in &v {
            assert!(same_arg(&c.arg().expect("decoded above"), a));
        }
        assert_eq!(c.remaining(), 0);
    }

    /// Reads packets from `x` until an error, as the server's loop would, and decodes each body
    /// with the decoder of its code.
    fn stream(&mut self, x: &[u8], seed: u64) {
        for max in [1 << 20, 64, u64::MAX] {
            let mut rd = x;
            let mut choppy = Choppy {
                data: x,
                rng: Rng(seed ^ max),
            };
            for _ in 0..8 {
                let before = rd.len();
                let a = self.check("read_packet", x, || read_packet(&mut rd, max));
                let b = self.check("read_packet(choppy)", x, || read_packet(&mut choppy, max));
                let a = outcome(a);
                assert_eq!(
                    a,
                    outcome(b),
                    "short reads changed the result on {}",
                    to_hex(x)
                );
                let PacketOutcome::Packet(p) = a else { break };
                self.stats.packets_ok += 1;
                assert!(p.body.len() as u64 + 4 <= max);
                // Consumed exactly the frame (plus any skipped empty packets before it).
                let used = before - rd.len();
                assert!(used >= 12 + p.body.len() && (used - 12 - p.body.len()) % 8 == 0);
                if let Some(code) = p.rpc_code() {
                    let f = frame(code, &p.body);
                    assert_eq!(&f[..], &x[x.len() - before + used - f.len()..][..f.len()]);
                }
                self.body(&p);
            }
        }
    }

    fn body(&mut self, p: &Packet) {
        let b = &p.body[..];
        let ok = match p.rpc_code() {
            Some(RpcCode::InitServer) => self
                .check("decode_init_server", b, || decode_init_server(b))
                .is_ok(),
            Some(RpcCode::CallFunc) => self
                .check("decode_call_func", b, || decode_call_func(b))
                .is_ok(),
            Some(RpcCode::CopyToRemote) => {
                let r = self.check("decode_copy_to_remote", b, || decode_copy_to_remote(b));
                if let Ok((t, data)) = &r {
                    check_nbytes(t);
                    assert!(data.len() <= b.len());
                }
                r.is_ok()
            }
            Some(RpcCode::CopyFromRemote) => {
                let r = self.check("decode_copy_from_remote", b, || decode_copy_from_remote(b));
                if let Ok((t, _)) = &r {
                    check_nbytes(t);
                }
                r.is_ok()
            }
            _ => {
                self.seq(b, false);
                false
            }
        };
        if ok {
            self.stats.bodies_ok += 1;
        }
    }

    fn handshake(&mut self, x: &[u8]) {
        let Ok(h) = self.check("read_client_handshake", x, || {
            read_client_handshake(&mut &x[..])
        }) else {
            return;
        };
        self.stats.handshakes_ok += 1;
        assert!(h.raw.len() <= wire::MAX_KEY_LEN);
        let key = h.key();
        let opts = h.options();
        assert!(!key.contains(char::is_whitespace));
        assert!(h.raw.contains(key) && h.raw.contains(opts));
        if let Some(t) = h.timeout_secs() {
            assert!(t.is_finite() && t > 0.0);
        }
        let mut back = Vec::new();
        wire::write_handshake(&mut back, &h.raw).expect("writing to a Vec");
        assert_eq!(back, x[..back.len()], "handshake did not re-encode");
    }

    fn all(&mut self, x: &[u8], kind: Kind, canonical: bool, seed: u64) {
        self.stats.execs += 1;
        self.seq(x, canonical && kind == Kind::Seq);
        self.stream(x, seed);
        self.handshake(x);
        // The body decoders directly on the input too (not only inside frames).
        self.check("decode_init_server", x, || decode_init_server(x))
            .ok();
        self.check("decode_call_func", x, || decode_call_func(x))
            .ok();
        self.check("decode_copy_to_remote", x, || decode_copy_to_remote(x))
            .ok();
        self.check("decode_copy_from_remote", x, || decode_copy_from_remote(x))
            .ok();
        let mut c = Cursor::new(x);
        if let Ok(t) = self.check("Cursor::tensor", x, || c.tensor()) {
            check_nbytes(&t);
        }
    }
}

/// `nbytes` against a u128 product (an independent computation).
fn check_nbytes(t: &WireTensor) {
    let got = t.nbytes();
    let bits = u128::from(t.dtype.bits) * u128::from(t.dtype.lanes);
    let mut want: Option<u128> = (bits != 0 && bits % 8 == 0).then_some(bits / 8);
    for &d in &t.shape {
        want = match (want, u128::try_from(d)) {
            (Some(w), Ok(d)) => w.checked_mul(d).filter(|v| *v <= u128::from(u64::MAX)),
            _ => None,
        };
    }
    assert_eq!(got.map(u128::from), want, "nbytes of {t:?}");
}

fn to_hex(b: &[u8]) -> String {
    let shown: Vec<String> = b.iter().take(512).map(|x| format!("{x:02x}")).collect();
    let more = if b.len() > 512 { " ..." } else { "" };
    format!("{}{more}", shown.join(" "))
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a non-negative integer")),
        Err(_) => default,
    }
}

/// Default iterations: about 5-10 s in a debug build on the 2-core reference machine.
const DEFAULT_ITERS: u64 = 200_000;

#[test]
fn fuzz_wire_decoders() {
    let iters = env_u64("MOTE_FUZZ_ITERS", DEFAULT_ITERS);
    let seed = env_u64("MOTE_FUZZ_SEED", 0x6d6f_7465_7270_6331);
    let mut rng = Rng(seed);
    let mut fz = Fuzz {
        stats: Stats {
            execs: 0,
            decoder_calls: 0,
            seq_ok: 0,
            packets_ok: 0,
            bodies_ok: 0,
            handshakes_ok: 0,
            max_alloc_ratio: 0.0,
        },
    };
    let start = Instant::now();

    // The seeds themselves, unmutated: every canonical one round-trips exactly.
    let base = seeds();
    for s in &base {
        fz.all(&s.bytes, s.kind, true, rng.next());
    }
    // Corpus: the seeds, plus mutants that still decode as something (kept up to a cap), so
    // mutations stack on structure rather than on noise.
    let mut corpus = base.clone();
    const CORPUS_CAP: usize = 400;
    for i in 0..iters {
        // Every 8th input: a freshly generated value sequence, also checked as such.
        if i % 8 == 0 {
            let v = gen_args(&mut rng);
            let spec = spec_seq(&v);
            let enc = encode_seq(&v);
            assert_eq!(
                enc, spec.b,
                "crate encoding differs from the spec for {v:?}"
            );
            let back = decode_seq(&enc).expect("generated value decodes");
            assert!(same_seq(&back, &v), "decode(encode(v)) != v for {v:?}");
            let s = Seed {
                kind: Kind::Seq,
                bytes: spec.b,
                fields: spec.fields,
            };
            fz.all(&s.bytes, s.kind, true, rng.next());
            if corpus.len() < CORPUS_CAP {
                corpus.push(s);
            } else {
                let j = base.len() + rng.below(CORPUS_CAP - base.len());
                corpus[j] = s;
            }
            continue;
        }
        let a = rng.below(corpus.len());
        let b = rng.below(corpus.len());
        let x = mutate(&mut rng, &corpus[a], &corpus[b]);
        let before = fz.stats.seq_ok + fz.stats.packets_ok + fz.stats.handshakes_ok;
        let kind = corpus[a].kind;
        fz.all(&x, kind, false, rng.next());
        let after = fz.stats.seq_ok + fz.stats.packets_ok + fz.stats.handshakes_ok;
        if after > before && x.len() < 4096 && rng.chance(4) {
            let s = Seed {
                kind: Kind::Raw,
                bytes: x,
                fields: Vec::new(),
            };
            if corpus.len() < CORPUS_CAP {
                corpus.push(s);
            } else {
                let j = base.len() + rng.below(CORPUS_CAP - base.len());
                corpus[j] = s;
            }
        }
    }

    // Return frames (server → client) through the packet reader.
    for r in [
        Ret::None,
        Ret::Int(-3),
        Ret::Str("é".into()),
        Ret::Bytes(vec![1, 2, 3]),
        Ret::Module(9),
    ] {
        let f = return_frame(&r.to_args());
        let p = read_packet(&mut &f[..], 1 << 20).expect("return frame reads");
        assert_eq!(p.rpc_code(), Some(RpcCode::Return));
        assert!(same_seq(&decode_seq(&p.body).expect("seq"), &r.to_args()));
    }

    let secs = start.elapsed().as_secs_f64();
    let st = &fz.stats;
    println!(
        "fuzz_wire: {} executions ({} decoder calls) in {secs:.2} s = {:.0} exec/s, \
         {:.0} decoder calls/s; seed {seed:#x}",
        st.execs,
        st.decoder_calls,
        st.execs as f64 / secs,
        st.decoder_calls as f64 / secs
    );
    println!(
        "fuzz_wire: accepted: {} sequences, {} packets, {} typed bodies, {} handshakes; \
         highest peak heap / bound {:.3} (bound = {} B per 4 input bytes + 3 B per byte + {} B)",
        st.seq_ok,
        st.packets_ok,
        st.bodies_ok,
        st.handshakes_ok,
        st.max_alloc_ratio,
        std::mem::size_of::<Arg>(),
        wire::MAX_KEY_LEN + 1024
    );
    // The fuzzer must have reached past the first length check in every decoder family.
    assert!(st.seq_ok > iters / 20, "too few sequences decoded");
    assert!(st.packets_ok > iters / 50, "too few packets decoded");
    assert!(st.bodies_ok > 0 && st.handshakes_ok > 0);
}

/// The allocation meter works (otherwise the bound above would assert nothing), and the
/// hostile lengths of the spec cost nothing.
#[test]
fn allocation_meter_sees_allocations_and_hostile_lengths_cost_nothing() {
    let (v, peak) = measured(|| vec![0u8; 1 << 20]);
    assert!(peak >= 1 << 20, "meter saw {peak} bytes for a 1 MiB vector");
    drop(v);

    // A packet claiming 2^62 bytes, accepted by the limit, with 16 bytes behind it.
    let mut b = Vec::new();
    b.put_u64(1 << 62);
    b.put_i32(3);
    b.extend_from_slice(&[0; 16]);
    let (r, peak) = measured(|| read_packet(&mut &b[..], u64::MAX));
    assert!(matches!(r, Err(WireError::Io(_))), "{r:?}");
    assert!(peak <= alloc_bound(b.len()), "peak {peak}");

    // A sequence claiming i32::MAX values, a string claiming 2^60 bytes, ndim i32::MAX.
    for x in [
        hex("ff ff ff 7f 00 00 00 00"),
        hex("01 00 00 00 08 00 00 00 00 00 00 00 00 00 00 10 61 62"),
        hex("01 00 00 00 07 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 ff ff ff 7f 02 20 01 00"),
    ] {
        let (r, peak) = measured(|| decode_seq(&x));
        assert!(r.is_err());
        assert!(peak <= alloc_bound(x.len()), "peak {peak} for {}", to_hex(&x));
    }
}
