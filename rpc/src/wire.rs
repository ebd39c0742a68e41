//! The byte level of TVM 0.27's RPC protocol: handshake, packet framing, packed sequences and
//! the shapes of return values. Everything here is described in `docs/rpc.md` ("Wire format").
//!
//! Decoding is total: every function returns a [`WireError`] on malformed input, never panics,
//! and never allocates more than the bytes actually present justify (a length field claiming
//! 2^60 bytes fails with [`WireError::Truncated`] before any allocation).

use std::io::{self, Read, Write};

/// `RPC_MAGIC` (docs/rpc.md "Handshake"): the first i32 of both handshake messages, and the
/// success code of the server's reply.
pub const RPC_MAGIC: i32 = 0xFF271;
/// Server reply: the key matched; a key string follows.
pub const CODE_SUCCESS: i32 = RPC_MAGIC;
/// Server (proxy) reply: another peer already waits with this key.
pub const CODE_DUPLICATE: i32 = RPC_MAGIC + 1;
/// Server reply: the key does not match; the server closes the connection.
pub const CODE_MISMATCH: i32 = RPC_MAGIC + 2;
/// The only protocol version a client may announce in `kInitServer`.
pub const PROTOCOL_VERSION: &str = "0.8.0";
/// Longest handshake key accepted by [`read_client_handshake`].
pub const MAX_KEY_LEN: usize = 4096;
/// Prefix of the exception message TVM's client turns into `RPCSessionTimeoutError`.
pub const TIMEOUT_ERROR_PREFIX: &str = "RPCSessionTimeoutError: ";

/// Everything that can be wrong with bytes from the peer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The socket failed (this includes a peer closing in the middle of a message).
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection cleanly at a message boundary.
    #[error("connection closed by the peer")]
    Closed,
    /// A field needs more bytes than the message holds.
    #[error("truncated message: {what} needs {need} bytes, {have} left")]
    Truncated {
        what: &'static str,
        need: u64,
        have: usize,
    },
    /// A length is above the configured limit.
    #[error("{what} of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        what: &'static str,
        len: u64,
        max: u64,
    },
    /// The handshake did not start with `RPC_MAGIC`.
    #[error("bad handshake magic {0:#x}")]
    BadMagic(i32),
    /// A packed-sequence type index Mote does not accept.
    #[error("unsupported argument type index {0}")]
    BadTypeIndex(i32),
    /// The inner type index of an object is not Str (65), Bytes (66) or RPCObjectRef (115).
    #[error("unsupported object type index {inner} (outer {outer})")]
    BadInnerTypeIndex { outer: i32, inner: u32 },
    /// A negative count or length.
    #[error("negative {what}: {value}")]
    Negative { what: &'static str, value: i64 },
    /// A string is not UTF-8.
    #[error("{what} is not valid UTF-8")]
    Utf8 { what: &'static str },
    /// Bytes were left after a complete message.
    #[error("{0} unexpected trailing bytes")]
    Trailing(usize),
}

/// Result alias of this module.
pub type WireResult<T> = Result<T, WireError>;

/// `RPCCode` values (docs/rpc.md "Packet codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[allow(missing_docs)]
pub enum RpcCode {
    None = 0,
    Shutdown = 1,
    InitServer = 2,
    CallFunc = 3,
    Return = 4,
    Exception = 5,
    CopyFromRemote = 6,
    CopyToRemote = 7,
    CopyAck = 8,
    GetGlobalFunc = 9,
    FreeHandle = 10,
    DevSetDevice = 11,
    DevGetAttr = 12,
    DevAllocData = 13,
    DevFreeData = 14,
    DevStreamSync = 15,
    CopyAmongRemote = 16,
    DevAllocDataWithScope = 17,
    DevCreateStream = 18,
    DevFreeStream = 19,
    DevSetStream = 20,
    DevGetCurrentStream = 21,
}

impl RpcCode {
    /// The code for a raw value, `None` for values outside the enum.
    pub fn from_i32(v: i32) -> Option<RpcCode> {
        use RpcCode::*;
        Some(match v {
            0 => None,
            1 => Shutdown,
            2 => InitServer,
            3 => CallFunc,
            4 => Return,
            5 => Exception,
            6 => CopyFromRemote,
            7 => CopyToRemote,
            8 => CopyAck,
            9 => GetGlobalFunc,
            10 => FreeHandle,
            11 => DevSetDevice,
            12 => DevGetAttr,
            13 => DevAllocData,
            14 => DevFreeData,
            15 => DevStreamSync,
            16 => CopyAmongRemote,
            17 => DevAllocDataWithScope,
            18 => DevCreateStream,
            19 => DevFreeStream,
            20 => DevSetStream,
            21 => DevGetCurrentStream,
            _ => return Option::None,
        })
    }
}

/// Type indices of the packed sequence (docs/rpc.md "Packed sequences").
pub mod type_index {
    #![allow(missing_docs)]
    pub const NONE: i32 = 0;
    pub const INT: i32 = 1;
    pub const BOOL: i32 = 2;
    pub const FLOAT: i32 = 3;
    pub const OPAQUE_PTR: i32 = 4;
    pub const DATA_TYPE: i32 = 5;
    pub const DEVICE: i32 = 6;
    pub const DL_TENSOR_PTR: i32 = 7;
    pub const RAW_STR: i32 = 8;
    pub const BYTE_ARRAY_PTR: i32 = 9;
    pub const SMALL_STR: i32 = 11;
    pub const SMALL_BYTES: i32 = 12;
    pub const STATIC_OBJECT_BEGIN: i32 = 64;
    pub const STR: i32 = 65;
    pub const BYTES: i32 = 66;
    pub const FUNCTION: i32 = 68;
    pub const ARRAY: i32 = 69;
    pub const TENSOR: i32 = 70;
    pub const SHAPE: i32 = 72;
    pub const MODULE: i32 = 73;
    pub const RPC_OBJECT_REF: i32 = 115;
}

/// DLPack `DLDataType` as it travels: code, bits, lanes (plus 4 zero bytes of padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WireDType {
    /// 0 int, 1 uint, 2 float, 4 bfloat, 6 bool...
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Vector lanes (1 for scalars).
    pub lanes: u16,
}

impl WireDType {
    /// Bytes of one element, `None` for sub-byte or zero-size types.
    pub fn element_bytes(&self) -> Option<u64> {
        let bits = u64::from(self.bits) * u64::from(self.lanes);
        if bits == 0 || bits % 8 != 0 {
            return None;
        }
        Some(bits / 8)
    }
}

/// A DLPack device: type (1 = CPU) and id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    /// `DLDeviceType` (1 = kDLCPU).
    pub device_type: i32,
    /// Device ordinal.
    pub device_id: i32,
}

impl Device {
    /// `cpu(0)`.
    pub const CPU: Device = Device {
        device_type: 1,
        device_id: 0,
    };
}

/// The DLTensor wire record: the server's data handle plus the tensor's metadata. Strides are
/// never sent (the tensor is contiguous).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireTensor {
    /// The server-side data handle (as returned by DevAllocData*, or in a returned tensor).
    pub data: u64,
    /// The device.
    pub device: Device,
    /// The element type.
    pub dtype: WireDType,
    /// The shape (may contain anything the peer sent, including negative extents).
    pub shape: Vec<i64>,
    /// Byte offset from `data`.
    pub byte_offset: u64,
}

impl WireTensor {
    /// `prod(shape) * element size`, `None` on a negative extent, a sub-byte type or overflow.
    pub fn nbytes(&self) -> Option<u64> {
        let mut n = self.dtype.element_bytes()?;
        for &d in &self.shape {
            n = n.checked_mul(u64::try_from(d).ok()?)?;
        }
        Some(n)
    }
}

/// One value of a packed sequence.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// 0: nothing.
    None,
    /// 1: i64.
    Int(i64),
    /// 2: bool (any non-zero i64 is true).
    Bool(bool),
    /// 3: f64.
    Float(f64),
    /// 4: a raw handle / pointer value.
    OpaquePtr(u64),
    /// 5: a data type.
    DataType(WireDType),
    /// 6: a device.
    Device(Device),
    /// 7: a DLTensor record.
    Tensor(WireTensor),
    /// 8: a raw string (how the Python client sends `str`).
    RawStr(String),
    /// 9: a raw byte array (how servers return Bytes).
    ByteArray(Vec<u8>),
    /// 68: a function handle living on the server.
    Function(u64),
    /// 73: a module handle living on the server.
    Module(u64),
    /// 65 / 11 (outer) with inner 65: a string object.
    Str(String),
    /// 66 / 12 (outer) with inner 66: a bytes object (how the Python client sends `bytes`).
    Bytes(Vec<u8>),
    /// An object of another type (`outer` ≥ 64) sent back by handle (inner 115).
    ObjectRef {
        /// The object's type index (the outer index).
        type_index: i32,
        /// The server handle.
        handle: u64,
    },
}

impl Arg {
    /// A short name of the variant for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Arg::None => "None",
            Arg::Int(_) => "int",
            Arg::Bool(_) => "bool",
            Arg::Float(_) => "float",
            Arg::OpaquePtr(_) => "handle",
            Arg::DataType(_) => "DataType",
            Arg::Device(_) => "Device",
            Arg::Tensor(_) => "tensor",
            Arg::RawStr(_) | Arg::Str(_) => "str",
            Arg::ByteArray(_) | Arg::Bytes(_) => "bytes",
            Arg::Function(_) => "Function",
            Arg::Module(_) => "Module",
            Arg::ObjectRef { .. } => "object",
        }
    }
}

/// A little-endian reader over a byte slice that fails instead of panicking.
#[derive(Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// Bytes not consumed yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Fails unless everything was consumed.
    pub fn finish(&self) -> WireResult<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(WireError::Trailing(n)),
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: u64, what: &'static str) -> WireResult<&'a [u8]> {
        let have = self.remaining();
        if n > have as u64 {
            return Err(WireError::Truncated {
                what,
                need: n,
                have,
            });
        }
        let n = n as usize;
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> WireResult<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// An i32.
    pub fn i32(&mut self, what: &'static str) -> WireResult<i32> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }
    /// A u32.
    pub fn u32(&mut self, what: &'static str) -> WireResult<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    /// An i64.
    pub fn i64(&mut self, what: &'static str) -> WireResult<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }
    /// A u64.
    pub fn u64(&mut self, what: &'static str) -> WireResult<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// `u64 len` + bytes.
    pub fn bytes(&mut self, what: &'static str) -> WireResult<&'a [u8]> {
        let n = self.u64(what)?;
        self.take(n, what)
    }

    /// `u64 len` + UTF-8 bytes.
    pub fn string(&mut self, what: &'static str) -> WireResult<String> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| WireError::Utf8 { what })
    }

    /// A DLTensor wire record.
    pub fn tensor(&mut self) -> WireResult<WireTensor> {
        let data = self.u64("tensor data")?;
        let device_type = self.i32("tensor device")?;
        let device_id = self.i32("tensor device")?;
        let ndim = self.i32("tensor ndim")?;
        if ndim < 0 {
            return Err(WireError::Negative {
                what: "ndim",
                value: ndim.into(),
            });
        }
        let [code, bits, l0, l1] = self.array("tensor dtype")?;
        // Check that the shape's bytes are present before allocating for it.
        let shape_bytes = self.take(ndim as u64 * 8, "tensor shape")?;
        let shape = shape_bytes
            .chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                i64::from_le_bytes(a)
            })
            .collect();
        let byte_offset = self.u64("tensor byte_offset")?;
        Ok(WireTensor {
            data,
            device: Device {
                device_type,
                device_id,
            },
            dtype: WireDType {
                code,
                bits,
                lanes: u16::from_le_bytes([l0, l1]),
            },
            shape,
            byte_offset,
        })
    }

    /// One packed-sequence value.
    pub fn arg(&mut self) -> WireResult<Arg> {
        use type_index as t;
        let ti = self.i32("type index")?;
        Ok(match ti {
            t::NONE => Arg::None,
            t::INT => Arg::Int(self.i64("int")?),
            t::BOOL => Arg::Bool(self.i64("bool")? != 0),
            t::FLOAT => Arg::Float(f64::from_bits(self.u64("float")?)),
            t::OPAQUE_PTR => Arg::OpaquePtr(self.u64("handle")?),
            t::DATA_TYPE => {
                let [code, bits, l0, l1] = self.array("dtype")?;
                self.take(4, "dtype padding")?;
                Arg::DataType(WireDType {
                    code,
                    bits,
                    lanes: u16::from_le_bytes([l0, l1]),
                })
            }
            t::DEVICE => Arg::Device(Device {
                device_type: self.i32("device")?,
                device_id: self.i32("device")?,
            }),
            t::DL_TENSOR_PTR => Arg::Tensor(self.tensor()?),
            t::RAW_STR => Arg::RawStr(self.string("string")?),
            t::BYTE_ARRAY_PTR => Arg::ByteArray(self.bytes("byte array")?.to_vec()),
            t::FUNCTION => Arg::Function(self.u64("function handle")?),
            t::MODULE => Arg::Module(self.u64("module handle")?),
            t::TENSOR => return Err(WireError::BadTypeIndex(ti)),
            t::SMALL_STR | t::SMALL_BYTES => self.object(ti)?,
            _ if ti >= t::STATIC_OBJECT_BEGIN => self.object(ti)?,
            _ => return Err(WireError::BadTypeIndex(ti)),
        })
    }

    fn object(&mut self, outer: i32) -> WireResult<Arg> {
        use type_index as t;
        let inner = self.u32("inner type index")?;
        Ok(match inner as i32 {
            t::STR => Arg::Str(self.string("string object")?),
            t::BYTES => Arg::Bytes(self.bytes("bytes object")?.to_vec()),
            t::RPC_OBJECT_REF => Arg::ObjectRef {
                type_index: outer,
                handle: self.u64("object handle")?,
            },
            _ => return Err(WireError::BadInnerTypeIndex { outer, inner }),
        })
    }

    /// A packed sequence: `i32 num_args` then the values.
    pub fn seq(&mut self) -> WireResult<Vec<Arg>> {
        let n = self.i32("argument count")?;
        if n < 0 {
            return Err(WireError::Negative {
                what: "argument count",
                value: n.into(),
            });
        }
        // Every value takes at least its 4-byte type index.
        let plausible = (n as usize).min(self.remaining() / 4);
        let mut out = Vec::with_capacity(plausible);
        for _ in 0..n {
            out.push(self.arg()?);
        }
        Ok(out)
    }
}

/// Decodes a complete packed sequence (no trailing bytes allowed).
pub fn decode_seq(buf: &[u8]) -> WireResult<Vec<Arg>> {
    let mut c = Cursor::new(buf);
    let v = c.seq()?;
    c.finish()?;
    Ok(v)
}

/// Appends little-endian primitives and protocol records to a byte vector.
pub trait Put {
    /// An i32.
    fn put_i32(&mut self, v: i32);
    /// A u64.
    fn put_u64(&mut self, v: u64);
    /// `u64 len` + bytes.
    fn put_bytes(&mut self, b: &[u8]);
    /// A DLTensor record.
    fn put_tensor(&mut self, t: &WireTensor);
    /// One packed-sequence value.
    fn put_arg(&mut self, a: &Arg);
}

impl Put for Vec<u8> {
    fn put_i32(&mut self, v: i32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_bytes(&mut self, b: &[u8]) {
        self.put_u64(b.len() as u64);
        self.extend_from_slice(b);
    }
    fn put_tensor(&mut self, t: &WireTensor) {
        self.put_u64(t.data);
        self.put_i32(t.device.device_type);
        self.put_i32(t.device.device_id);
        self.put_i32(t.shape.len() as i32);
        self.push(t.dtype.code);
        self.push(t.dtype.bits);
        self.extend_from_slice(&t.dtype.lanes.to_le_bytes());
        for &d in &t.shape {
            self.extend_from_slice(&d.to_le_bytes());
        }
        self.put_u64(t.byte_offset);
    }
    fn put_arg(&mut self, a: &Arg) {
        use type_index as t;
        match a {
            Arg::None => self.put_i32(t::NONE),
            Arg::Int(v) => {
                self.put_i32(t::INT);
                self.extend_from_slice(&v.to_le_bytes());
            }
            Arg::Bool(v) => {
                self.put_i32(t::BOOL);
                self.put_u64(u64::from(*v));
            }
            Arg::Float(v) => {
                self.put_i32(t::FLOAT);
                self.put_u64(v.to_bits());
            }
            Arg::OpaquePtr(v) => {
                self.put_i32(t::OPAQUE_PTR);
                self.put_u64(*v);
            }
            Arg::DataType(d) => {
                self.put_i32(t::DATA_TYPE);
                self.push(d.code);
                self.push(d.bits);
                self.extend_from_slice(&d.lanes.to_le_bytes());
                self.put_i32(0);
            }
            Arg::Device(d) => {
                self.put_i32(t::DEVICE);
                self.put_i32(d.device_type);
                self.put_i32(d.device_id);
            }
            Arg::Tensor(x) => {
                self.put_i32(t::DL_TENSOR_PTR);
                self.put_tensor(x);
            }
            Arg::RawStr(s) => {
                self.put_i32(t::RAW_STR);
                self.put_bytes(s.as_bytes());
            }
            Arg::ByteArray(b) => {
                self.put_i32(t::BYTE_ARRAY_PTR);
                self.put_bytes(b);
            }
            Arg::Function(h) => {
                self.put_i32(t::FUNCTION);
                self.put_u64(*h);
            }
            Arg::Module(h) => {
                self.put_i32(t::MODULE);
                self.put_u64(*h);
            }
            Arg::Str(s) => {
                self.put_i32(t::STR);
                self.put_i32(t::STR);
                self.put_bytes(s.as_bytes());
            }
            Arg::Bytes(b) => {
                self.put_i32(t::BYTES);
                self.put_i32(t::BYTES);
                self.put_bytes(b);
            }
            Arg::ObjectRef { type_index, handle } => {
                self.put_i32(*type_index);
                self.put_i32(t::RPC_OBJECT_REF);
                self.put_u64(*handle);
            }
        }
    }
}

/// Encodes a packed sequence.
pub fn encode_seq(args: &[Arg]) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_i32(args.len() as i32);
    for a in args {
        out.put_arg(a);
    }
    out
}

/// One framed packet: its code (raw, may be outside [`RpcCode`]) and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The raw i32 code.
    pub code: i32,
    /// Everything after the code.
    pub body: Vec<u8>,
}

impl Packet {
    /// The code as an enum, `None` when unknown.
    pub fn rpc_code(&self) -> Option<RpcCode> {
        RpcCode::from_i32(self.code)
    }
}

/// Fills `buf`; `Ok(false)` if the peer closed before the first byte (a clean end).
fn read_exact_or_eof(r: &mut impl Read, buf: &mut [u8]) -> WireResult<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(true)
}

/// Reads one packet: `u64 packet_nbytes`, `i32 code`, body. Empty packets (`packet_nbytes == 0`)
/// are skipped. EOF before a packet starts is [`WireError::Closed`]; a packet longer than `max`
/// bytes is [`WireError::TooLarge`] (and the stream is then out of sync: close it). The body is
/// read incrementally, so a peer announcing a huge packet and sending nothing costs nothing.
pub fn read_packet(r: &mut impl Read, max: u64) -> WireResult<Packet> {
    loop {
        let mut len = [0u8; 8];
        if !read_exact_or_eof(r, &mut len)? {
            return Err(WireError::Closed);
        }
        let len = u64::from_le_bytes(len);
        if len == 0 {
            continue;
        }
        if len > max {
            return Err(WireError::TooLarge {
                what: "packet",
                len,
                max,
            });
        }
        if len < 4 {
            return Err(WireError::Truncated {
                what: "packet code",
                need: 4,
                have: len as usize,
            });
        }
        let mut code = [0u8; 4];
        r.read_exact(&mut code)?;
        let want = len - 4;
        let mut body = Vec::new();
        r.take(want).read_to_end(&mut body)?;
        if (body.len() as u64) < want {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
        return Ok(Packet {
            code: i32::from_le_bytes(code),
            body,
        });
    }
}

/// A whole frame (`u64 len`, `i32 code`, body) ready to write in one call.
pub fn frame(code: RpcCode, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + body.len());
    out.put_u64(4 + body.len() as u64);
    out.put_i32(code as i32);
    out.extend_from_slice(body);
    out
}

/// Writes one packet.
pub fn write_packet(w: &mut impl Write, code: RpcCode, body: &[u8]) -> io::Result<()> {
    w.write_all(&frame(code, body))?;
    w.flush()
}

/// The frame of a `kReturn` carrying `args`.
pub fn return_frame(args: &[Arg]) -> Vec<u8> {
    frame(RpcCode::Return, &encode_seq(args))
}

/// The frame of a `kException` carrying `[RawStr message]`.
pub fn exception_frame(message: &str) -> Vec<u8> {
    frame(
        RpcCode::Exception,
        &encode_seq(&[Arg::RawStr(message.to_owned())]),
    )
}

/// The frame of a `kCopyAck` carrying raw bytes.
pub fn copy_ack_frame(data: &[u8]) -> Vec<u8> {
    frame(RpcCode::CopyAck, data)
}

/// What a function call returns, before encoding (docs/rpc.md "Return values").
#[derive(Debug, Clone, PartialEq)]
pub enum Ret {
    /// `[Int 0, None]`.
    None,
    /// `[Int 1, Int v]`.
    Int(i64),
    /// `[Int 2, Bool v]`.
    Bool(bool),
    /// `[Int 3, Float v]`.
    Float(f64),
    /// `[Int 65, RawStr s]`.
    Str(String),
    /// `[Int 66, ByteArrayPtr b]`.
    Bytes(Vec<u8>),
    /// `[Int 5, DataType d]`.
    DataType(WireDType),
    /// `[Int 68, OpaquePtr h]`.
    Function(u64),
    /// `[Int 73, OpaquePtr h]`.
    Module(u64),
    /// `[Int 70, DLTensor record, OpaquePtr h]`: three values.
    Tensor(WireTensor, u64),
    /// `[Int type_index, OpaquePtr h]` for other objects (Array, Shape...).
    Object(i32, u64),
}

impl Ret {
    /// The packed sequence of a `kReturn` answering `kCallFunc`.
    pub fn to_args(&self) -> Vec<Arg> {
        use type_index as t;
        match self {
            Ret::None => vec![Arg::Int(0), Arg::None],
            Ret::Int(v) => vec![Arg::Int(t::INT.into()), Arg::Int(*v)],
            Ret::Bool(v) => vec![Arg::Int(t::BOOL.into()), Arg::Bool(*v)],
            Ret::Float(v) => vec![Arg::Int(t::FLOAT.into()), Arg::Float(*v)],
            Ret::Str(s) => vec![Arg::Int(t::STR.into()), Arg::RawStr(s.clone())],
            Ret::Bytes(b) => vec![Arg::Int(t::BYTES.into()), Arg::ByteArray(b.clone())],
            Ret::DataType(d) => vec![Arg::Int(t::DATA_TYPE.into()), Arg::DataType(*d)],
            Ret::Function(h) => vec![Arg::Int(t::FUNCTION.into()), Arg::OpaquePtr(*h)],
            Ret::Module(h) => vec![Arg::Int(t::MODULE.into()), Arg::OpaquePtr(*h)],
            Ret::Tensor(x, h) => vec![
                Arg::Int(t::TENSOR.into()),
                Arg::Tensor(x.clone()),
                Arg::OpaquePtr(*h),
            ],
            Ret::Object(ti, h) => vec![Arg::Int((*ti).into()), Arg::OpaquePtr(*h)],
        }
    }

    /// Reads the packed sequence of a `kReturn` answering `kCallFunc`, as a client does: the
    /// inverse of [`Ret::to_args`], also taking the other encodings TVM's servers use for the
    /// same value (a string as `Str`, a bool as `Int`, a handle as a typed handle or an `Int`).
    /// A null object handle reads as [`Ret::None`], as TVM's client reads it. `None` when the
    /// sequence is not a return value.
    pub fn from_args(vals: &[Arg]) -> Option<Ret> {
        use type_index as t;
        let tag = match vals.first() {
            Some(Arg::Int(tag)) => i32::try_from(*tag).ok()?,
            _ => return None,
        };
        Some(match (tag, &vals[1..]) {
            (t::NONE, [Arg::None] | []) => Ret::None,
            (t::INT, [Arg::Int(v)]) => Ret::Int(*v),
            (t::BOOL, [Arg::Bool(v)]) => Ret::Bool(*v),
            (t::BOOL, [Arg::Int(v)]) => Ret::Bool(*v != 0),
            (t::FLOAT, [Arg::Float(v)]) => Ret::Float(*v),
            (t::DATA_TYPE, [Arg::DataType(d)]) => Ret::DataType(*d),
            (t::STR | t::SMALL_STR | t::RAW_STR, [Arg::RawStr(s) | Arg::Str(s)]) => {
                Ret::Str(s.clone())
            }
            (
                t::BYTES | t::SMALL_BYTES | t::BYTE_ARRAY_PTR,
                [Arg::ByteArray(b) | Arg::Bytes(b)],
            ) => Ret::Bytes(b.clone()),
            (t::TENSOR, [Arg::Tensor(x), h]) => Ret::Tensor(x.clone(), handle_of(h)?),
            // A tensor always comes with its record.
            (tag, [h]) if tag >= t::STATIC_OBJECT_BEGIN && tag != t::TENSOR => {
                match handle_of(h)? {
                    0 => Ret::None,
                    h if tag == t::FUNCTION => Ret::Function(h),
                    h if tag == t::MODULE => Ret::Module(h),
                    h => Ret::Object(tag, h),
                }
            }
            _ => return None,
        })
    }
}

/// The remote handle a value carries, in any of the encodings a handle travels in; `None` (the
/// value) is the null handle 0.
pub fn handle_of(a: &Arg) -> Option<u64> {
    match a {
        Arg::OpaquePtr(h) | Arg::Function(h) | Arg::Module(h) => Some(*h),
        Arg::ObjectRef { handle, .. } => Some(*handle),
        Arg::Int(h) => u64::try_from(*h).ok(),
        Arg::None => Some(0),
        _ => None,
    }
}

/// The client's handshake, split: the first whitespace token is the key (`client:<matchkey>`),
/// the rest are options such as `-timeout=60`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHello {
    /// The full key string as sent.
    pub raw: String,
}

impl ClientHello {
    /// The first whitespace-separated token (`client:<matchkey>`).
    pub fn key(&self) -> &str {
        self.raw.split_whitespace().next().unwrap_or("")
    }
    /// Everything after the key token, trimmed.
    pub fn options(&self) -> &str {
        let k = self.key();
        match self.raw.find(k) {
            Some(p) if !k.is_empty() => self.raw[p + k.len()..].trim(),
            _ => self.raw.trim(),
        }
    }
    /// The value of `-timeout=<seconds>` among the options, if present and valid.
    pub fn timeout_secs(&self) -> Option<f64> {
        parse_timeout(self.options())
    }
}

/// `-timeout=<seconds>` in an option string; non-positive or unparsable values are ignored.
pub fn parse_timeout(options: &str) -> Option<f64> {
    options
        .split_whitespace()
        .filter_map(|o| o.strip_prefix("-timeout="))
        .filter_map(|v| v.parse::<f64>().ok())
        .rfind(|v| v.is_finite() && *v > 0.0)
}

/// Reads `i32 magic, i32 keylen, key`. A wrong magic is [`WireError::BadMagic`] (close without
/// answering); keys longer than [`MAX_KEY_LEN`] are refused.
pub fn read_client_handshake(r: &mut impl Read) -> WireResult<ClientHello> {
    let mut b = [0u8; 4];
    if !read_exact_or_eof(r, &mut b)? {
        return Err(WireError::Closed);
    }
    let magic = i32::from_le_bytes(b);
    if magic != RPC_MAGIC {
        return Err(WireError::BadMagic(magic));
    }
    r.read_exact(&mut b)?;
    let len = i32::from_le_bytes(b);
    if len < 0 {
        return Err(WireError::Negative {
            what: "key length",
            value: len.into(),
        });
    }
    if len as usize > MAX_KEY_LEN {
        return Err(WireError::TooLarge {
            what: "handshake key",
            len: len as u64,
            max: MAX_KEY_LEN as u64,
        });
    }
    let mut key = vec![0u8; len as usize];
    r.read_exact(&mut key)?;
    let raw = String::from_utf8(key).map_err(|_| WireError::Utf8 {
        what: "handshake key",
    })?;
    Ok(ClientHello { raw })
}

/// Writes `i32 magic, i32 keylen, key` (what a client, or a server registering with a proxy,
/// sends).
pub fn write_handshake(w: &mut impl Write, key: &str) -> io::Result<()> {
    let mut out = Vec::new();
    out.put_i32(RPC_MAGIC);
    out.put_i32(key.len() as i32);
    out.extend_from_slice(key.as_bytes());
    w.write_all(&out)?;
    w.flush()
}

/// The server's answer: `CODE_SUCCESS` + `"server:<key>"`, or a bare failure code.
pub fn write_server_reply(w: &mut impl Write, code: i32, server_key: &str) -> io::Result<()> {
    let mut out = Vec::new();
    out.put_i32(code);
    if code == CODE_SUCCESS {
        out.put_i32(server_key.len() as i32);
        out.extend_from_slice(server_key.as_bytes());
    }
    w.write_all(&out)?;
    w.flush()
}

/// The body of `kInitServer`: the protocol version and the session-constructor arguments.
pub fn decode_init_server(body: &[u8]) -> WireResult<(String, Vec<Arg>)> {
    let mut c = Cursor::new(body);
    let ver = c.string("protocol version")?;
    let args = c.seq()?;
    c.finish()?;
    Ok((ver, args))
}

/// The body of `kCallFunc`: the function handle and the arguments.
pub fn decode_call_func(body: &[u8]) -> WireResult<(u64, Vec<Arg>)> {
    let mut c = Cursor::new(body);
    let h = c.u64("function handle")?;
    let args = c.seq()?;
    c.finish()?;
    Ok((h, args))
}

/// The body of `kCopyToRemote`: the target record (`byte_offset` = where to write), and the
/// bytes.
pub fn decode_copy_to_remote(body: &[u8]) -> WireResult<(WireTensor, &[u8])> {
    let mut c = Cursor::new(body);
    let t = c.tensor()?;
    let n = c.u64("copy length")?;
    let data = c.take(n, "copy data")?;
    c.finish()?;
    Ok((t, data))
}

/// The body of `kCopyFromRemote`: the source record (`byte_offset` = where to read) and the
/// number of bytes wanted.
pub fn decode_copy_from_remote(body: &[u8]) -> WireResult<(WireTensor, u64)> {
    let mut c = Cursor::new(body);
    let t = c.tensor()?;
    let n = c.u64("copy length")?;
    c.finish()?;
    Ok((t, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_values_read_back_as_written() {
        let f32 = WireDType {
            code: 2,
            bits: 32,
            lanes: 1,
        };
        let x = WireTensor {
            data: 0x1000,
            device: Device {
                device_type: 1,
                device_id: 0,
            },
            dtype: f32,
            shape: vec![2, 3],
            byte_offset: 8,
        };
        for r in [
            Ret::None,
            Ret::Int(-7),
            Ret::Bool(true),
            Ret::Float(0.5),
            Ret::Str("s".into()),
            Ret::Bytes(vec![1, 2]),
            Ret::DataType(f32),
            Ret::Function(5),
            Ret::Module(6),
            Ret::Tensor(x, 7),
            Ret::Object(type_index::ARRAY, 8),
        ] {
            assert_eq!(Ret::from_args(&r.to_args()), Some(r));
        }
        // Other encodings of the same values, and a null object.
        let t = |i: i32| Arg::Int(i.into());
        assert_eq!(
            Ret::from_args(&[t(type_index::BOOL), Arg::Int(0)]),
            Some(Ret::Bool(false))
        );
        assert_eq!(
            Ret::from_args(&[t(type_index::SMALL_STR), Arg::Str("a".into())]),
            Some(Ret::Str("a".into()))
        );
        assert_eq!(
            Ret::from_args(&[t(type_index::FUNCTION), Arg::None]),
            Some(Ret::None)
        );
        // Not return values.
        assert_eq!(Ret::from_args(&[]), None);
        assert_eq!(Ret::from_args(&[Arg::None]), None);
        assert_eq!(Ret::from_args(&[t(type_index::INT), Arg::Float(1.0)]), None);
        assert_eq!(Ret::from_args(&[t(type_index::TENSOR), Arg::Int(1)]), None);
        assert_eq!(Ret::from_args(&[Arg::Int(1 << 40), Arg::Int(1)]), None);
    }

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    #[test]
    fn handshake_bytes_of_the_trace() {
        let client = hex("71 f2 0f 00 07 00 00 00 63 6c 69 65 6e 74 3a");
        let hello = read_client_handshake(&mut &client[..]).unwrap();
        assert_eq!(hello.key(), "client:");
        assert_eq!(hello.options(), "");
        let mut out = Vec::new();
        write_server_reply(&mut out, CODE_SUCCESS, "server:").unwrap();
        assert_eq!(out, hex("71 f2 0f 00 07 00 00 00 73 65 72 76 65 72 3a"));
        let mut out = Vec::new();
        write_server_reply(&mut out, CODE_MISMATCH, "").unwrap();
        assert_eq!(out, hex("73 f2 0f 00"));
    }

    #[test]
    fn handshake_options_and_bad_magic() {
        let mut b = Vec::new();
        write_handshake(&mut b, "client:abc -timeout=60").unwrap();
        let h = read_client_handshake(&mut &b[..]).unwrap();
        assert_eq!(h.key(), "client:abc");
        assert_eq!(h.timeout_secs(), Some(60.0));
        let bad = hex("72 f2 0f 00 00 00 00 00");
        assert!(matches!(
            read_client_handshake(&mut &bad[..]),
            Err(WireError::BadMagic(_))
        ));
        let huge = hex("71 f2 0f 00 ff ff ff 7f");
        assert!(matches!(
            read_client_handshake(&mut &huge[..]),
            Err(WireError::TooLarge { .. })
        ));
    }

    #[test]
    fn init_server_packet_of_the_trace() {
        // #002 C>S 29 bytes: kInitServer "0.8.0" args=[]
        let b = hex(
            "15 00 00 00 00 00 00 00 02 00 00 00 05 00 00 00 00 00 00 00 30 2e 38 2e 30 00 00 00 00",
        );
        let p = read_packet(&mut &b[..], 1 << 20).unwrap();
        assert_eq!(p.rpc_code(), Some(RpcCode::InitServer));
        let (ver, args) = decode_init_server(&p.body).unwrap();
        assert_eq!(ver, PROTOCOL_VERSION);
        assert!(args.is_empty());
    }

    #[test]
    fn return_none_bytes_of_the_trace() {
        // #003: kReturn [None] = 0c 00.. | 04 00 00 00 | 01 00 00 00 | 00 00 00 00
        let f = return_frame(&[Arg::None]);
        assert_eq!(
            f,
            hex("0c 00 00 00 00 00 00 00 04 00 00 00 01 00 00 00 00 00 00 00")
        );
        // #005: kReturn [OpaquePtr 0x564b76ee9220]
        let f = return_frame(&[Arg::OpaquePtr(0x564b76ee9220)]);
        assert_eq!(
            f,
            hex("14 00 00 00 00 00 00 00 04 00 00 00 01 00 00 00 04 00 00 00 20 92 ee 76 4b 56 00 00")
        );
    }

    fn x_record() -> WireTensor {
        WireTensor {
            data: 0x7f8f7400fd40,
            device: Device::CPU,
            dtype: WireDType {
                code: 2,
                bits: 32,
                lanes: 1,
            },
            shape: vec![1, 16],
            byte_offset: 0,
        }
    }

    #[test]
    fn tensor_record_of_the_trace() {
        let b = hex(
            "07 00 00 00 40 fd 00 74 8f 7f 00 00 01 00 00 00 00 00 00 00 02 00 00 00 02 20 01 00 \
             01 00 00 00 00 00 00 00 10 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
        );
        let mut c = Cursor::new(&b);
        assert_eq!(c.arg().unwrap(), Arg::Tensor(x_record()));
        c.finish().unwrap();
        let mut back = Vec::new();
        back.put_arg(&Arg::Tensor(x_record()));
        assert_eq!(back, b);
        assert_eq!(x_record().nbytes(), Some(64));
    }

    #[test]
    fn copy_to_remote_of_the_trace() {
        // #050: 7c 00.. | 07 | record | nbytes 64 | 64 bytes
        let mut b = hex("7c 00 00 00 00 00 00 00 07 00 00 00");
        b.put_tensor(&x_record());
        b.put_u64(64);
        b.extend((0..64).map(|i| i as u8));
        assert_eq!(b.len(), 8 + 0x7c);
        let p = read_packet(&mut &b[..], 1 << 20).unwrap();
        assert_eq!(p.rpc_code(), Some(RpcCode::CopyToRemote));
        let (t, data) = decode_copy_to_remote(&p.body).unwrap();
        assert_eq!(t, x_record());
        assert_eq!(data.len(), 64);
        assert_eq!(data[63], 63);
    }

    #[test]
    fn tensor_return_of_the_trace() {
        // #073 S>C 92: [Int 70, DLTensor{0x7f8f74011b40, [1,8]}, OpaquePtr 0x7f8f74012b70]
        let expect = hex(
            "54 00 00 00 00 00 00 00 04 00 00 00 03 00 00 00 01 00 00 00 46 00 00 00 00 00 00 00 \
             07 00 00 00 40 1b 01 74 8f 7f 00 00 01 00 00 00 00 00 00 00 02 00 00 00 02 20 01 00 \
             01 00 00 00 00 00 00 00 08 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             04 00 00 00 70 2b 01 74 8f 7f 00 00",
        );
        let rec = WireTensor {
            data: 0x7f8f74011b40,
            shape: vec![1, 8],
            ..x_record()
        };
        let f = return_frame(&Ret::Tensor(rec, 0x7f8f74012b70).to_args());
        assert_eq!(f, expect);
        assert_eq!(f.len(), 92);
    }

    #[test]
    fn copy_ack_and_shutdown_of_the_trace() {
        let f = copy_ack_frame(&[0u8; 32]);
        assert_eq!(&f[..12], &hex("24 00 00 00 00 00 00 00 08 00 00 00")[..]);
        let b = hex("04 00 00 00 00 00 00 00 01 00 00 00");
        let p = read_packet(&mut &b[..], 64).unwrap();
        assert_eq!(p.rpc_code(), Some(RpcCode::Shutdown));
        assert!(p.body.is_empty());
    }

    #[test]
    fn bytes_object_outer_and_inner_index() {
        // upload blob: 42 00 00 00 | 42 00 00 00 | len | bytes
        let mut b = hex("02 00 00 00 08 00 00 00 04 00 00 00 00 00 00 00 6d 2e 73 6f");
        b.extend(hex(
            "42 00 00 00 42 00 00 00 04 00 00 00 00 00 00 00 7f 45 4c 46",
        ));
        let args = decode_seq(&b).unwrap();
        assert_eq!(
            args,
            vec![Arg::RawStr("m.so".into()), Arg::Bytes(b"\x7fELF".to_vec())]
        );
        assert_eq!(encode_seq(&args), b);
        // The small forms (outer 11 / 12) decode to the same values.
        let small = hex("01 00 00 00 0c 00 00 00 42 00 00 00 01 00 00 00 00 00 00 00 61");
        assert_eq!(decode_seq(&small).unwrap(), vec![Arg::Bytes(b"a".to_vec())]);
        let small = hex("01 00 00 00 0b 00 00 00 41 00 00 00 01 00 00 00 00 00 00 00 61");
        assert_eq!(decode_seq(&small).unwrap(), vec![Arg::Str("a".into())]);
        let objref = hex("01 00 00 00 45 00 00 00 73 00 00 00 05 00 00 00 00 00 00 00");
        assert_eq!(
            decode_seq(&objref).unwrap(),
            vec![Arg::ObjectRef {
                type_index: 69,
                handle: 5
            }]
        );
    }

    #[test]
    fn every_simple_type_round_trips() {
        let args = vec![
            Arg::None,
            Arg::Int(-5),
            Arg::Bool(true),
            Arg::Float(1.5),
            Arg::OpaquePtr(7),
            Arg::DataType(WireDType {
                code: 2,
                bits: 16,
                lanes: 1,
            }),
            Arg::Device(Device::CPU),
            Arg::RawStr("x".into()),
            Arg::ByteArray(vec![1, 2]),
            Arg::Function(3),
            Arg::Module(4),
            Arg::Str("s".into()),
        ];
        let enc = encode_seq(&args);
        assert_eq!(decode_seq(&enc).unwrap(), args);
        // DataType carries 4 zero bytes of padding: i32 count + i32 index + 4 + 4.
        assert_eq!(encode_seq(&args[5..6]).len(), 16);
    }

    #[test]
    fn hostile_lengths_fail_without_allocating() {
        // A string claiming 2^60 bytes.
        let mut b = hex("01 00 00 00 08 00 00 00");
        b.put_u64(1 << 60);
        assert!(matches!(decode_seq(&b), Err(WireError::Truncated { .. })));
        // i32::MAX arguments with nothing behind.
        let b = hex("ff ff ff 7f");
        assert!(matches!(decode_seq(&b), Err(WireError::Truncated { .. })));
        // Negative count, negative ndim, huge ndim.
        assert!(matches!(
            decode_seq(&hex("ff ff ff ff")),
            Err(WireError::Negative { .. })
        ));
        let mut b = hex("01 00 00 00 07 00 00 00");
        b.put_u64(0);
        b.put_i32(1);
        b.put_i32(0);
        b.put_i32(i32::MAX);
        b.extend([2, 32, 1, 0]);
        assert!(matches!(decode_seq(&b), Err(WireError::Truncated { .. })));
        // Tensor objects (70) are refused; unknown inner index too.
        assert!(matches!(
            decode_seq(&hex("01 00 00 00 46 00 00 00")),
            Err(WireError::BadTypeIndex(70))
        ));
        assert!(matches!(
            decode_seq(&hex("01 00 00 00 41 00 00 00 09 00 00 00")),
            Err(WireError::BadInnerTypeIndex { .. })
        ));
        // A packet announcing 2^60 bytes is refused before reading it.
        let mut b = Vec::new();
        b.put_u64(1 << 60);
        assert!(matches!(
            read_packet(&mut &b[..], 1 << 20),
            Err(WireError::TooLarge { .. })
        ));
        // A packet cut short is an I/O error, EOF at a boundary is Closed.
        let mut b = Vec::new();
        b.put_u64(100);
        b.put_i32(3);
        assert!(matches!(
            read_packet(&mut &b[..], 1 << 20),
            Err(WireError::Io(_))
        ));
        assert!(matches!(
            read_packet(&mut &[][..], 1 << 20),
            Err(WireError::Closed)
        ));
        // Trailing bytes.
        assert!(matches!(
            decode_seq(&hex("00 00 00 00 00")),
            Err(WireError::Trailing(1))
        ));
    }

    #[test]
    fn empty_packets_are_skipped() {
        let mut b = Vec::new();
        b.put_u64(0);
        b.extend(frame(RpcCode::Shutdown, &[]));
        assert_eq!(
            read_packet(&mut &b[..], 64).unwrap().rpc_code(),
            Some(RpcCode::Shutdown)
        );
    }
}
