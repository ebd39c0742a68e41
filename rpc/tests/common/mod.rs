//! Helpers shared by the RPC tests.
