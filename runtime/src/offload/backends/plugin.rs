//! Backend plug-ins: shared libraries implementing the C ABI of `runtime/include/mote_backend.h`
//! (documented in `docs/backend-plugin-abi.md`).
//!
//! A plug-in is loaded with `libloading`, its ABI version checked before anything else is
//! called, and every failure (unloadable file, missing symbol, wrong version, a graph the
//! library refuses) becomes a typed error or a logged fallback, never a crash.

use std::ffi::{c_char, c_void, CStr, CString};
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::offload::format::{Activation, Graph, Layout, Op, Role, TensorDesc, MAX_RANK};
use crate::offload::{segment_io, Backend, Buffers, Constants, Prepared};

/// The plug-in ABI version this runtime speaks (`MOTE_BACKEND_ABI_VERSION`).
pub const ABI_VERSION: u32 = 1;

const OK: i32 = 0;
const UNSUPPORTED: i32 = 1;

const KIND_INPUT: i32 = 1;
const KIND_OUTPUT: i32 = 2;
const KIND_CONSTANT: i32 = 3;
const KIND_INTERMEDIATE: i32 = 4;

/// Mirror of `mote_bk_tensor_desc`.
#[repr(C)]
struct TensorDescC {
    struct_size: u32,
    kind: i32,
    dtype: i32,
    ndim: i32,
    dims: [i64; MAX_RANK],
    quant_axis: i32,
    num_scales: u32,
    scales: *const f32,
    zero_points: *const i32,
    data: *const c_void,
    data_bytes: u64,
}

/// Mirror of `mote_bk_node_attrs`.
#[repr(C)]
#[derive(Default)]
struct NodeAttrsC {
    struct_size: u32,
    op: i32,
    layout: i32,
    strides: [i32; 2],
    padding: [i32; 4],
    dilation: [i32; 2],
    groups: i32,
    pool_size: [i32; 2],
    ceil_mode: i32,
    count_include_pad: i32,
    axis: i32,
    activation: i32,
    act_min: f32,
    act_max: f32,
    // Appended by subgraph format version 2 (ABI version unchanged).
    act_alpha: f32,
    act_beta: f32,
    lrn_size: i32,
    lrn_alpha: f32,
    lrn_beta: f32,
    lrn_bias: f32,
    num_axes: i32,
    axes: [i32; MAX_RANK],
    epsilon: f32,
}

type AbiVersionFn = unsafe extern "C" fn() -> u32;
type NameFn = unsafe extern "C" fn() -> *const c_char;
type AvailableFn = unsafe extern "C" fn(*mut c_char, usize) -> i32;
type GraphNewFn = unsafe extern "C" fn(*mut *mut c_void, *mut c_char, usize) -> i32;
type AddTensorFn =
    unsafe extern "C" fn(*mut c_void, *const TensorDescC, *mut u32, *mut c_char, usize) -> i32;
type AddNodeFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    *const NodeAttrsC,
    *const u32,
    u32,
    *const u32,
    u32,
    *mut c_char,
    usize,
) -> i32;
type FinalizeFn = unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> i32;
type RunFn = unsafe extern "C" fn(
    *mut c_void,
    *const *const c_void,
    u32,
    *const *mut c_void,
    u32,
    *mut c_char,
    usize,
) -> i32;
type FreeFn = unsafe extern "C" fn(*mut c_void);

struct Api {
    available: AvailableFn,
    graph_new: GraphNewFn,
    add_tensor: AddTensorFn,
    add_node: AddNodeFn,
    finalize: FinalizeFn,
    run: RunFn,
    free: FreeFn,
}

/// A loaded plug-in.
pub struct PluginBackend {
    name: String,
    path: String,
    api: Api,
    // Keeps the function pointers in `api` valid (prepared segments hold it too).
    lib: Arc<libloading::Library>,
}

fn load_err(path: &Path, message: impl Into<String>) -> Error {
    Error::Backend {
        backend: path.display().to_string(),
        message: message.into(),
    }
}

/// Message written into an error buffer by the plug-in.
fn buf_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let s = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    if s.is_empty() {
        "(no message)".into()
    } else {
        s
    }
}

impl PluginBackend {
    /// Load and check a plug-in (without registering it).
    pub fn open(path: &Path) -> Result<PluginBackend> {
        // SAFETY: loading a library runs its initializers; plug-ins are trusted native code,
        // exactly like model libraries (documented on `load_plugin`).
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| load_err(path, format!("cannot load plug-in: {e}")))?;
        macro_rules! sym {
            ($name:literal, $ty:ty) => {{
                let s: libloading::Symbol<$ty> =
                    // SAFETY: the symbol's type is the one the ABI header declares for this name.
                    unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| {
                        load_err(
                            path,
                            format!("not a Mote backend plug-in: missing `{}`: {e}", $name),
                        )
                    })?;
                *s
            }};
        }
        let version = sym!("mote_backend_abi_version", AbiVersionFn);
        // SAFETY: a no-argument query function of the ABI.
        let v = unsafe { version() };
        if v != ABI_VERSION {
            return Err(load_err(
                path,
                format!("plug-in ABI version {v}, but this runtime speaks version {ABI_VERSION}"),
            ));
        }
        let name_fn = sym!("mote_backend_name", NameFn);
        // SAFETY: returns a static NUL-terminated string (or NULL, handled).
        let name_ptr = unsafe { name_fn() };
        if name_ptr.is_null() {
            return Err(load_err(path, "mote_backend_name returned NULL"));
        }
        // SAFETY: non-NULL, NUL-terminated, valid while the library is loaded; copied now.
        let name = unsafe { CStr::from_ptr(name_ptr) }
            .to_string_lossy()
            .into_owned();
        if name.is_empty() || name == crate::offload::CPU {
            return Err(load_err(path, format!("invalid backend name `{name}`")));
        }
        let api = Api {
            available: sym!("mote_backend_available", AvailableFn),
            graph_new: sym!("mote_backend_graph_new", GraphNewFn),
            add_tensor: sym!("mote_backend_graph_add_tensor", AddTensorFn),
            add_node: sym!("mote_backend_graph_add_node", AddNodeFn),
            finalize: sym!("mote_backend_graph_finalize", FinalizeFn),
            run: sym!("mote_backend_graph_run", RunFn),
            free: sym!("mote_backend_graph_free", FreeFn),
        };
        Ok(PluginBackend {
            name,
            path: path.display().to_string(),
            api,
            lib: Arc::new(lib),
        })
    }

    /// Where it was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn err(&self, what: &str, buf: &[u8]) -> Error {
        Error::Backend {
            backend: self.name.clone(),
            message: format!("{what}: {}", buf_text(buf)),
        }
    }
}

/// Load a backend plug-in and register it ahead of the built-in CPU backend.
///
/// Loading runs the library's code: only load plug-ins you trust as native code. Fails with
/// [`Error::Backend`] when the file cannot be loaded, lacks an ABI symbol or speaks another ABI
/// version.
pub fn load_plugin(path: impl AsRef<Path>) -> Result<Arc<dyn Backend>> {
    if !crate::offload::BUILT {
        return Err(crate::offload::left_out(crate::offload::Needs::Plugin));
    }
    let b: Arc<dyn Backend> = Arc::new(PluginBackend::open(path.as_ref())?);
    crate::offload::register_backend(b.clone());
    Ok(b)
}

/// The file name of the ACL backend plug-in (`backends/acl`).
pub const ACL_LIBRARY: &str = "libmote_acl.so";

/// The ACL backend, found without configuration: on Arm Linux and Android, `libmote_acl.so`
/// through the dynamic linker's search path (`LD_LIBRARY_PATH`, the executable's run path, an
/// Android app's native library directory), then beside the binary that contains Mote. When it
/// is missing, or ACL itself is (the shim links `libarm_compute.so`), the result is a
/// placeholder that says why, and subgraphs partitioned for ACL run on `cpu`.
pub(crate) fn discover_acl() -> Arc<dyn Backend> {
    #[cfg(all(
        any(target_os = "linux", target_os = "android"),
        any(target_arch = "aarch64", target_arch = "arm")
    ))]
    {
        let mut candidates = vec![std::path::PathBuf::from(ACL_LIBRARY)];
        if let Some(dir) = directory_of_this_binary() {
            candidates.push(dir.join(ACL_LIBRARY));
        }
        let mut failures = Vec::new();
        for c in &candidates {
            match PluginBackend::open(c) {
                Ok(b) if b.name == "acl" => {
                    log::info!("loaded the ACL backend from {}", c.display());
                    return Arc::new(b);
                }
                Ok(b) => failures.push(format!(
                    "{}: the plug-in calls itself `{}`, not `acl`",
                    c.display(),
                    b.name
                )),
                Err(e) => failures.push(e.to_string()),
            }
        }
        Arc::new(crate::offload::registry::Unavailable {
            name: "acl",
            why: format!(
                "{ACL_LIBRARY} could not be loaded ({})",
                failures.join("; ")
            ),
        })
    }
    #[cfg(not(all(
        any(target_os = "linux", target_os = "android"),
        any(target_arch = "aarch64", target_arch = "arm")
    )))]
    {
        Arc::new(crate::offload::registry::Unavailable {
            name: "acl",
            why: "Arm Compute Library runs on Arm Linux and Android only".into(),
        })
    }
}

/// The directory of the executable or shared library this code was linked into.
#[cfg(all(
    any(target_os = "linux", target_os = "android"),
    any(target_arch = "aarch64", target_arch = "arm")
))]
fn directory_of_this_binary() -> Option<std::path::PathBuf> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let here = directory_of_this_binary as *const c_void;
    // SAFETY: `here` is an address inside this binary; `dladdr` fills `info` and returns 0 when
    // it cannot, in which case `info` is not read.
    let found = unsafe { libc::dladdr(here, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: `dladdr` succeeded, so `info` is initialized.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: `dli_fname` is a NUL-terminated path owned by the dynamic linker, copied at once.
    let file = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = std::path::PathBuf::from(file.to_string_lossy().into_owned());
    path.parent().map(Path::to_path_buf)
}

/// Plug-ins named by `MOTE_BACKEND_PLUGINS` (colon-separated paths); failures are logged.
pub(crate) fn from_environment() -> Vec<Arc<dyn Backend>> {
    let Some(list) = std::env::var_os("MOTE_BACKEND_PLUGINS") else {
        return Vec::new();
    };
    let list = list.to_string_lossy().into_owned();
    let mut out: Vec<Arc<dyn Backend>> = Vec::new();
    for p in list.split(':').filter(|s| !s.trim().is_empty()) {
        match PluginBackend::open(Path::new(p.trim())) {
            Ok(b) => {
                log::info!("loaded backend plug-in `{}` from {p}", b.name);
                out.push(Arc::new(b));
            }
            Err(e) => log::warn!("MOTE_BACKEND_PLUGINS: {e}"),
        }
    }
    out
}

fn dtype_code(d: DType) -> Option<i32> {
    Some(match d {
        DType::F32 => 1,
        DType::F16 => 2,
        DType::I32 => 3,
        DType::I8 => 4,
        DType::U8 => 5,
        _ => return None,
    })
}

/// `(MOTE_BK_ACT_*, act_min, act_max, act_alpha, act_beta)`.
fn act_code(a: Activation) -> (i32, f32, f32, f32, f32) {
    match a {
        Activation::None => (0, 0.0, 0.0, 0.0, 0.0),
        Activation::Relu => (1, 0.0, 0.0, 0.0, 0.0),
        Activation::Relu6 => (2, 0.0, 6.0, 0.0, 0.0),
        Activation::Clip(lo, hi) => (3, lo, hi, 0.0, 0.0),
        Activation::Sigmoid => (4, 0.0, 0.0, 0.0, 0.0),
        Activation::Tanh => (5, 0.0, 0.0, 0.0, 0.0),
        Activation::Hardswish => (6, 0.0, 0.0, 0.0, 0.0),
        Activation::Hardsigmoid(alpha, beta) => (7, 0.0, 0.0, alpha, beta),
        Activation::Silu => (8, 0.0, 0.0, 0.0, 0.0),
        Activation::Gelu => (9, 0.0, 0.0, 0.0, 0.0),
        Activation::GeluTanh => (10, 0.0, 0.0, 0.0, 0.0),
        Activation::LeakyRelu(alpha) => (11, 0.0, 0.0, alpha, 0.0),
    }
}

fn layout_code(l: Layout) -> i32 {
    match l {
        Layout::Nhwc => 1,
        Layout::Nchw => 2,
    }
}

fn to_i32<const N: usize>(a: [usize; N]) -> [i32; N] {
    a.map(|v| i32::try_from(v).unwrap_or(i32::MAX))
}

fn node_attrs(op: &Op) -> NodeAttrsC {
    let mut a = NodeAttrsC {
        struct_size: std::mem::size_of::<NodeAttrsC>() as u32,
        ..Default::default()
    };
    let set_act = |a: &mut NodeAttrsC, act: Activation| {
        let (k, lo, hi, alpha, beta) = act_code(act);
        a.activation = k;
        a.act_min = lo;
        a.act_max = hi;
        a.act_alpha = alpha;
        a.act_beta = beta;
    };
    let small = |v: usize| i32::try_from(v).unwrap_or(i32::MAX);
    match op {
        Op::Conv2d(c) => {
            a.op = 1;
            a.layout = layout_code(c.layout);
            a.strides = to_i32(c.strides);
            a.padding = to_i32(c.padding);
            a.dilation = to_i32(c.dilation);
            a.groups = i32::try_from(c.groups).unwrap_or(i32::MAX);
            set_act(&mut a, c.activation);
        }
        Op::MaxPool2d(p) | Op::AvgPool2d(p) => {
            a.op = if matches!(op, Op::MaxPool2d(_)) { 2 } else { 3 };
            a.layout = layout_code(p.layout);
            a.pool_size = to_i32(p.pool_size);
            a.strides = to_i32(p.strides);
            a.padding = to_i32(p.padding);
            a.dilation = to_i32(p.dilation);
            a.ceil_mode = p.ceil_mode as i32;
            a.count_include_pad = p.count_include_pad as i32;
        }
        Op::GlobalMaxPool2d(l) => {
            a.op = 4;
            a.layout = layout_code(*l);
        }
        Op::GlobalAvgPool2d(l) => {
            a.op = 5;
            a.layout = layout_code(*l);
        }
        Op::Dense { activation } => {
            a.op = 6;
            set_act(&mut a, *activation);
        }
        Op::Matmul => a.op = 7,
        Op::Add { activation } => {
            a.op = 8;
            set_act(&mut a, *activation);
        }
        Op::Multiply { activation } => {
            a.op = 9;
            set_act(&mut a, *activation);
        }
        Op::Relu => a.op = 10,
        Op::Relu6 => a.op = 11,
        Op::Clip { min, max } => {
            a.op = 12;
            a.act_min = *min;
            a.act_max = *max;
        }
        Op::Softmax { axis } => {
            a.op = 13;
            a.axis = *axis as i32;
        }
        Op::Reshape => a.op = 14,
        Op::Concatenate { axis } => {
            a.op = 15;
            a.axis = *axis as i32;
        }
        Op::Activation(act) => {
            a.op = 16;
            set_act(&mut a, *act);
        }
        Op::Subtract { activation } => {
            a.op = 17;
            set_act(&mut a, *activation);
        }
        Op::Divide { activation } => {
            a.op = 18;
            set_act(&mut a, *activation);
        }
        Op::ScaleShift { axis, activation } => {
            a.op = 19;
            a.axis = small(*axis);
            set_act(&mut a, *activation);
        }
        Op::Lrn(l) => {
            a.op = 20;
            a.layout = layout_code(l.layout);
            a.lrn_size = small(l.size);
            a.lrn_alpha = l.alpha;
            a.lrn_beta = l.beta;
            a.lrn_bias = l.bias;
        }
        Op::Transpose { axes } => {
            a.op = 21;
            a.num_axes = small(axes.len());
            for (d, &s) in a.axes.iter_mut().zip(axes) {
                *d = small(s);
            }
        }
        Op::ChannelShuffle { layout, groups } => {
            a.op = 22;
            a.layout = layout_code(*layout);
            a.groups = small(*groups);
        }
        Op::Split { axis } => {
            a.op = 23;
            a.axis = small(*axis);
        }
        Op::LayerNorm { axis, epsilon } => {
            a.op = 24;
            a.axis = small(*axis);
            a.epsilon = *epsilon;
        }
    }
    a
}

/// A graph handle owned by the plug-in; freed on drop.
struct GraphHandle<'a> {
    plugin: &'a PluginBackend,
    ptr: *mut c_void,
}

impl Drop for GraphHandle<'_> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from graph_new of this plug-in and is freed exactly once.
        unsafe { (self.plugin.api.free)(self.ptr) }
    }
}

/// Result of an ABI call that may refuse.
enum Refusal {
    Unsupported(String),
    Failed(Error),
}

impl PluginBackend {
    fn new_graph(&self) -> Result<GraphHandle<'_>> {
        let mut buf = [0u8; 512];
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointer and error buffer of the stated length.
        let rc = unsafe { (self.api.graph_new)(&mut ptr, buf.as_mut_ptr().cast(), buf.len()) };
        if rc != OK || ptr.is_null() {
            return Err(self.err("graph_new failed", &buf));
        }
        Ok(GraphHandle { plugin: self, ptr })
    }

    fn add_tensor(
        &self,
        g: &GraphHandle<'_>,
        d: &TensorDesc,
        kind: i32,
        data: Option<&[u8]>,
    ) -> std::result::Result<u32, Refusal> {
        let dtype = dtype_code(d.dtype)
            .ok_or_else(|| Refusal::Unsupported(format!("dtype {}", d.dtype)))?;
        let mut dims = [0i64; MAX_RANK];
        dims[..d.shape.len()].copy_from_slice(&d.shape);
        let (scales, zps, axis) = match &d.quant {
            Some(q) => {
                let zps: Vec<i32> = (0..q.scale.len()).map(|c| q.zero_point_at(c)).collect();
                (q.scale.clone(), zps, q.axis.map(|a| a as i32).unwrap_or(-1))
            }
            None => (Vec::new(), Vec::new(), -1),
        };
        let desc = TensorDescC {
            struct_size: std::mem::size_of::<TensorDescC>() as u32,
            kind,
            dtype,
            ndim: d.shape.len() as i32,
            dims,
            quant_axis: axis,
            num_scales: scales.len() as u32,
            scales: if scales.is_empty() {
                std::ptr::null()
            } else {
                scales.as_ptr()
            },
            zero_points: if zps.is_empty() {
                std::ptr::null()
            } else {
                zps.as_ptr()
            },
            data: data.map(|b| b.as_ptr().cast()).unwrap_or(std::ptr::null()),
            data_bytes: data.map(|b| b.len() as u64).unwrap_or(0),
        };
        let mut buf = [0u8; 512];
        let mut id = 0u32;
        // SAFETY: `desc` and the arrays it points to outlive the call; the plug-in copies what it
        // keeps (ABI rule).
        let rc = unsafe {
            (self.api.add_tensor)(g.ptr, &desc, &mut id, buf.as_mut_ptr().cast(), buf.len())
        };
        match rc {
            OK => Ok(id),
            UNSUPPORTED => Err(Refusal::Unsupported(buf_text(&buf))),
            _ => Err(Refusal::Failed(self.err("add_tensor failed", &buf))),
        }
    }

    /// Add nodes `nodes` of `graph` to a plug-in graph. `kind_of` classifies tensors.
    fn build(
        &self,
        h: &GraphHandle<'_>,
        graph: &Graph,
        nodes: Range<usize>,
        constants: Constants<'_>,
        reads: &[usize],
        writes: &[usize],
    ) -> std::result::Result<(), Refusal> {
        let mut ids: Vec<Option<u32>> = vec![None; graph.tensors.len()];
        // Inputs first, then outputs, so run's pointer arrays follow `reads` and `writes`.
        for &t in reads {
            ids[t] = Some(self.add_tensor(h, &graph.tensors[t], KIND_INPUT, None)?);
        }
        for &t in writes {
            ids[t] = Some(self.add_tensor(h, &graph.tensors[t], KIND_OUTPUT, None)?);
        }
        for node in &graph.nodes[nodes.clone()] {
            for &t in node.inputs.iter().chain(&node.outputs) {
                if ids[t].is_some() {
                    continue;
                }
                let id = match graph.role(t) {
                    Role::Constant(i) => {
                        // Borrowed for the call only (the plug-in copies it): dropped at once.
                        let c = constants.get(i).map_err(Refusal::Failed)?.ok_or_else(|| {
                            Refusal::Failed(Error::Backend {
                                backend: self.name.clone(),
                                message: format!("constant {i} missing"),
                            })
                        })?;
                        self.add_tensor(h, &graph.tensors[t], KIND_CONSTANT, Some(c.data()))?
                    }
                    _ => self.add_tensor(h, &graph.tensors[t], KIND_INTERMEDIATE, None)?,
                };
                ids[t] = Some(id);
            }
        }
        for node in &graph.nodes[nodes] {
            let attrs = node_attrs(&node.op);
            let ins: Vec<u32> = node
                .inputs
                .iter()
                .map(|&t| ids[t].unwrap_or(u32::MAX))
                .collect();
            let outs: Vec<u32> = node
                .outputs
                .iter()
                .map(|&t| ids[t].unwrap_or(u32::MAX))
                .collect();
            let name = CString::new(node.name.replace('\0', "?")).unwrap_or_default();
            let mut buf = [0u8; 512];
            // SAFETY: every pointer is valid for the call and the counts match the arrays.
            let rc = unsafe {
                (self.api.add_node)(
                    h.ptr,
                    name.as_ptr(),
                    &attrs,
                    ins.as_ptr(),
                    ins.len() as u32,
                    outs.as_ptr(),
                    outs.len() as u32,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            match rc {
                OK => {}
                UNSUPPORTED => return Err(Refusal::Unsupported(buf_text(&buf))),
                _ => {
                    return Err(Refusal::Failed(
                        self.err(&format!("add_node `{}` failed", node.name), &buf),
                    ))
                }
            }
        }
        Ok(())
    }
}

impl Backend for PluginBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn available(&self) -> std::result::Result<(), String> {
        let mut buf = [0u8; 512];
        // SAFETY: error buffer of the stated length.
        match unsafe { (self.api.available)(buf.as_mut_ptr().cast(), buf.len()) } {
            OK => Ok(()),
            _ => Err(buf_text(&buf)),
        }
    }

    fn supports(
        &self,
        graph: &Graph,
        node: usize,
        constants: Constants<'_>,
    ) -> std::result::Result<(), String> {
        let h = self.new_graph().map_err(|e| e.to_string())?;
        let (reads, writes) = segment_io(graph, node..node + 1);
        // A probe graph: the node's own output is always an OUTPUT.
        let writes = if writes.is_empty() {
            graph.nodes[node].outputs.clone()
        } else {
            writes
        };
        match self.build(&h, graph, node..node + 1, constants, &reads, &writes) {
            Ok(()) => Ok(()),
            Err(Refusal::Unsupported(why)) => Err(why),
            Err(Refusal::Failed(e)) => Err(e.to_string()),
        }
    }

    fn prepare(
        &self,
        graph: &Arc<Graph>,
        nodes: Range<usize>,
        constants: Constants<'_>,
    ) -> Result<Box<dyn Prepared>> {
        let h = self.new_graph()?;
        let (reads, writes) = segment_io(graph, nodes.clone());
        match self.build(&h, graph, nodes.clone(), constants, &reads, &writes) {
            Ok(()) => {}
            Err(Refusal::Unsupported(why)) => {
                return Err(Error::Backend {
                    backend: self.name.clone(),
                    message: format!("refused nodes {nodes:?}: {why}"),
                })
            }
            Err(Refusal::Failed(e)) => return Err(e),
        }
        let mut buf = [0u8; 512];
        // SAFETY: a graph of this plug-in, built on this thread; error buffer of stated length.
        let rc = unsafe { (self.api.finalize)(h.ptr, buf.as_mut_ptr().cast(), buf.len()) };
        if rc != OK {
            return Err(self.err("finalize failed", &buf));
        }
        let ptr = h.ptr;
        std::mem::forget(h);
        let mut copied: Vec<usize> = graph.nodes[nodes]
            .iter()
            .flat_map(|n| n.inputs.iter().copied())
            .filter(|&t| matches!(graph.role(t), Role::Constant(_)))
            .collect();
        copied.sort_unstable();
        copied.dedup();
        Ok(Box::new(PluginSegment {
            name: self.name.clone(),
            run: self.api.run,
            free: self.api.free,
            _lib: self.lib.clone(),
            graph: Mutex::new(ptr as usize),
            reads,
            writes,
            copied,
        }))
    }
}

/// A finalized plug-in graph; holds the library so `run` and `free` stay valid.
struct PluginSegment {
    name: String,
    run: RunFn,
    free: FreeFn,
    _lib: Arc<libloading::Library>,
    /// The graph handle; the mutex keeps one graph from running concurrently with itself.
    graph: Mutex<usize>,
    reads: Vec<usize>,
    writes: Vec<usize>,
    /// The constants its nodes read: the plug-in holds its own copies (ABI rule).
    copied: Vec<usize>,
}

impl Prepared for PluginSegment {
    fn copied_constants(&self) -> Vec<usize> {
        self.copied.clone()
    }

    fn run(&self, bufs: &mut Buffers<'_>) -> Result<()> {
        let (r, w) = bufs.raw(&self.reads, &self.writes)?;
        let guard = self.graph.lock().map_err(|_| Error::Backend {
            backend: self.name.clone(),
            message: "an earlier run panicked".into(),
        })?;
        let r: Vec<*const c_void> = r.into_iter().map(|p| p.cast()).collect();
        let w: Vec<*mut c_void> = w.into_iter().map(|p| p.cast()).collect();
        let mut buf = [0u8; 512];
        // SAFETY: the graph is finalized and exclusively ours while the lock is held; the
        // buffers are valid for the declared sizes for the duration of the call (ABI rule).
        let rc = unsafe {
            (self.run)(
                *guard as *mut c_void,
                r.as_ptr(),
                r.len() as u32,
                w.as_ptr(),
                w.len() as u32,
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if rc != OK {
            return Err(Error::Backend {
                backend: self.name.clone(),
                message: format!("run failed: {}", buf_text(&buf)),
            });
        }
        Ok(())
    }
}

impl Drop for PluginSegment {
    fn drop(&mut self) {
        if let Ok(g) = self.graph.get_mut() {
            // SAFETY: the handle came from graph_new, is not running (we hold `&mut self`) and is
            // freed once.
            unsafe { (self.free)(*g as *mut c_void) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The Rust mirror has the C header's layout: the offsets C gives `mote_bk_node_attrs` on
    /// every ABI Mote supports (all fields 4 bytes wide; tests/plugins/test_plugin.c asserts the
    /// same numbers against the header with the C compiler).
    #[test]
    fn node_attrs_mirror_the_header_layout() {
        assert_eq!(offset_of!(NodeAttrsC, op), 4);
        assert_eq!(offset_of!(NodeAttrsC, groups), 44);
        assert_eq!(offset_of!(NodeAttrsC, axis), 64);
        assert_eq!(offset_of!(NodeAttrsC, activation), 68);
        assert_eq!(offset_of!(NodeAttrsC, act_min), 72);
        assert_eq!(offset_of!(NodeAttrsC, act_max), 76);
        assert_eq!(offset_of!(NodeAttrsC, act_alpha), 80);
        assert_eq!(offset_of!(NodeAttrsC, act_beta), 84);
        assert_eq!(offset_of!(NodeAttrsC, lrn_size), 88);
        assert_eq!(offset_of!(NodeAttrsC, lrn_alpha), 92);
        assert_eq!(offset_of!(NodeAttrsC, lrn_beta), 96);
        assert_eq!(offset_of!(NodeAttrsC, lrn_bias), 100);
        assert_eq!(offset_of!(NodeAttrsC, num_axes), 104);
        assert_eq!(offset_of!(NodeAttrsC, axes), 108);
        assert_eq!(offset_of!(NodeAttrsC, epsilon), 140);
        assert_eq!(size_of::<NodeAttrsC>(), 144);
    }

    fn node_of(desc: &str) -> Op {
        Graph::parse(desc, "t").expect("parses").nodes[0].op.clone()
    }

    fn one_node(
        op: &str,
        attrs: &str,
        ins: &str,
        outs: &str,
        tensors: &str,
        consts: &str,
    ) -> String {
        format!(
            r#"{{"format":"mote.subgraph","version":2,"name":"g","tensors":[{tensors}],
               "inputs":[0],"constants":[{consts}],"outputs":[{outs}],
               "nodes":[{{"op":"{op}","name":"n","inputs":[{ins}],"outputs":[{outs}],"attrs":{attrs}}}]}}"#
        )
    }

    /// Every new field is filled from the node.
    #[test]
    fn version_2_attributes_reach_the_struct() {
        let f = |s: &str| format!(r#"{{"shape":{s},"dtype":"float32"}}"#);
        let a = node_attrs(&node_of(&one_node(
            "lrn",
            r#"{"layout":"NCHW","size":5,"alpha":0.001,"beta":0.5,"bias":2.0}"#,
            "0",
            "1",
            &[f("[1,4,3,3]"), f("[1,4,3,3]")].join(","),
            "",
        )));
        assert_eq!((a.op, a.layout, a.lrn_size), (20, 2, 5));
        assert_eq!((a.lrn_alpha, a.lrn_beta, a.lrn_bias), (0.001, 0.5, 2.0));
        let a = node_attrs(&node_of(&one_node(
            "transpose",
            r#"{"axes":[2,0,1]}"#,
            "0",
            "1",
            &[f("[2,3,4]"), f("[4,2,3]")].join(","),
            "",
        )));
        assert_eq!((a.op, a.num_axes), (21, 3));
        assert_eq!(a.axes[..4], [2, 0, 1, 0]);
        let a = node_attrs(&node_of(&one_node(
            "layer_norm",
            r#"{"axis":-1,"epsilon":0.001}"#,
            "0,1,2",
            "3",
            &[f("[2,6]"), f("[6]"), f("[6]"), f("[2,6]")].join(","),
            "1,2",
        )));
        assert_eq!((a.op, a.axis, a.epsilon), (24, 1, 0.001));
        let a = node_attrs(&node_of(&one_node(
            "scale_shift",
            r#"{"axis":-3,"activation":{"hardsigmoid":[0.2,0.5]}}"#,
            "0,1,2",
            "3",
            &[f("[1,4,3,3]"), f("[4]"), f("[4]"), f("[1,4,3,3]")].join(","),
            "1,2",
        )));
        assert_eq!((a.op, a.axis, a.activation), (19, 1, 7));
        assert_eq!((a.act_alpha, a.act_beta), (0.2, 0.5));
        let a = node_attrs(&node_of(&one_node(
            "channel_shuffle",
            r#"{"layout":"NHWC","groups":2}"#,
            "0",
            "1",
            &[f("[1,3,3,4]"), f("[1,3,3,4]")].join(","),
            "",
        )));
        assert_eq!((a.op, a.layout, a.groups), (22, 1, 2));
        let a = node_attrs(&node_of(&one_node(
            "activation",
            r#"{"activation":{"leaky_relu":0.1}}"#,
            "0",
            "1",
            &[f("[7]"), f("[7]")].join(","),
            "",
        )));
        assert_eq!((a.op, a.activation, a.act_alpha), (16, 11, 0.1));
        let a = node_attrs(&node_of(&one_node(
            "split",
            r#"{"axis":1}"#,
            "0",
            "1,2",
            &[f("[2,5]"), f("[2,2]"), f("[2,3]")].join(","),
            "",
        )));
        assert_eq!((a.op, a.axis), (23, 1));
        assert_eq!(a.struct_size, 144);
    }
}
