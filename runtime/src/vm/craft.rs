//! Writing code-free model files by hand (docs/tvm-format.md §2-§5): a Relax executable from a
//! few functions and instructions, wrapped the way `export_library("m.tar")` wraps a model
//! without kernels (a tar of `lib0.c` and `devc.c`, the blob as a C array). For tests and fuzz
//! targets that need a model TVM would never write: loops, deep recursion, huge register
//! files. Reached as `mote::fuzzing::craft`; not part of the API.

/// Opcodes (§4.2) and special registers (§4.3).
const CALL: i64 = 1;
const RET: i64 = 2;
const GOTO: i64 = 3;
const IF: i64 = 4;
/// `%void`: a destination that discards the result.
pub const VOID: i64 = 1 << 54;

/// An argument word (§4.4).
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    Reg(i64),
    Imm(i64),
    Func(i64),
}

impl Arg {
    fn word(self) -> i64 {
        let (kind, v) = match self {
            Arg::Reg(r) => (0i64, r),
            Arg::Imm(i) => (1, i),
            Arg::Func(f) => (3, f),
        };
        (kind << 56) | (v & ((1 << 56) - 1))
    }
}

/// One instruction.
#[derive(Clone, Debug)]
pub enum Instr {
    /// `dst = table[func](args...)`; `dst` may be [`VOID`].
    Call {
        dst: i64,
        func: i64,
        args: Vec<Arg>,
    },
    Ret {
        reg: i64,
    },
    /// Jump by `offset` instructions (negative: backward).
    Goto {
        offset: i64,
    },
    /// Continue if `cond` is nonzero, else jump by `false_offset`.
    If {
        cond: i64,
        false_offset: i64,
    },
}

/// A function-table entry: a Relax function with its instructions, or a packed function
/// (a builtin) by name.
#[derive(Clone, Debug)]
pub enum Entry {
    Vm {
        name: String,
        params: Vec<String>,
        registers: i64,
        code: Vec<Instr>,
    },
    Packed(String),
}

/// The `relax.VMExecutable` payload of `table` (§3), with an empty constant pool.
pub fn executable(table: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    let u64_ = |o: &mut Vec<u8>, v: u64| o.extend_from_slice(&v.to_le_bytes());
    let i64_ = |o: &mut Vec<u8>, v: i64| o.extend_from_slice(&v.to_le_bytes());
    let str_ = |o: &mut Vec<u8>, s: &str| {
        o.extend_from_slice(&(s.len() as u64).to_le_bytes());
        o.extend_from_slice(s.as_bytes());
    };
    u64_(&mut out, 0xD225_DE2F_4214_151E);
    str_(&mut out, "0.14");
    // Lay the instructions out first: each VM function's range.
    let mut words: Vec<Vec<i64>> = Vec::new();
    let mut ranges = Vec::new();
    for e in table {
        if let Entry::Vm { code, .. } = e {
            let start = words.len() as i64;
            for ins in code {
                words.push(match ins {
                    Instr::Call { dst, func, args } => {
                        let mut w = vec![CALL, *dst, *func, args.len() as i64];
                        w.extend(args.iter().map(|a| a.word()));
                        w
                    }
                    Instr::Ret { reg } => vec![RET, *reg],
                    Instr::Goto { offset } => vec![GOTO, *offset],
                    Instr::If { cond, false_offset } => vec![IF, *cond, *false_offset],
                });
            }
            ranges.push((start, words.len() as i64));
        } else {
            ranges.push((0, 0));
        }
    }
    u64_(&mut out, table.len() as u64);
    for (e, (start, end)) in table.iter().zip(ranges) {
        match e {
            Entry::Vm {
                name,
                params,
                registers,
                ..
            } => {
                out.extend_from_slice(&1i32.to_le_bytes());
                str_(&mut out, name);
                i64_(&mut out, start);
                i64_(&mut out, end);
                i64_(&mut out, params.len() as i64);
                i64_(&mut out, *registers);
                u64_(&mut out, params.len() as u64);
                for p in params {
                    str_(&mut out, p);
                }
            }
            Entry::Packed(name) => {
                out.extend_from_slice(&0i32.to_le_bytes());
                str_(&mut out, name);
                for v in [0, 0, -2, 0] {
                    i64_(&mut out, v);
                }
                u64_(&mut out, 0);
            }
        }
    }
    u64_(&mut out, 0); // memory scopes
    u64_(&mut out, 0); // constant pool
    u64_(&mut out, words.len() as u64);
    let mut at = 0i64;
    for w in &words {
        i64_(&mut out, at);
        at += w.len() as i64;
    }
    u64_(&mut out, at as u64);
    for w in words.iter().flatten() {
        i64_(&mut out, *w);
    }
    out
}

/// The length-prefixed module blob holding one executable and no kernel library (§2).
pub fn blob(executable: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    // indptr = [0, 0] (a vec of two: one module, importing nothing), children = [].
    for v in [2u64, 0, 0, 0] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    let kind = "relax.VMExecutable";
    p.extend_from_slice(&(kind.len() as u64).to_le_bytes());
    p.extend_from_slice(kind.as_bytes());
    p.extend_from_slice(&(executable.len() as u64).to_le_bytes());
    p.extend_from_slice(executable);
    let mut b = (p.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(&p);
    b
}

/// TVM's `devc.c` for a model without kernels: the blob as a C array named
/// `<prefix>__tvm_ffi__library_bin` (docs/code-free.md §2).
pub fn c_source(prefix: &str, blob: &[u8]) -> String {
    let items: Vec<String> = blob.iter().map(|b| format!("0x{b:02x}")).collect();
    format!(
        "TVM_EXPORT extern const unsigned char {prefix}__tvm_ffi__library_bin[];\n\
         const unsigned char {prefix}__tvm_ffi__library_bin[{}] = {{\n  {}\n}};\n",
        blob.len(),
        items.join(",")
    )
}

/// A ustar archive of `members`, as Python's tarfile writes one.
pub fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in members {
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..108].copy_from_slice(b"0000644\0");
        h[124..136].copy_from_slice(format!("{:011o}\0", data.len()).as_bytes());
        h[136..148].copy_from_slice(b"00000000000\0");
        h[156] = b'0';
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].fill(b' ');
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

/// The uncompressed `.tar` TVM writes for a model without kernels: `lib0.c` and `devc.c`
/// (docs/code-free.md §2), holding `blob`.
pub fn code_free_tar(blob: &[u8]) -> Vec<u8> {
    tar(&[("lib0.c", b";"), ("devc.c", c_source("", blob).as_bytes())])
}

/// A model file of `table`: [`code_free_tar`] of [`blob`] of [`executable`].
pub fn model(table: &[Entry]) -> Vec<u8> {
    code_free_tar(&blob(&executable(table)))
}

/// `main()` that loops forever: one backward `Goto` (legal Relax control flow; only the
/// execution budget or an interrupt ends it).
pub fn endless_main() -> Entry {
    Entry::Vm {
        name: "main".into(),
        params: vec![],
        registers: 1,
        code: vec![Instr::Goto { offset: 0 }, Instr::Ret { reg: 0 }],
    }
}

/// A model of [`endless_main`] alone.
pub fn endless_loop() -> Vec<u8> {
    model(&[endless_main()])
}

/// `main(n)` that calls itself with the same argument forever, each frame holding `registers`
/// registers: stopped by the stack or register budget.
pub fn self_recursion(registers: i64) -> Vec<u8> {
    model(&[Entry::Vm {
        name: "main".into(),
        params: vec!["n".into()],
        registers,
        code: vec![
            Instr::Call {
                dst: 0,
                func: 0,
                args: vec![Arg::Reg(0)],
            },
            Instr::Ret { reg: 0 },
        ],
    }])
}

/// For the counting functions, whose function 1 is `mote.test.ne` and function 2
/// `mote.test.add`: `r1 = (r0 != 0)`, then a jump by `false_offset` when it is 0 (two
/// instructions).
fn unless_zero(false_offset: i64) -> Vec<Instr> {
    vec![
        Instr::Call {
            dst: 1,
            func: 1,
            args: vec![Arg::Reg(0), Arg::Imm(0)],
        },
        Instr::If {
            cond: 1,
            false_offset,
        },
    ]
}

/// As for [`unless_zero`]: `dst = r0 - 1` (one instruction).
fn decrement(dst: i64) -> Vec<Instr> {
    vec![Instr::Call {
        dst,
        func: 2,
        args: vec![Arg::Reg(0), Arg::Imm(-1)],
    }]
}

/// `main(n)` that recurses `n` levels deep (calling itself with `n - 1` until 0), then returns
/// 0: a legitimate deep call chain, for measuring the stack one level takes.
pub fn countdown() -> Vec<u8> {
    model(&[
        Entry::Vm {
            name: "main".into(),
            params: vec!["n".into()],
            registers: 3,
            // if n != 0 { r2 = n - 1; return main(r2) } else { return n (0) }
            code: [
                unless_zero(4),
                decrement(2),
                vec![
                    Instr::Call {
                        dst: 0,
                        func: 0,
                        args: vec![Arg::Reg(2)],
                    },
                    Instr::Ret { reg: 0 },
                    Instr::Ret { reg: 0 },
                ],
            ]
            .concat(),
        },
        Entry::Packed("mote.test.ne".into()),
        Entry::Packed("mote.test.add".into()),
    ])
}

/// `main()` that spins a loop of `n` iterations of a backward jump, decrementing a counter
/// with a registered function: a loop that ends, for the execution budget.
pub fn counted_loop() -> Vec<u8> {
    model(&[
        Entry::Vm {
            name: "main".into(),
            params: vec!["n".into()],
            registers: 2,
            // loop: if n == 0 goto end; n = n - 1; goto loop; end: ret n
            code: [
                unless_zero(3),
                decrement(0),
                vec![Instr::Goto { offset: -3 }, Instr::Ret { reg: 0 }],
            ]
            .concat(),
        },
        Entry::Packed("mote.test.ne".into()),
        Entry::Packed("mote.test.add".into()),
    ])
}
