//! `mote-rpc`: a server for TVM 0.27's RPC protocol, so that TVM's own unchanged Python client
//! (`tvm.rpc.connect`, `remote.load_module`, `relax.VirtualMachine`, `time_evaluator`) runs
//! models on Mote, and a client of the same protocol ([`client::Client`]) for the Java
//! bindings' RPC client. The protocol subset, limits and threat model are in `docs/rpc.md`.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod background;
mod chain;
pub mod client;
mod interrupt;
mod link;
pub mod proxy;
mod sandbox;
mod session;
pub mod slots;
mod state;
mod timer;
pub mod tracker;
pub mod wire;

pub use session::{
    serve_connection, serve_session, ExactKey, KeyMatcher, Limits, RequestError, SessionConfig,
    SessionEnd,
};
mod server;

pub use client::{Client, ClientError, ClientOptions, RemoteRef, RemoteTensor, Value};

pub use server::{
    Mode, Server, ServerBuilder, ServerHandle, ServerStats, DEFAULT_MAX_SESSIONS,
    DEFAULT_TRACKER_SESSIONS,
};
