//! Runs a listen-mode server until killed: `cargo run -p mote-rpc --example serve -- PORT`.
fn main() {
    let port = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(9090);
    let server = match mote_rpc::Server::builder().port(port).spawn() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start: {e}");
            std::process::exit(1);
        }
    };
    println!("listening on {}", server.local_addr());
    server.wait();
}
