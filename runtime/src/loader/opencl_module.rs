//! The `opencl` module TVM's `export_library` embeds for code compiled with an OpenCL target
//! (docs/tvm-format.md §10): the kernels' OpenCL C source and, for each kernel, its parameter
//! types and launch parameters. Bounds-checked like the rest of the blob; everything a later
//! launch relies on (parameter kinds, launch tags, one source chunk per kernel) is checked here.

use std::ops::Range;

use super::executable::Reader;
use crate::error::{Error, Result};

/// How one kernel parameter is passed to `clSetKernelArg` (§10.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClParam {
    /// A `__global` pointer: the `cl_mem` of a device tensor.
    Buffer,
    I32,
    I64,
    U32,
    F32,
    F64,
}

/// A launch parameter the host passes after the kernel's arguments: the extent of a work-group
/// index (`blockIdx`) or of a work-item index within a group (`threadIdx`), by dimension 0-2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LaunchDim {
    Group(usize),
    Item(usize),
}

/// One kernel of the module.
#[derive(Clone, Debug)]
pub(crate) struct ClKernel {
    /// The name the host code looks up, the `__kernel` function's name and the key of its
    /// source chunk, all the same string.
    pub name: String,
    pub params: Vec<ClParam>,
    /// One integer argument each, after the parameters, in this order.
    pub launch: Vec<LaunchDim>,
    /// Whether one more integer follows: a dynamic `__local` size in bytes.
    pub dyn_shared: bool,
    /// This kernel's chunk of [`OpenClModule::source`].
    pub chunk: Range<usize>,
}

impl ClKernel {
    /// How many arguments the host passes to launch it.
    pub(crate) fn arg_count(&self) -> usize {
        self.params.len() + self.launch.len() + usize::from(self.dyn_shared)
    }
}

/// A decoded `opencl` module.
#[derive(Clone, Debug)]
pub(crate) struct OpenClModule {
    /// The OpenCL C of every kernel, in `// Function: NAME` chunks.
    pub source: String,
    /// In the order of the module's function map.
    pub kernels: Vec<ClKernel>,
}

impl OpenClModule {
    #[cfg(test)]
    pub(crate) fn kernel(&self, name: &str) -> Option<&ClKernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// The source of one kernel: its own program (TVM builds each chunk separately).
    pub(crate) fn chunk(&self, k: &ClKernel) -> &str {
        &self.source[k.chunk.clone()]
    }
}

const DELIMITER: &str = "// Function: ";

/// Decodes the payload of an `opencl` module.
pub(crate) fn parse(payload: &[u8]) -> Result<OpenClModule> {
    let mut r = Reader::new(payload, "opencl module");
    let fmt = r.str()?;
    if fmt != "cl" {
        return Err(Error::Unsupported(format!(
            "an opencl module of format `{}` (a device binary); Mote builds OpenCL C source (`cl`)",
            shorten(&fmt)
        )));
    }
    // Each entry has at least a key, a name and three counts (8 bytes each).
    let n = r.count(40)?;
    let mut kernels: Vec<ClKernel> = Vec::with_capacity(n);
    for _ in 0..n {
        let key = r.str()?;
        let name = r.str()?;
        if key != name {
            return Err(r.err(format!(
                "function map key `{}` holds the function `{}`",
                shorten(&key),
                shorten(&name)
            )));
        }
        let at = |what: String| {
            Error::Unsupported(format!("opencl kernel `{}`: {what}", shorten(&name)))
        };
        let n_args = r.count(4)?;
        let mut params = Vec::with_capacity(n_args);
        for i in 0..n_args {
            let d = r.dtype()?;
            params.push(match (d.code, d.bits, d.lanes) {
                (3, _, 1) => ClParam::Buffer,
                (0, 32, 1) => ClParam::I32,
                (0, 64, 1) => ClParam::I64,
                (1, 32, 1) => ClParam::U32,
                (2, 32, 1) => ClParam::F32,
                (2, 64, 1) => ClParam::F64,
                _ => {
                    return Err(at(format!(
                        "parameter {i} has dtype {d}, which cannot be passed to an OpenCL kernel \
                         (int32, int64, uint32, float32, float64 and buffers can)"
                    )))
                }
            });
        }
        let n_tags = r.count(8)?;
        let mut launch = Vec::new();
        let mut dyn_shared = false;
        for i in 0..n_tags {
            let tag = r.str()?;
            if dyn_shared {
                return Err(r.err(format!(
                    "kernel `{}`: launch tag `{}` after the dynamic shared memory tag, which must be last",
                    shorten(&name),
                    shorten(&tag)
                )));
            }
            let dim = match tag.as_bytes().last() {
                Some(b'x') => 0,
                Some(b'y') => 1,
                Some(b'z') => 2,
                _ => 3,
            };
            let d = match tag.get(..tag.len().saturating_sub(1)) {
                Some("blockIdx.") if dim < 3 => LaunchDim::Group(dim),
                Some("threadIdx.") if dim < 3 => LaunchDim::Item(dim),
                _ => match tag.as_str() {
                    "tirx.use_dyn_shared_memory" | "tir.use_dyn_shared_memory" => {
                        dyn_shared = true;
                        continue;
                    }
                    // CUDA launch flags: they add no argument and mean nothing to OpenCL.
                    "tirx.use_programtic_dependent_launch" | "tirx.use_cooperative_launch" => {
                        continue
                    }
                    _ => {
                        return Err(at(format!(
                            "launch tag {i} `{}` is not one Mote knows (blockIdx.x/y/z, \
                             threadIdx.x/y/z, tirx.use_dyn_shared_memory)",
                            shorten(&tag)
                        )))
                    }
                },
            };
            if launch.contains(&d) {
                return Err(r.err(format!(
                    "kernel `{}`: launch tag `{tag}` twice",
                    shorten(&name)
                )));
            }
            launch.push(d);
        }
        let n_extra = r.count(4)?;
        if n_extra != params.len() {
            return Err(r.err(format!(
                "kernel `{}`: {n_extra} argument tags for {} parameters",
                shorten(&name),
                params.len()
            )));
        }
        for i in 0..n_extra {
            let tag = r.i32()?;
            if tag != 0 {
                return Err(at(format!(
                    "parameter {i} has tag {tag} (a CUDA tensor map), not a plain argument"
                )));
            }
        }
        if kernels.iter().any(|k| k.name == name) {
            return Err(r.err(format!(
                "kernel `{}` twice in the function map",
                shorten(&name)
            )));
        }
        kernels.push(ClKernel {
            name,
            params,
            launch,
            dyn_shared,
            chunk: 0..0,
        });
    }
    let len = r.count(1)?;
    let code = r.bytes(len)?;
    if r.remaining() != 0 {
        return Err(r.err(format!("{} unexpected trailing bytes", r.remaining())));
    }
    let source = String::from_utf8(code.to_vec())
        .map_err(|_| Error::Format("opencl module: the OpenCL source is not UTF-8".into()))?;
    let chunks = split(&source)?;
    if chunks.len() != kernels.len() {
        return Err(Error::Format(format!(
            "opencl module: {} source chunks for {} kernels",
            chunks.len(),
            kernels.len()
        )));
    }
    for (name, range) in chunks {
        let k = kernels.iter_mut().find(|k| k.name == name).ok_or_else(|| {
            Error::Format(format!(
                "opencl module: a source chunk for `{}`, which the function map does not list",
                shorten(name)
            ))
        })?;
        if !k.chunk.is_empty() {
            return Err(Error::Format(format!(
                "opencl module: two source chunks for `{}`",
                shorten(name)
            )));
        }
        k.chunk = range;
    }
    Ok(OpenClModule { source, kernels })
}

/// The `// Function: NAME` chunks of `source`: each runs from the line after its delimiter to
/// the next delimiter (or the end). Text before the first delimiter belongs to no kernel.
fn split(source: &str) -> Result<Vec<(&str, Range<usize>)>> {
    let starts: Vec<usize> = source.match_indices(DELIMITER).map(|(i, _)| i).collect();
    let mut out = Vec::with_capacity(starts.len());
    for (j, &s) in starts.iter().enumerate() {
        let after = s + DELIMITER.len();
        let end = starts.get(j + 1).copied().unwrap_or(source.len());
        let line_end = source[after..end].find('\n').map_or(end, |i| after + i);
        let name = source[after..line_end].trim_end_matches('\r');
        if name.is_empty() {
            return Err(Error::Format(
                "opencl module: a source chunk without a kernel name".into(),
            ));
        }
        let body = (line_end + 1).min(end)..end;
        if body.is_empty() {
            return Err(Error::Format(format!(
                "opencl module: the source chunk of `{}` is empty",
                shorten(name)
            )));
        }
        out.push((name, body));
    }
    Ok(out)
}

/// A name from the file, cut for messages (a hostile file can make names megabytes long).
fn shorten(s: &str) -> String {
    const MAX: usize = 80;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A payload as TVM writes it (§10.2).
    pub(crate) struct Payload(Vec<u8>);

    impl Payload {
        pub fn new(fmt: &str, kernels: usize) -> Payload {
            let mut p = Payload(Vec::new());
            p.str(fmt).u64(kernels as u64);
            p
        }
        pub fn u64(&mut self, v: u64) -> &mut Self {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        pub fn str(&mut self, s: &str) -> &mut Self {
            self.u64(s.len() as u64);
            self.0.extend_from_slice(s.as_bytes());
            self
        }
        pub fn kernel(&mut self, name: &str, dtypes: &[[u8; 4]], tags: &[&str]) -> &mut Self {
            self.str(name).str(name).u64(dtypes.len() as u64);
            for d in dtypes {
                self.0.extend_from_slice(d);
            }
            self.u64(tags.len() as u64);
            for t in tags {
                self.str(t);
            }
            self.u64(dtypes.len() as u64);
            for _ in dtypes {
                self.0.extend_from_slice(&0i32.to_le_bytes());
            }
            self
        }
        pub fn bytes(&self) -> Vec<u8> {
            self.0.clone()
        }
    }

    const H: [u8; 4] = [3, 64, 1, 0];
    const I32: [u8; 4] = [0, 32, 1, 0];

    fn vadd_source() -> String {
        // Parameters are checked against the map, not the source: any text will do.
        "// Function: vadd_kernel\n__kernel void vadd_kernel(__global float* restrict A_ptr, \
         float alpha, long n) { }\n"
            .into()
    }

    fn two_kernels() -> Vec<u8> {
        let src = "// Function: a_kernel\n__kernel void a_kernel(__global float* x);\n\
                   __kernel void b_kernel(__global float* x, int k);\n\
                   __kernel void a_kernel(__global float* x) { x[0] = 1; }\n\
                   // Function: b_kernel\n__kernel void a_kernel(__global float* x);\n\
                   __kernel void b_kernel(__global float* x, int k) { x[k] = 2; }\n";
        let mut p = Payload::new("cl", 2);
        p.kernel("a_kernel", &[H], &["blockIdx.x", "threadIdx.x"])
            .kernel(
                "b_kernel",
                &[H, I32],
                &[
                    "blockIdx.y",
                    "blockIdx.x",
                    "threadIdx.y",
                    "threadIdx.x",
                    "tirx.use_dyn_shared_memory",
                ],
            )
            .str(src);
        p.bytes()
    }

    #[test]
    fn reads_kernels_launch_tags_and_source_chunks() {
        let m = parse(&two_kernels()).unwrap();
        assert_eq!(m.kernels.len(), 2);
        let a = m.kernel("a_kernel").unwrap();
        assert_eq!(a.params, [ClParam::Buffer]);
        assert_eq!(a.launch, [LaunchDim::Group(0), LaunchDim::Item(0)]);
        assert!(!a.dyn_shared);
        assert_eq!(a.arg_count(), 3);
        assert!(m
            .chunk(a)
            .starts_with("__kernel void a_kernel(__global float* x);"));
        assert!(m.chunk(a).ends_with("x[0] = 1; }\n"));
        let b = m.kernel("b_kernel").unwrap();
        assert_eq!(b.params, [ClParam::Buffer, ClParam::I32]);
        assert_eq!(
            b.launch,
            [
                LaunchDim::Group(1),
                LaunchDim::Group(0),
                LaunchDim::Item(1),
                LaunchDim::Item(0)
            ]
        );
        assert!(b.dyn_shared);
        assert_eq!(b.arg_count(), 7);
        assert!(m.chunk(b).ends_with("x[k] = 2; }\n") && !m.chunk(b).contains("// Function"));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let good = two_kernels();
        for cut in 0..good.len() {
            assert!(parse(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = good.clone();
        long.push(0);
        assert!(parse(&long).unwrap_err().to_string().contains("trailing"));
    }

    #[test]
    fn defects_are_named() {
        let case = |fmt: &str, dtypes: &[[u8; 4]], tags: &[&str], src: &str| {
            let mut p = Payload::new(fmt, 1);
            p.kernel("vadd_kernel", dtypes, tags).str(src);
            parse(&p.bytes()).unwrap_err().to_string()
        };
        let src = vadd_source();
        let ok_tags = ["blockIdx.x", "threadIdx.x"];
        for (e, want) in [
            (case("xclbin", &[H], &ok_tags, &src), "format `xclbin`"),
            (
                case("cl", &[H, [2, 16, 1, 0]], &ok_tags, &src),
                "parameter 1 has dtype float16",
            ),
            (
                case("cl", &[H, [2, 32, 4, 0]], &ok_tags, &src),
                "parameter 1 has dtype float32x4",
            ),
            (
                case("cl", &[[0, 8, 1, 0]], &ok_tags, &src),
                "parameter 0 has dtype int8",
            ),
            (
                case("cl", &[H], &["blockIdx.w"], &src),
                "launch tag 0 `blockIdx.w`",
            ),
            (
                case("cl", &[H], &["vthread"], &src),
                "launch tag 0 `vthread`",
            ),
            (
                case("cl", &[H], &["blockIdx.x", "blockIdx.x"], &src),
                "`blockIdx.x` twice",
            ),
            (
                case(
                    "cl",
                    &[H],
                    &["tirx.use_dyn_shared_memory", "threadIdx.x"],
                    &src,
                ),
                "must be last",
            ),
            (
                case("cl", &[H], &ok_tags, "__kernel void f() {}"),
                "0 source chunks for 1 kernels",
            ),
            (
                case("cl", &[H], &ok_tags, "// Function: other_kernel\nx\n"),
                "which the function map does not list",
            ),
            (
                case("cl", &[H], &ok_tags, "// Function: vadd_kernel\n"),
                "is empty",
            ),
            (
                case("cl", &[H], &ok_tags, "// Function: \nx"),
                "without a kernel name",
            ),
        ] {
            assert!(e.contains(want), "{e:?} should contain {want:?}");
        }
        // Key and name differ; the same kernel twice; extra tags that do not match.
        let mut p = Payload::new("cl", 1);
        p.str("k").str("j").u64(0).u64(0).u64(0).str("");
        assert!(parse(&p.bytes())
            .unwrap_err()
            .to_string()
            .contains("key `k` holds"));
        let mut p = Payload::new("cl", 2);
        p.kernel("k", &[H], &[])
            .kernel("k", &[H], &[])
            .str("// Function: k\nx\n// Function: k\ny\n");
        assert!(parse(&p.bytes())
            .unwrap_err()
            .to_string()
            .contains("twice in the function map"));
        let mut p = Payload::new("cl", 1);
        p.str("k").str("k").u64(1);
        p.0.extend_from_slice(&H);
        p.u64(0).u64(2);
        p.0.extend_from_slice(&[0; 8]);
        p.str("// Function: k\nx\n");
        assert!(parse(&p.bytes())
            .unwrap_err()
            .to_string()
            .contains("2 argument tags for 1 parameters"));
        // A CUDA tensor-map tag.
        let mut p = Payload::new("cl", 1);
        p.str("k").str("k").u64(1);
        p.0.extend_from_slice(&H);
        p.u64(0).u64(1);
        p.0.extend_from_slice(&1i32.to_le_bytes());
        p.str("// Function: k\nx\n");
        assert!(parse(&p.bytes())
            .unwrap_err()
            .to_string()
            .contains("tensor map"));
    }

    #[test]
    fn a_hostile_name_is_cut_in_messages() {
        let name = "n".repeat(1 << 20);
        let mut p = Payload::new("cl", 1);
        p.kernel(&name, &[[9, 9, 1, 0]], &[]).str("");
        let e = parse(&p.bytes()).unwrap_err().to_string();
        assert!(
            e.len() < 400 && e.contains("(1048576 bytes)"),
            "{}",
            e.len()
        );
    }

    #[test]
    fn counts_beyond_the_payload_are_refused_before_allocating() {
        let mut p = Payload::new("cl", 0);
        p.0.truncate(10);
        p.u64(u64::MAX);
        assert!(parse(&p.bytes()).is_err());
        let mut p = Payload::new("cl", 1);
        p.str("k").str("k").u64(1 << 40);
        assert!(parse(&p.bytes())
            .unwrap_err()
            .to_string()
            .contains("exceeds"));
    }
}
