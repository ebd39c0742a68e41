//! Symbolic dimensions (`docs/subgraph-format.md`, version 3): a description whose tensor
//! shapes name a dimension instead of giving its size (`"shape": [1, "seq", 256]`), bound per
//! call from the shapes of the input tensors the VM passes.
//!
//! Nothing downstream of parsing sees a symbol: [`Symbolic::instantiate`] writes the bound
//! sizes into the description and parses the result as any fixed-shape description, with every
//! check [`Graph::parse`] makes, before a backend prepares it. At load the description is
//! parsed twice that way, once with every symbol 1 and once with distinct primes, so a
//! description that cannot be valid for both is refused when the model loads, not at its first
//! call.

use std::collections::HashMap;

use serde_json::Value as Json;

use super::format::Graph;
use crate::error::{Error, Result};

/// Most symbols one description may name.
pub const MAX_SYMBOLS: usize = 16;

/// Longest symbol name, in bytes.
pub const MAX_SYMBOL_LEN: usize = 64;

/// Largest size a symbol may be bound to (the format's largest dimension).
pub const MAX_SYMBOL_VALUE: i64 = 1 << 31;

/// The first format version with symbolic dimensions.
pub const SYMBOLIC_VERSION: i64 = 3;

/// Distinct sizes the load-time check binds the symbols to (one each, in order of appearance).
const SAMPLE: [i64; MAX_SYMBOLS] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53];

/// One dimension of an input's shape in a symbolic description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dim {
    Fixed(i64),
    /// Index into [`Symbolic::names`].
    Symbol(usize),
}

/// The symbolic dimensions of a version-3 description, and how a call binds them.
#[derive(Debug)]
pub struct Symbolic {
    /// The description as written.
    json: Json,
    /// What errors name it by (the description's name, as [`Graph::name`] reports it).
    name: String,
    /// Symbol names, in order of first appearance among the tensors.
    pub names: Vec<String>,
    /// Each input's shape (in the order of the description's `inputs`).
    inputs: Vec<Vec<Dim>>,
}

/// Parse a description that may have symbolic dimensions: the graph (with every symbol bound to
/// a sample size when it has some, for what does not depend on sizes: counts, names, dtypes,
/// ops), and the symbols to bind per call.
pub fn parse(text: &str, context: &str) -> Result<(Graph, Option<Symbolic>)> {
    let json: Json = serde_json::from_str(text).map_err(|e| Error::Subgraph {
        subgraph: context.to_string(),
        node: None,
        message: format!("the description is not valid JSON: {e}"),
    })?;
    let names = symbol_names(&json).map_err(|m| Error::Subgraph {
        subgraph: context.to_string(),
        node: None,
        message: m,
    })?;
    if names.is_empty() {
        return Ok((Graph::from_json(&json, context)?, None));
    }
    let version = json.get("version").and_then(Json::as_i64).unwrap_or(0);
    if version < SYMBOLIC_VERSION {
        return Err(Error::Subgraph {
            subgraph: context.to_string(),
            node: None,
            message: format!(
                "symbolic dimension `{}` needs subgraph format version {SYMBOLIC_VERSION}; this description says version {version}",
                names[0]
            ),
        });
    }
    let tensors = json.get("tensors").and_then(Json::as_array);
    let shape_of = |t: &Json| -> Vec<Dim> {
        let dims = t
            .as_u64()
            .and_then(|t| tensors.and_then(|ts| ts.get(t as usize)))
            .and_then(|v| v.get("shape"))
            .and_then(Json::as_array);
        dims.map(|ds| {
            ds.iter()
                .map(|d| match d.as_str() {
                    Some(s) => Dim::Symbol(names.iter().position(|n| n == s).unwrap_or(0)),
                    None => Dim::Fixed(d.as_i64().unwrap_or(0)),
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let list = |key: &str| -> Vec<Json> {
        json.get(key)
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let bad = |message: String| Error::Subgraph {
        subgraph: context.to_string(),
        node: None,
        message,
    };
    for (k, t) in list("constants").iter().enumerate() {
        if let Some(Dim::Symbol(s)) = shape_of(t)
            .into_iter()
            .find(|d| matches!(d, Dim::Symbol(_)))
        {
            return Err(bad(format!(
                "constant {k} (tensor {t}) has symbolic dimension `{}`; constants have fixed shapes",
                names[s]
            )));
        }
    }
    let ones = vec![1; names.len()];
    bound_graph(&json, &names, &ones, context, " (a size checked at load)")?;
    let inputs: Vec<Vec<Dim>> = list("inputs").iter().map(shape_of).collect();
    for (s, n) in names.iter().enumerate() {
        if !inputs.iter().flatten().any(|&d| d == Dim::Symbol(s)) {
            return Err(bad(format!(
                "symbolic dimension `{n}` is in no input's shape, so no call can give its size"
            )));
        }
    }
    // Structure, ops and shapes checked at two bindings: all ones above (before the input check
    // reads indices from the description), the sample one here, kept.
    let sample = SAMPLE[..names.len()].to_vec();
    let graph = bound_graph(&json, &names, &sample, context, " (sizes checked at load)")?;
    let name = graph.name.clone();
    Ok((
        graph,
        Some(Symbolic {
            json,
            name,
            names,
            inputs,
        }),
    ))
}

impl Symbolic {
    /// The size of every symbol (in the order of [`Symbolic::names`]) given the shapes of the
    /// call's inputs; an error when an input's rank or a fixed dimension differs from the
    /// description, or two inputs give one symbol different sizes.
    pub fn bind(&self, shapes: &[&[i64]]) -> Result<Vec<i64>> {
        let bad = |message: String| Error::Subgraph {
            subgraph: self.name.clone(),
            node: None,
            message,
        };
        if shapes.len() != self.inputs.len() {
            return Err(bad(format!(
                "{} inputs given, the description has {}",
                shapes.len(),
                self.inputs.len()
            )));
        }
        let mut values: Vec<Option<(i64, usize)>> = vec![None; self.names.len()];
        for (k, (shape, dims)) in shapes.iter().zip(&self.inputs).enumerate() {
            if shape.len() != dims.len() {
                return Err(bad(format!(
                    "input {k} has shape {shape:?}, the description says {}",
                    self.show(dims)
                )));
            }
            for (&x, &d) in shape.iter().zip(dims) {
                match d {
                    Dim::Fixed(v) if v != x => {
                        return Err(bad(format!(
                            "input {k} has shape {shape:?}, the description says {}",
                            self.show(dims)
                        )))
                    }
                    Dim::Fixed(_) => {}
                    Dim::Symbol(s) => {
                        let n = &self.names[s];
                        if !(1..=MAX_SYMBOL_VALUE).contains(&x) {
                            return Err(bad(format!(
                                "input {k} has shape {shape:?}: symbolic dimension `{n}` is {x}, \
                                 and an offloaded region takes sizes from 1 to {MAX_SYMBOL_VALUE}"
                            )));
                        }
                        match values[s] {
                            Some((v, j)) if v != x => {
                                return Err(bad(format!(
                                "symbolic dimension `{n}` is {v} in input {j} but {x} in input {k}"
                            )))
                            }
                            Some(_) => {}
                            None => values[s] = Some((x, k)),
                        }
                    }
                }
            }
        }
        // Every symbol is in some input's shape (checked at parse), so every one is bound.
        values
            .into_iter()
            .zip(&self.names)
            .map(|(v, n)| {
                v.map(|(x, _)| x)
                    .ok_or_else(|| bad(format!("symbolic dimension `{n}` is not bound")))
            })
            .collect()
    }

    /// The description with the symbols at `values`, parsed and checked in full.
    pub fn instantiate(&self, values: &[i64]) -> Result<Graph> {
        if values.len() != self.names.len() {
            return Err(Error::Subgraph {
                subgraph: self.name.clone(),
                node: None,
                message: format!(
                    "{} sizes given for {} symbolic dimensions",
                    values.len(),
                    self.names.len()
                ),
            });
        }
        // The graph keeps the description's name; errors say which binding failed.
        let name = self
            .json
            .get("name")
            .and_then(Json::as_str)
            .unwrap_or(&self.name);
        bound_graph(&self.json, &self.names, values, name, "")
    }

    fn show(&self, dims: &[Dim]) -> String {
        let parts: Vec<String> = dims
            .iter()
            .map(|d| match *d {
                Dim::Fixed(v) => v.to_string(),
                Dim::Symbol(s) => self.names[s].clone(),
            })
            .collect();
        format!("[{}]", parts.join(", "))
    }
}

/// `json` with the symbols at `values`, parsed and checked; an error says the binding
/// (`why` after it: what the sizes are).
fn bound_graph(
    json: &Json,
    names: &[String],
    values: &[i64],
    context: &str,
    why: &str,
) -> Result<Graph> {
    Graph::from_json(&substitute(json, names, values), context).map_err(|e| match e {
        Error::Subgraph {
            subgraph,
            node,
            message,
        } => {
            let binding: Vec<String> = names
                .iter()
                .zip(values)
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            Error::Subgraph {
                subgraph,
                node,
                message: format!("with {}{why}: {message}", binding.join(", ")),
            }
        }
        other => other,
    })
}

/// The symbol names the description's tensor shapes use, in order of first appearance; an error
/// for a name the format does not allow or too many of them.
fn symbol_names(json: &Json) -> std::result::Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    let Some(tensors) = json.get("tensors").and_then(Json::as_array) else {
        return Ok(names); // `Graph::from_json` says what is wrong
    };
    for (t, v) in tensors.iter().enumerate() {
        let Some(dims) = v.get("shape").and_then(Json::as_array) else {
            continue;
        };
        for d in dims.iter().filter_map(Json::as_str) {
            if !valid_name(d) {
                let shown: String = d.chars().take(MAX_SYMBOL_LEN).collect();
                return Err(format!(
                    "tensor {t}: symbolic dimension {shown:?} is not a name (letters, digits and \
                     `_`, not starting with a digit, at most {MAX_SYMBOL_LEN} bytes)"
                ));
            }
            if !names.iter().any(|n| n == d) {
                if names.len() == MAX_SYMBOLS {
                    return Err(format!(
                        "more than {MAX_SYMBOLS} symbolic dimensions (tensor {t} adds `{d}`)"
                    ));
                }
                names.push(d.to_string());
            }
        }
    }
    Ok(names)
}

fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_SYMBOL_LEN
        && !b[0].is_ascii_digit()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// `json` with every symbolic dimension of its tensors replaced by its value.
fn substitute(json: &Json, names: &[String], values: &[i64]) -> Json {
    let at: HashMap<&str, i64> = names
        .iter()
        .map(String::as_str)
        .zip(values.iter().copied())
        .collect();
    let mut out = json.clone();
    if let Some(tensors) = out.get_mut("tensors").and_then(Json::as_array_mut) {
        for t in tensors {
            if let Some(dims) = t.get_mut("shape").and_then(Json::as_array_mut) {
                for d in dims {
                    if let Some(v) = d.as_str().and_then(|s| at.get(s)) {
                        *d = Json::from(*v);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload::executor::MAX_BINDINGS;
    use crate::offload::{SubgraphRunner, CPU};
    use crate::Tensor;

    /// dense(+bias, relu) -> softmax -> reshape over `[1, seq, 8]`, and an `add` of two inputs
    /// that must agree on `seq`.
    fn desc(version: i64) -> String {
        format!(
            r#"{{"format":"mote.subgraph","version":{version},"name":"dyn",
            "tensors":[{{"shape":[1,"seq",8],"dtype":"float32"}},{{"shape":[1,"seq",8],"dtype":"float32"}},
              {{"shape":[4,8],"dtype":"float32"}},{{"shape":[4],"dtype":"float32"}},
              {{"shape":[1,"seq",8],"dtype":"float32"}},{{"shape":[1,"seq",4],"dtype":"float32"}},
              {{"shape":[1,"seq",4],"dtype":"float32"}},{{"shape":["seq",4],"dtype":"float32"}}],
            "inputs":[0,1],"constants":[2,3],"outputs":[7],
            "nodes":[{{"op":"add","name":"a","inputs":[0,1],"outputs":[4]}},
              {{"op":"dense","name":"d","inputs":[4,2,3],"outputs":[5],"attrs":{{"activation":"relu"}}}},
              {{"op":"softmax","name":"s","inputs":[5],"outputs":[6],"attrs":{{"axis":-1}}}},
              {{"op":"reshape","name":"r","inputs":[6],"outputs":[7]}}]}}"#
        )
    }

    fn weights() -> (Vec<f32>, Vec<f32>) {
        let w = (0..32).map(|i| ((i * 7 % 11) as f32 - 5.0) / 8.0).collect();
        let b = vec![0.1, -0.2, 0.3, 0.0];
        (w, b)
    }

    fn reference(x: &[f32], y: &[f32], seq: usize) -> Vec<f64> {
        let (w, b) = weights();
        let mut out = Vec::new();
        for r in 0..seq {
            let h: Vec<f64> = (0..4)
                .map(|n| {
                    let s: f64 = (0..8)
                        .map(|k| (x[r * 8 + k] as f64 + y[r * 8 + k] as f64) * w[n * 8 + k] as f64)
                        .sum::<f64>()
                        + b[n] as f64;
                    s.max(0.0)
                })
                .collect();
            let m = h.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = h.iter().map(|v| (v - m).exp()).collect();
            let z: f64 = e.iter().sum();
            out.extend(e.iter().map(|v| v / z));
        }
        out
    }

    fn runner() -> SubgraphRunner {
        let (w, b) = weights();
        SubgraphRunner::new(
            &desc(3),
            vec![
                Tensor::from_slice(&[4, 8], &w).unwrap(),
                Tensor::from_slice(&[4], &b).unwrap(),
            ],
        )
        .expect("a version-3 description parses")
    }

    fn input(seq: usize, seed: usize) -> Vec<f32> {
        (0..seq * 8)
            .map(|i| (((i + seed) * 37 % 29) as f32 - 14.0) / 7.0)
            .collect()
    }

    #[test]
    fn one_description_runs_at_every_length_it_is_called_with() {
        let r = runner();
        assert_eq!(r.symbols(), ["seq"]);
        // Lengths in an order that comes back to earlier ones (prepared executors reused).
        for seq in [1usize, 5, 2, 17, 5, 1, 64] {
            run_checked(&r, seq, (input(seq, 1), input(seq, 2)), "");
        }
    }

    /// Run `r` at length `seq` on inputs `x`, `y` and compare with [`reference`].
    fn run_checked(r: &SubgraphRunner, seq: usize, (x, y): (Vec<f32>, Vec<f32>), who: &str) {
        let s = seq as i64;
        let out = r
            .run(
                &[CPU.to_string()],
                &[
                    Tensor::from_slice(&[1, s, 8], &x).unwrap(),
                    Tensor::from_slice(&[1, s, 8], &y).unwrap(),
                ],
            )
            .expect("runs");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].shape(), [s, 4], "{who}seq {seq}");
        let got = out[0].as_slice::<f32>().unwrap();
        let want = reference(&x, &y, seq);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (*g as f64 - w).abs() <= 1e-5,
                "{who}seq {seq}, element {i}: {g} vs {w}"
            );
        }
    }

    /// Threads calling one description at more lengths than stay prepared: bindings are
    /// prepared, shared and dropped while other threads run them, and every output is checked.
    #[test]
    fn threads_at_many_lengths_share_and_evict_bindings() {
        let r = runner();
        std::thread::scope(|s| {
            for t in 0..4usize {
                let r = &r;
                s.spawn(move || {
                    for i in 0..40usize {
                        let seq = 1 + (i * 7 + t * 3) % (MAX_BINDINGS + 5);
                        let xy = (input(seq, t + i), input(seq, 3 * i));
                        run_checked(r, seq, xy, &format!("thread {t}, "));
                    }
                });
            }
        });
    }

    /// A new length prepares the region again, but the dense weight is read and packed once
    /// per form for the whole call site, not once per length.
    #[test]
    fn lengths_share_the_packed_weight() {
        let r = runner();
        let run = |seq: usize| run_checked(&r, seq, (vec![0.0; seq * 8], input(seq, 5)), "");
        // Enough rows for the packed GEMM at any thread count of the test pool.
        for seq in [64, 65, 70] {
            run(seq);
        }
        let packed_only = r.site().forms().kept();
        // One row: the column split's transposed form joins it.
        run(1);
        let both = r.site().forms().kept();
        let order = crate::offload::resolve(&[CPU.to_string()]);
        assert_eq!(r.site().bindings_held(&order), 4);
        // (At a level without the packed GEMM its form is an empty one, also kept.)
        assert_eq!(packed_only, [(0, "dense.packed")]);
        assert_eq!(both, [(0, "dense.packed"), (0, "dense.transposed")]);
    }

    #[test]
    fn at_most_max_bindings_stay_prepared() {
        let r = runner();
        let order = crate::offload::resolve(&[CPU.to_string()]);
        for seq in 1..=(MAX_BINDINGS as i64 + 3) {
            let x = Tensor::zeros(&[1, seq, 8], crate::DType::F32).unwrap();
            r.run(&[CPU.to_string()], &[x.clone(), x]).expect("runs");
            let held = r.site().bindings_held(&order);
            assert_eq!(held, (seq as usize).min(MAX_BINDINGS), "after seq {seq}");
        }
    }

    #[test]
    fn calls_that_do_not_fit_the_symbols_are_refused_by_name() {
        let r = runner();
        let run = |a: &[i64], b: &[i64]| {
            let x = Tensor::zeros(a, crate::DType::F32).unwrap();
            let y = Tensor::zeros(b, crate::DType::F32).unwrap();
            r.run(&[CPU.to_string()], &[x, y])
                .expect_err("refused")
                .to_string()
        };
        let e = run(&[1, 3, 8], &[1, 4, 8]);
        assert!(e.contains("`seq` is 3 in input 0 but 4 in input 1"), "{e}");
        let e = run(&[1, 3, 7], &[1, 3, 8]);
        assert!(
            e.contains("input 0 has shape [1, 3, 7], the description says [1, seq, 8]"),
            "{e}"
        );
        let e = run(&[3, 8], &[1, 3, 8]);
        assert!(e.contains("input 0 has shape [3, 8]"), "{e}");
        let e = run(&[1, 0, 8], &[1, 0, 8]);
        assert!(e.contains("`seq` is 0"), "{e}");
        let sym = parse(&desc(3), "t").unwrap().1.unwrap();
        let e = sym.instantiate(&[2, 3]).unwrap_err().to_string();
        assert!(e.contains("2 sizes given for 1 symbolic dimensions"), "{e}");
    }

    #[test]
    fn descriptions_with_symbols_the_format_does_not_allow_are_refused() {
        let refused = |text: String, want: &str| {
            let e = parse(&text, "t").expect_err(want).to_string();
            assert!(e.contains(want), "{e} (wanted {want:?})");
        };
        refused(desc(2), "needs subgraph format version 3");
        for bad in ["1seq", "se-q", "", "s e"] {
            refused(
                desc(3).replace("\"seq\"", &format!("{bad:?}")),
                "is not a name",
            );
        }
        refused(
            desc(3).replace("\"seq\"", &format!("{:?}", "s".repeat(65))),
            "is not a name",
        );
        assert!(parse(
            &desc(3).replace("\"seq\"", &format!("{:?}", "s".repeat(64))),
            "t"
        )
        .is_ok());
        // A constant with a symbolic dimension.
        refused(
            desc(3).replace(
                r#"{"shape":[4],"dtype":"float32"}"#,
                r#"{"shape":["seq"],"dtype":"float32"}"#,
            ),
            "constants have fixed shapes",
        );
        // A symbol only the output has.
        refused(
            desc(3).replace(r#"{"shape":["seq",4]"#, r#"{"shape":["len",4]"#),
            "`len` is in no input's shape",
        );
        // A structural defect is named as such, before the checks that read the symbols'
        // places: input indices out of range (so `seq` is also in no input's shape).
        refused(
            desc(3).replace(r#""inputs":[0,1]"#, r#""inputs":[40,41]"#),
            "tensor index 40 out of range",
        );
        // Two symbols that must be equal for `add` to be valid: refused at load (at distinct
        // sample sizes), not at the first call.
        refused(
            desc(3).replacen(
                r#"{"shape":[1,"seq",8],"dtype":"float32"},{"shape":[1,"seq",8]"#,
                r#"{"shape":[1,"seq",8],"dtype":"float32"},{"shape":[1,"other",8]"#,
                1,
            ),
            "with seq=2, other=3 (sizes checked at load): [1, 2, 8] and [1, 3, 8] do not broadcast",
        );
        let many: Vec<String> = (0..=MAX_SYMBOLS)
            .map(|i| format!(r#"{{"shape":["s{i}"],"dtype":"float32"}}"#))
            .collect();
        refused(
            format!(
                r#"{{"format":"mote.subgraph","version":3,"tensors":[{}],"inputs":[],"constants":[],"outputs":[],"nodes":[]}}"#,
                many.join(",")
            ),
            "more than 16 symbolic dimensions",
        );
    }

    #[test]
    fn a_description_without_symbols_parses_as_before() {
        let fixed = desc(1).replace("\"seq\"", "3");
        let (g, sym) = parse(&fixed, "t").unwrap();
        assert!(sym.is_none());
        assert_eq!(g, Graph::parse(&fixed, "t").unwrap());
    }
}
