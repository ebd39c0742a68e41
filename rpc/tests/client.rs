//! TVM 0.27's own Python RPC client, unchanged, against Mote's server started in-process.
//! Needs MOTE_PYTHON (the TVM venv's python) and MOTE_ZOO_DIR (the x86_64 zoo); see
//! scripts/test-rpc.sh.

mod common;
