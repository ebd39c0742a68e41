//! What a Relax function returns, read from its instructions without running it
//! (docs/tvm-format.md §9.3): the dtype and shape of each tensor [`crate::Session::run`] gives
//! back, in the same (flattened) order.
//!
//! TVM's bytecode carries no return type, but it allocates every result it computes with
//! `vm.builtin.alloc_tensor(storage, offset, shape, dtype)`, whose dtype is a constant and whose
//! shape is a constant or a `vm.builtin.make_shape` of the function's shape heap; results with
//! symbolic shapes are often checked again before `ret` (`check_tensor_info`, `match_shape`,
//! as for parameters). Tuples are built with `vm.builtin.make_tuple`, values moved between
//! branches with `vm.builtin.copy`, and other Relax functions called directly. This module
//! follows those definitions from the returned register back; anything else (a packed
//! function's result, a tuple element taken out) is unknown, and a result whose structure is
//! unknown makes the whole answer `None`, since then not even the count of outputs is.

use std::collections::HashMap;

use crate::loader::executable::{Arg, FuncKind, Instr};
use crate::model::{Dim, ParamInfo};
use crate::value::Value;
use crate::vm::builtins::Builtin;
use crate::vm::program::{Callee, Program};
use crate::DType;

/// How deep calls from one Relax function to another are followed.
const MAX_DEPTH: usize = 8;
/// Instructions looked at for one answer, calls followed included: a file whose functions call
/// each other many times over gets `None` after this much work, not an exponential walk.
const MAX_INSTRUCTIONS: usize = 200_000;

/// What is known about a value.
#[derive(Clone, Debug, PartialEq)]
enum Abs {
    Tensor {
        dtype: Option<DType>,
        shape: Option<Vec<Dim>>,
    },
    Tuple(Vec<Abs>),
    /// A shape value (`make_shape`, a constant shape): what `alloc_tensor` gets.
    Shape(Vec<Dim>),
    Unknown,
}

impl Abs {
    /// One value of two that reach the same place (two branches): what both say.
    fn merge(self, other: Abs) -> Abs {
        match (self, other) {
            (a, b) if a == b => a,
            (
                Abs::Tensor {
                    dtype: d1,
                    shape: s1,
                },
                Abs::Tensor {
                    dtype: d2,
                    shape: s2,
                },
            ) => Abs::Tensor {
                dtype: if d1 == d2 { d1 } else { None },
                shape: match (s1, s2) {
                    (Some(a), Some(b)) if a == b => Some(a),
                    _ => None,
                },
            },
            (Abs::Tuple(a), Abs::Tuple(b)) if a.len() == b.len() => {
                Abs::Tuple(a.into_iter().zip(b).map(|(x, y)| x.merge(y)).collect())
            }
            _ => Abs::Unknown,
        }
    }
}

/// The outputs of Relax function `fidx` of `program`, whose parameters are described by
/// `params` (what [`crate::Model::function_info`] found for them): `None` when their number
/// is unknown; otherwise one entry per output tensor, named `output` (a single tensor) or
/// `output[i]`, `output[i][j]`... (tuples, flattened depth-first as `Session::run` returns
/// them), with `None` for what is unknown.
pub(crate) fn outputs(
    program: &Program,
    fidx: usize,
    params: &[ParamInfo],
) -> Option<Vec<ParamInfo>> {
    let param_abs: Vec<Abs> = params
        .iter()
        .map(|p| Abs::Tensor {
            dtype: p.dtype,
            shape: p.shape.clone(),
        })
        .collect();
    let mut budget = MAX_INSTRUCTIONS;
    let abs = returned(program, fidx, &param_abs, 0, &mut budget);
    let mut out = Vec::new();
    flatten(abs, "output".to_string(), &mut out)?;
    Some(out)
}

fn flatten(abs: Abs, name: String, out: &mut Vec<ParamInfo>) -> Option<()> {
    match abs {
        Abs::Tensor { dtype, shape } => out.push(ParamInfo { name, dtype, shape }),
        Abs::Tuple(items) => {
            for (i, a) in items.into_iter().enumerate() {
                flatten(a, format!("{name}[{i}]"), out)?;
            }
        }
        Abs::Shape(_) | Abs::Unknown => return None,
    }
    Some(())
}

/// What function `fidx` returns, given what its arguments are.
fn returned(program: &Program, fidx: usize, args: &[Abs], depth: usize, budget: &mut usize) -> Abs {
    let exe = program.exe();
    let Some(f) = exe.funcs.get(fidx) else {
        return Abs::Unknown;
    };
    let len = f.end.saturating_sub(f.start);
    if f.kind != FuncKind::Vm || depth > MAX_DEPTH || len > *budget {
        *budget = 0;
        return Abs::Unknown;
    }
    *budget -= len;
    let konst = |a: &Arg| match a {
        Arg::Const(c) => exe.constants.get(*c as usize),
        _ => None,
    };
    let imm = |a: Option<&Arg>| match a {
        Some(Arg::Imm(v)) => Some(*v),
        _ => None,
    };
    // Every value each register is given, in program order; `null_value` frees a register,
    // which gives it no value worth keeping.
    let mut defs: HashMap<u32, Vec<Abs>> = HashMap::new();
    // Names of the shape heap's slots, from the `match_shape` calls that store into them.
    let mut slot_names: HashMap<i64, String> = HashMap::new();
    // A register's value here: what it was given so far (all of it, since branches may have
    // given it different values), else the parameter it holds, else unknown.
    let reg = |defs: &HashMap<u32, Vec<Abs>>, a: &Arg| -> Abs {
        match a {
            Arg::Reg(r) => match defs
                .get(r)
                .and_then(|d| d.iter().cloned().reduce(Abs::merge))
            {
                Some(v) => v,
                None => args.get(*r as usize).cloned().unwrap_or(Abs::Unknown),
            },
            Arg::Const(_) => match konst(a) {
                Some(Value::Tensor(t)) => Abs::Tensor {
                    dtype: Some(t.dtype()),
                    shape: Some(t.shape().iter().map(|&d| Dim::Fixed(d)).collect()),
                },
                Some(Value::Shape(s)) => Abs::Shape(s.iter().map(|&d| Dim::Fixed(d)).collect()),
                _ => Abs::Unknown,
            },
            _ => Abs::Unknown,
        }
    };
    let mut ret: Option<Abs> = None;
    for ins in &exe.instrs[f.start..f.end] {
        let (dst, func, call) = match *ins {
            Instr::Call {
                dst,
                func,
                args,
                nargs,
            } => (dst, func, exe.call_args(args, nargs)),
            Instr::Ret { reg: r } => {
                let v = reg(&defs, &r);
                ret = Some(match ret.take() {
                    Some(prev) => prev.merge(v),
                    None => v,
                });
                continue;
            }
            Instr::Goto { .. } | Instr::If { .. } => continue,
        };
        let value = match program.callees().get(func as usize) {
            Some(Callee::Builtin(b)) => match b {
                Builtin::AllocTensor => {
                    let dtype = match call.get(3).and_then(konst) {
                        Some(Value::DType(d)) => Some(*d),
                        _ => None,
                    };
                    let shape = match call.get(2).map(|a| reg(&defs, a)) {
                        Some(Abs::Shape(dims)) => Some(dims),
                        _ => None,
                    };
                    Abs::Tensor { dtype, shape }
                }
                Builtin::MakeShape => {
                    let n = imm(call.get(1)).unwrap_or(-1);
                    let dims: Option<Vec<Dim>> = (0..n.max(0) as usize)
                        .map(|i| {
                            let (code, v) = (imm(call.get(2 + 2 * i))?, imm(call.get(3 + 2 * i))?);
                            match code {
                                0 => Some(Dim::Fixed(v)),
                                1 => slot_names.get(&v).map(|n| Dim::Var(n.clone())),
                                _ => None,
                            }
                        })
                        .collect();
                    match dims {
                        Some(d) if d.len() as i64 == n => Abs::Shape(d),
                        _ => Abs::Unknown,
                    }
                }
                Builtin::Copy | Builtin::EnsureZeroOffset => {
                    call.first().map_or(Abs::Unknown, |a| reg(&defs, a))
                }
                Builtin::MakeTuple => Abs::Tuple(call.iter().map(|a| reg(&defs, a)).collect()),
                Builtin::Reshape => match (
                    call.first().map(|a| reg(&defs, a)),
                    call.get(1).map(|a| reg(&defs, a)),
                ) {
                    (Some(Abs::Tensor { dtype, .. }), Some(Abs::Shape(dims))) => Abs::Tensor {
                        dtype,
                        shape: Some(dims),
                    },
                    (Some(Abs::Tensor { dtype, .. }), _) => Abs::Tensor { dtype, shape: None },
                    _ => Abs::Unknown,
                },
                Builtin::NullValue => {
                    if let Some(d) = dst {
                        defs.remove(&d);
                    }
                    continue;
                }
                Builtin::CheckTensorInfo => {
                    // A result checked before it is returned: its dtype.
                    if let (Some(Arg::Reg(r)), Some(Value::DType(d))) =
                        (call.first(), call.get(2).and_then(konst))
                    {
                        refine(&mut defs, *r, Some(*d), None);
                    }
                    continue;
                }
                Builtin::MatchShape => {
                    let n = imm(call.get(2)).unwrap_or(-1);
                    let names = match call.last().and_then(konst) {
                        Some(Value::Str(s)) => crate::model::annotation_dims(s),
                        _ => None,
                    }
                    .filter(|d| d.len() as i64 == n);
                    let mut dims = Vec::new();
                    for i in 0..n.max(0) as usize {
                        let (Some(code), Some(v)) =
                            (imm(call.get(3 + 2 * i)), imm(call.get(4 + 2 * i)))
                        else {
                            break;
                        };
                        let name = names.as_ref().map(|n| n[i].clone());
                        if let (1 | 3, Some(name)) = (code, &name) {
                            slot_names.entry(v).or_insert_with(|| name.clone());
                        }
                        dims.push(match code {
                            0 => Some(Dim::Fixed(v)),
                            _ => name.or_else(|| slot_names.get(&v).cloned()).map(Dim::Var),
                        });
                    }
                    if let (Some(Arg::Reg(r)), Some(dims)) =
                        (call.first(), dims.into_iter().collect::<Option<Vec<Dim>>>())
                    {
                        if dims.len() as i64 == n {
                            refine(&mut defs, *r, None, Some(dims));
                        }
                    }
                    continue;
                }
                _ => Abs::Unknown,
            },
            Some(Callee::Vm(g)) => {
                let actual: Vec<Abs> = call.iter().map(|a| reg(&defs, a)).collect();
                returned(program, *g as usize, &actual, depth + 1, budget)
            }
            _ => Abs::Unknown,
        };
        if let Some(d) = dst {
            defs.entry(d).or_default().push(value);
        }
    }
    ret.unwrap_or(Abs::Unknown)
}

/// Add what a check says of register `r` to the latest value it was given (a parameter that
/// was never reassigned is described already).
fn refine(
    defs: &mut HashMap<u32, Vec<Abs>>,
    r: u32,
    dtype: Option<DType>,
    shape: Option<Vec<Dim>>,
) {
    let Some(last) = defs.get_mut(&r).and_then(|d| d.last_mut()) else {
        return;
    };
    match last {
        Abs::Tensor { dtype: d, shape: s } => {
            if dtype.is_some() {
                *d = dtype;
            }
            if shape.is_some() {
                *s = shape;
            }
        }
        Abs::Unknown => {
            *last = Abs::Tensor { dtype, shape };
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::fuzzing::craft::{self, Arg, Entry, Instr};
    use crate::{LoadOptions, Model};

    fn outputs_of(file: &[u8]) -> Option<Vec<(String, bool, bool)>> {
        let model = Model::load_from_memory_with(file, LoadOptions::default().code_free(true))
            .expect("a crafted model loads");
        let info = model.function_info("main").expect("main is described");
        info.outputs.map(|o| {
            o.into_iter()
                .map(|p| (p.name, p.dtype.is_some(), p.shape.is_some()))
                .collect()
        })
    }

    fn main_of(params: usize, registers: i64, code: Vec<Instr>) -> Entry {
        Entry::Vm {
            name: "main".into(),
            params: (0..params).map(|i| format!("p{i}")).collect(),
            registers,
            code,
        }
    }

    /// `main(p0)` returning `builtin(args...)`.
    fn returning_builtin(builtin: &str, args: Vec<Arg>) -> Vec<u8> {
        let call = Instr::Call {
            dst: 1,
            func: 1,
            args,
        };
        craft::model(&[
            main_of(1, 2, vec![call, Instr::Ret { reg: 1 }]),
            Entry::Packed(builtin.into()),
        ])
    }

    #[test]
    fn a_returned_parameter_a_tuple_and_unknown_results() {
        // The parameter itself: one output, nothing known of it (main checks nothing).
        let file = craft::model(&[main_of(1, 1, vec![Instr::Ret { reg: 0 }])]);
        assert_eq!(
            outputs_of(&file),
            Some(vec![("output".into(), false, false)])
        );
        // A tuple of it twice: two outputs, flattened.
        let file = returning_builtin("vm.builtin.make_tuple", vec![Arg::Reg(0), Arg::Reg(0)]);
        assert_eq!(
            outputs_of(&file),
            Some(vec![
                ("output[0]".into(), false, false),
                ("output[1]".into(), false, false)
            ])
        );
        // An element taken out of a tuple: not even the number of outputs is known.
        let file = returning_builtin("vm.builtin.tuple_getitem", vec![Arg::Reg(0), Arg::Imm(0)]);
        assert_eq!(outputs_of(&file), None);
        // No `ret` reached (an endless loop), and a function that only calls itself.
        assert_eq!(outputs_of(&craft::endless_loop()), None);
        assert_eq!(outputs_of(&craft::self_recursion(4)), None);
    }

    /// Eight levels of functions each calling the next 1,000 times: following every call
    /// would look at 10^24 instructions; the walk stops at its budget and answers `None`.
    #[test]
    fn calls_fanning_out_stop_at_the_budget() {
        let mut table = Vec::new();
        for level in 0..8i64 {
            let mut code: Vec<Instr> = (0..1000)
                .map(|_| Instr::Call {
                    dst: 1,
                    func: level + 1,
                    args: vec![Arg::Reg(0)],
                })
                .collect();
            code.push(Instr::Ret { reg: 1 });
            table.push(Entry::Vm {
                name: if level == 0 {
                    "main".into()
                } else {
                    format!("f{level}")
                },
                params: vec!["x".into()],
                registers: 2,
                code,
            });
        }
        table.push(Entry::Vm {
            name: "f8".into(),
            params: vec!["x".into()],
            registers: 1,
            code: vec![Instr::Ret { reg: 0 }],
        });
        assert_eq!(outputs_of(&craft::model(&table)), None);
    }
}
