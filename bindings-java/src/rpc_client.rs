//! The RPC client behind `org.mote.rpc.RemoteSession`, `RemoteFunction` and `RemoteModule`:
//! the native objects, the translation of arguments and results, and the Java exceptions of
//! client errors. The JNI entries themselves are in `rpc.rs` (whose `/// java:` lines generate
//! `RpcBridge`); compiled only with the `rpc` feature, like them.
//!
//! Three kinds of native objects, each behind a Java `long` handle that one Java object owns:
//! a session ([`ClientH`]), a function or module living on the server ([`RefH`]) and a tensor
//! living on the server ([`TensorH`]). A [`RefH`] or [`TensorH`] holds a clone of its
//! session's [`Client`], so no handle depends on another being alive: Java may free them in any order, and a function outlives the session object it came
//! from (the connection stays open until `close()` or until every object of it is gone).
//! Java frees a handle only after every call using it returned (`org.mote.rpc.NativeHandle`),
//! and keeps the handles of reference arguments acquired during a call.
//!
//! Errors: [`ClientError::Remote`] is thrown as `org.mote.rpc.RpcRemoteException` (the
//! server's message as is), a connection that cannot be opened or that broke
//! ([`ClientError::Connect`], [`ClientError::Io`], [`ClientError::Protocol`]) as
//! `org.mote.rpc.RpcConnectionException`, a closed session as `IllegalStateException`, a
//! refused argument as `IllegalArgumentException`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jni::objects::{JByteArray, JDoubleArray, JLongArray, JObject, JObjectArray};
use jni::objects::{JString, JValue};
use jni::strings::JNIString;
use jni::{jni_sig, jni_str, Env};
use mote_rpc::client::{Client, ClientError, ClientOptions, RemoteRef, RemoteTensor, Value};
use mote_rpc::wire::{Arg, Device, WireDType, WireTensor};

use crate::{free_handle, handle_ref, into_handle, JErr};

/// The class thrown when the server answered a request with an error.
pub(crate) const REMOTE_EXCEPTION: &str = "org/mote/rpc/RpcRemoteException";
/// The class thrown when no session could be opened, or the connection broke.
pub(crate) const CONNECTION_EXCEPTION: &str = "org/mote/rpc/RpcConnectionException";

/// The kinds of call arguments, one character each in the `kinds` string Java passes
/// (`RemoteFunction.call`): the payload of argument `i` is in `longs[i]`, `doubles[i]` or
/// `objects[i]`.
pub(crate) mod kind {
    /// None (no payload).
    pub const NONE: char = 'n';
    /// An integer: `longs[i]`.
    pub const INT: char = 'i';
    /// A float: `doubles[i]`.
    pub const FLOAT: char = 'f';
    /// A boolean: `longs[i]` (0 or 1).
    pub const BOOL: char = 'b';
    /// A string: `objects[i]` (a `String`).
    pub const STR: char = 's';
    /// A byte string: `objects[i]` (a `byte[]`).
    pub const BYTES: char = 'y';
    /// A remote function or module of the same session: `longs[i]` (its handle, which Java
    /// keeps acquired during the call).
    pub const REF: char = 'r';
    /// A device: `longs[i]` holds the DLPack type in its high 32 bits, the index in its low 32.
    pub const DEVICE: char = 'd';
    /// A remote tensor of the same session: `longs[i]` (its handle, which Java keeps acquired
    /// during the call).
    pub const TENSOR: char = 't';
}

/// Session ids, so that a reference of one session is never sent to another's server (its
/// handle would name nothing there, or something else).
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// A session owned by one `org.mote.rpc.RemoteSession`.
pub struct ClientH {
    session: u64,
    client: Client,
}

/// A function or module on the server, owned by one `RemoteFunction` or `RemoteModule`.
/// Dropping it frees it on the server (best effort: nothing is sent once the session closed).
pub struct RefH {
    session: u64,
    client: Client,
    remote: RemoteRef,
    module: bool,
}

/// A tensor on the server, owned by one `org.mote.rpc.RemoteTensor`: memory the client
/// allocated there ([`Client::empty`]) or a tensor a call returned. Dropping it frees it on the
/// server (best effort, as [`RefH`]).
pub struct TensorH {
    session: u64,
    client: Client,
    mem: TensorMem,
}

enum TensorMem {
    /// From `RemoteSession.empty`: freed with `kDevFreeData`.
    Allocated(RemoteTensor),
    /// Returned by a call: its record, and the object that keeps its memory alive there
    /// (held only to be dropped with it).
    Returned(WireTensor, #[allow(dead_code)] RemoteRef),
}

impl TensorH {
    /// Where it lives, its type and shape.
    pub(crate) fn record(&self) -> &WireTensor {
        match &self.mem {
            TensorMem::Allocated(t) => t.record(),
            TensorMem::Returned(x, _) => x,
        }
    }

    /// Its size in bytes, if a Java `byte[]` can hold it.
    fn java_size(&self) -> Result<usize, ClientError> {
        let r = self.record();
        r.nbytes()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= i32::MAX as usize)
            .ok_or_else(|| {
                ClientError::Argument(format!(
                    "a tensor of shape {:?} does not fit a Java byte[]",
                    r.shape
                ))
            })
    }

    /// Overwrites it with `data` (its whole size; the server may refuse, as Mote's does for a
    /// tensor a call returned).
    pub(crate) fn write(&self, data: &[u8]) -> Result<(), ClientError> {
        self.client.copy_to(self.record(), data)
    }

    /// Reads the whole of it.
    pub(crate) fn read(&self) -> Result<Vec<u8>, ClientError> {
        self.java_size()?;
        self.client.copy_from(self.record())
    }
}

impl ClientH {
    /// Connects (see [`Client::connect`]); `connect_timeout` `None`: the client's default.
    pub(crate) fn connect(
        host: &str,
        port: u16,
        key: &str,
        connect_timeout: Option<Duration>,
    ) -> Result<ClientH, ClientError> {
        let mut opts = ClientOptions::default();
        if let Some(t) = connect_timeout {
            opts.connect_timeout = t;
        }
        let client = Client::connect(host, port, key, &opts)?;
        Ok(ClientH {
            session: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            client,
        })
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Allocates a tensor on the server (see [`Client::empty`]); `dtype` by TVM's name.
    pub(crate) fn empty(
        &self,
        shape: &[i64],
        dtype: &str,
        device: Device,
    ) -> Result<TensorH, ClientError> {
        let d: mote::DType = dtype
            .parse()
            .map_err(|e: mote::Error| ClientError::Argument(e.to_string()))?;
        let wire = WireDType {
            code: d.code,
            bits: d.bits,
            lanes: d.lanes,
        };
        if let Some(&e) = shape.iter().find(|&&e| e < 0) {
            return Err(ClientError::Argument(format!(
                "shape {shape:?} has a negative extent {e}"
            )));
        }
        let t = self.client.empty(shape, wire, device)?;
        Ok(TensorH {
            session: self.session,
            client: self.client.clone(),
            mem: TensorMem::Allocated(t),
        })
    }

    /// A reference of this session.
    pub(crate) fn adopt(&self, remote: RemoteRef, module: bool) -> RefH {
        RefH {
            session: self.session,
            client: self.client.clone(),
            remote,
            module,
        }
    }
}

impl RefH {
    /// A reference of the same session.
    fn sibling(&self, remote: RemoteRef, module: bool) -> RefH {
        RefH {
            session: self.session,
            client: self.client.clone(),
            remote,
            module,
        }
    }

    /// The function `name` of this module.
    pub(crate) fn module_function(
        &self,
        name: &str,
        query_imports: bool,
    ) -> Result<Option<RefH>, ClientError> {
        if !self.module {
            return Err(ClientError::Argument(
                "a remote function has no functions (only a module has)".into(),
            ));
        }
        let f = self
            .client
            .module_function(&self.remote, name, query_imports)?;
        Ok(f.map(|f| self.sibling(f, false)))
    }

    /// Calls this function.
    pub(crate) fn call(&self, args: &[Arg]) -> Result<Value, ClientError> {
        if self.module {
            return Err(ClientError::Argument(
                "a remote module cannot be called (get one of its functions)".into(),
            ));
        }
        self.client.call(&self.remote, args)
    }
}

/// The Java exception of a client error (see the module docs): thrown here for the
/// exception classes of `org.mote.rpc`, which [`JErr`] has no variant for, so that the entry's
/// error policy finds it pending and lets it propagate.
pub(crate) fn client_err(env: &mut Env<'_>, e: ClientError) -> JErr {
    match e {
        ClientError::Closed => JErr::State("the RPC session is closed".into()),
        ClientError::Argument(m) => JErr::Arg(m),
        ClientError::Remote(m) => throw_as(env, REMOTE_EXCEPTION, &m),
        e @ (ClientError::Connect { .. } | ClientError::Io(_) | ClientError::Protocol(_)) => {
            throw_as(env, CONNECTION_EXCEPTION, &e.to_string())
        }
        e => JErr::State(e.to_string()),
    }
}

/// Throws `class(msg)` now and returns the error that lets it propagate.
fn throw_as(env: &mut Env<'_>, class: &str, msg: &str) -> JErr {
    match env.throw_new(JNIString::from(class), JNIString::from(msg)) {
        Ok(()) => JErr::Jni(jni::errors::Error::JavaException),
        Err(e) => JErr::Jni(e),
    }
}

/// The DLPack device packed into one `long` by `RemoteFunction` (see [`kind::DEVICE`]).
pub(crate) fn unpack_device(l: i64) -> Device {
    Device {
        device_type: (l >> 32) as i32,
        device_id: l as i32,
    }
}

/// A call's arguments from Java's `kinds`, `longs`, `doubles`, `objects` (see [`kind`]).
/// A reference argument must belong to `f`'s session.
pub(crate) fn read_args(
    env: &mut Env<'_>,
    f: &RefH,
    kinds: &JString<'_>,
    longs: &JLongArray<'_>,
    doubles: &JDoubleArray<'_>,
    objects: &JObjectArray<'_>,
) -> Result<Vec<Arg>, JErr> {
    if kinds.is_null() || longs.is_null() || doubles.is_null() || objects.is_null() {
        return Err(JErr::Arg("the argument arrays are null".into()));
    }
    let kinds: Vec<char> = kinds.try_to_string(env)?.chars().collect();
    let n = kinds.len();
    if longs.len(env)? != n || doubles.len(env)? != n || objects.len(env)? != n {
        return Err(JErr::Arg(format!(
            "the argument arrays do not all have {n} elements"
        )));
    }
    let mut ls = vec![0i64; n];
    longs.get_region(env, 0, &mut ls)?;
    let mut ds = vec![0f64; n];
    doubles.get_region(env, 0, &mut ds)?;
    let mut out = Vec::with_capacity(n);
    for (i, k) in kinds.into_iter().enumerate() {
        let a = match k {
            kind::NONE => Arg::None,
            kind::INT => Arg::Int(ls[i]),
            kind::FLOAT => Arg::Float(ds[i]),
            kind::BOOL => Arg::Bool(ls[i] != 0),
            kind::STR => {
                let o = objects.get_element(env, i)?;
                let s = env.cast_local::<JString>(o)?;
                if s.is_null() {
                    return Err(JErr::Arg(format!("argument {i}: the string is null")));
                }
                Arg::RawStr(s.try_to_string(env)?)
            }
            kind::BYTES => {
                let o = objects.get_element(env, i)?;
                let b = env.cast_local::<JByteArray>(o)?;
                if b.is_null() {
                    return Err(JErr::Arg(format!("argument {i}: the byte[] is null")));
                }
                Arg::Bytes(env.convert_byte_array(&b)?)
            }
            kind::REF => {
                // SAFETY: Java passes the handle of a RemoteFunction or RemoteModule it keeps
                // acquired (not freed) until this call returned.
                let r = unsafe { handle_ref::<RefH>(ls[i], "the remote argument")? };
                if r.session != f.session {
                    return Err(JErr::Arg(format!(
                        "argument {i}: a remote {} of another RPC session",
                        if r.module { "module" } else { "function" }
                    )));
                }
                if r.module {
                    r.remote.as_module_arg()
                } else {
                    r.remote.as_function_arg()
                }
            }
            kind::DEVICE => Arg::Device(unpack_device(ls[i])),
            kind::TENSOR => {
                // SAFETY: Java passes the handle of a RemoteTensor it keeps acquired until this
                // call returned.
                let t = unsafe { handle_ref::<TensorH>(ls[i], "the remote tensor")? };
                if t.session != f.session {
                    return Err(JErr::Arg(format!(
                        "argument {i}: a remote tensor of another RPC session"
                    )));
                }
                Arg::Tensor(t.record().clone())
            }
            other => return Err(JErr::Arg(format!("argument {i}: unknown kind {other:?}"))),
        };
        out.push(a);
    }
    Ok(out)
}

/// TVM's name of a data type (`float32`, `int8x4`, `bool`...).
pub(crate) fn dtype_name(d: WireDType) -> String {
    mote::DType {
        code: d.code,
        bits: d.bits,
        lanes: d.lanes,
    }
    .to_string()
}

/// Boxes `v` with `valueOf` of `class` (`sig` its signature).
fn boxed<'l>(
    env: &mut Env<'l>,
    class: &jni::strings::JNIStr,
    sig: jni::signature::MethodSignature<'_, '_>,
    v: JValue<'_>,
) -> Result<JObject<'l>, JErr> {
    Ok(env
        .call_static_method(class, jni_str!("valueOf"), sig, &[v])?
        .l()?)
}

/// A new reference as Java receives it: `long[] {handle, 0}` for a function, `{handle, 1}` for
/// a module (`RemoteFunction.wrap`). The handle is freed again if the array cannot be made.
fn ref_array<'l>(env: &mut Env<'l>, r: RefH) -> Result<JObject<'l>, JErr> {
    let module = i64::from(r.module);
    let h = into_handle(r);
    let made = env
        .new_long_array(2)
        .and_then(|a| a.set_region(env, 0, &[h, module]).map(|()| a));
    match made {
        Ok(a) => Ok(a.into()),
        Err(e) => {
            // SAFETY: `h` was made above and Java never saw it.
            unsafe { free_handle::<RefH>(h) };
            Err(e.into())
        }
    }
}

/// A new tensor as Java receives it (`RemoteFunction.wrap`): `long[] {handle, 2, device type,
/// device index, dims...}`. The handle is freed again if the array cannot be made.
pub(crate) fn tensor_array<'l>(env: &mut Env<'l>, t: TensorH) -> Result<JObject<'l>, JErr> {
    let r = t.record();
    let mut desc = vec![
        0,
        2,
        i64::from(r.device.device_type),
        i64::from(r.device.device_id),
    ];
    desc.extend_from_slice(&r.shape);
    let h = into_handle(t);
    desc[0] = h;
    let made = env
        .new_long_array(desc.len())
        .and_then(|a| a.set_region(env, 0, &desc).map(|()| a));
    match made {
        Ok(a) => Ok(a.into()),
        Err(e) => {
            // SAFETY: `h` was made above and Java never saw it.
            unsafe { free_handle::<TensorH>(h) };
            Err(e.into())
        }
    }
}

/// A call's result as a Java object: null, `Long`, `Boolean`, `Double`, `String` (a string or
/// a data type's name), `byte[]`, a new reference ([`ref_array`]) or a new tensor
/// ([`tensor_array`]). Other objects are refused (and freed on the server).
pub(crate) fn result<'l>(env: &mut Env<'l>, f: &RefH, v: Value) -> Result<JObject<'l>, JErr> {
    match v {
        Value::None => Ok(JObject::null()),
        Value::Int(i) => boxed(
            env,
            jni_str!("java/lang/Long"),
            jni_sig!("(J)Ljava/lang/Long;"),
            JValue::Long(i),
        ),
        Value::Bool(b) => boxed(
            env,
            jni_str!("java/lang/Boolean"),
            jni_sig!("(Z)Ljava/lang/Boolean;"),
            JValue::Bool(b),
        ),
        Value::Float(d) => boxed(
            env,
            jni_str!("java/lang/Double"),
            jni_sig!("(D)Ljava/lang/Double;"),
            JValue::Double(d),
        ),
        Value::Str(s) => Ok(JString::from_str(env, &s)?.into()),
        Value::DataType(d) => Ok(JString::from_str(env, dtype_name(d))?.into()),
        Value::Bytes(b) => Ok(env.byte_array_from_slice(&b)?.into()),
        Value::Function(r) => ref_array(env, f.sibling(r, false)),
        Value::Module(r) => ref_array(env, f.sibling(r, true)),
        Value::Tensor(x, r) => tensor_array(
            env,
            TensorH {
                session: f.session,
                client: f.client.clone(),
                mem: TensorMem::Returned(x, r),
            },
        ),
        Value::Object(type_index, r) => {
            drop(r);
            Err(JErr::Mote(mote::Error::Unsupported(format!(
                "the remote function returned an object of type index {type_index} (a tuple, \
                 a shape...), which the Java client cannot receive"
            ))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_types_have_tvms_names() {
        let d = |code, bits, lanes| WireDType { code, bits, lanes };
        assert_eq!(dtype_name(d(2, 32, 1)), "float32");
        assert_eq!(dtype_name(d(0, 8, 4)), "int8x4");
        assert_eq!(dtype_name(d(1, 8, 1)), "uint8");
        assert_eq!(dtype_name(d(1, 1, 1)), "bool");
        assert_eq!(dtype_name(d(4, 16, 1)), "bfloat16");
    }

    #[test]
    fn devices_unpack_from_one_long() {
        let packed = (129i64 << 32) | 3;
        assert_eq!(
            unpack_device(packed),
            Device {
                device_type: 129,
                device_id: 3
            }
        );
        let neg = (4i64 << 32) | i64::from(-1i32 as u32);
        assert_eq!(unpack_device(neg).device_id, -1);
    }
}
