//! Subgraph descriptions (`mote::subgraph::Graph::parse_symbolic`: fixed shapes, and symbolic ones of
//! version 3 bound to the load-time sample sizes). One that parses, and whose tensors are small,
//! also runs on the `cpu` backend on zero inputs and constants, as a session of 1
//! and of 2 threads runs an offloaded region (`mote::fuzzing::run_subgraph`): the kernels
//! trust only what the parser checked and split their loops by the pool's size, so neither
//! run may panic. Parsing is held to the input's allocation budget, each run to
//! [`RUN_HEAP`] (docs/fuzzing.md, "Memory").
#![no_main]

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

/// Total tensor bytes above which a parsed description is not run (the budget is per input
/// byte; a 100-byte description may describe gigabytes, which is not an error).
const RUN_LIMIT: usize = 1 << 18;

/// Live heap one run may add: 256 times the most tensor bytes a run may describe, for the
/// outputs, the scratch arena, a relayout of the constants and the kernels' packed forms.
const RUN_HEAP: usize = 256 * RUN_LIMIT;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A symbolic description's graph is bound to the sample sizes; the run binds its inputs'
    // shapes again, through the same path as a model's call.
    let Ok((g, _)) = mote_fuzz::with_budget(data, |_| {
        mote::subgraph::Graph::parse_symbolic(text, "fuzz")
    }) else {
        return;
    };
    let total: usize = g.tensors.iter().map(|t| t.byte_len()).sum();
    if total > RUN_LIMIT {
        return;
    }
    let zeros = |t: &usize| {
        let d = &g.tensors[*t];
        mote::Tensor::zeros(&d.shape, d.dtype)
    };
    let (Ok(consts), Ok(inputs)) = (
        g.constants.iter().map(zeros).collect::<Result<Vec<_>, _>>(),
        g.inputs.iter().map(zeros).collect::<Result<Vec<_>, _>>(),
    ) else {
        return;
    };
    let run = |threads| {
        mote_fuzz::with_limit(RUN_HEAP, || {
            mote::fuzzing::run_subgraph(text, consts.clone(), &inputs, threads)
        })
    };
    // Parsing, checks and preparation do not depend on the pool: both runs fail alike or not.
    let (one, two) = (run(1), run(2));
    assert_eq!(
        one.as_ref().err().map(mote::Error::code),
        two.as_ref().err().map(mote::Error::code),
        "1 thread: {:?}; 2 threads: {:?}",
        one.as_ref().err(),
        two.as_ref().err()
    );
});
