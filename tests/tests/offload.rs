//! Every model of the offload zoo (models partitioned by `mote_tvm`, whose regions are
//! `mote.subgraph` calls) runs through Mote's backends and matches TVM's unpartitioned model.
//!
//! The zoo comes from `python/offload_zoo.py` (via `scripts/offload-zoo.sh`); its folder is
//! `MOTE_OFFLOAD_ZOO_DIR`, with the manifest schema of `python/zoo.py`. Tests never skip.
//! No plug-in is loaded in this test binary, so "the default backends" are the shipped ones;
//! the plug-in runs are in `offload_plugins.rs`, a process of their own.

use mote_tests::offload_zoo::run_all;

#[test]
fn offload_zoo_matches_tvm_with_default_backends() {
    run_all(&[]);
}

#[test]
fn offload_zoo_matches_tvm_on_the_cpu_backend() {
    run_all(&["cpu"]);
}
