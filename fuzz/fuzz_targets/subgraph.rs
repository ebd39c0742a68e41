//! Subgraph descriptions (`mote::subgraph::Graph::parse`). One that parses, and whose tensors
//! are small, also runs on the `cpu` backend on zero inputs and constants: the kernels trust
//! only what the parser checked, so this must not panic either.
#![no_main]

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

/// Total tensor bytes above which a parsed description is not run (the budget is per input
/// byte; a 100-byte description may describe gigabytes, which is not an error).
const RUN_LIMIT: usize = 1 << 18;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(g) = mote_fuzz::with_budget(data, |_| mote::subgraph::Graph::parse(text, "fuzz")) else {
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
    if let Ok(runner) = mote::backend::SubgraphRunner::new(text, consts) {
        let _ = runner.run(&["cpu".to_string()], &inputs);
    }
});
