//! Print the Java source of `org.mote.NativeBridge`, generated from `src/natives.rs`
//! (`scripts/java-natives.sh` writes it into the Maven project or checks it there).

fn main() {
    let src = include_str!("../natives.rs");
    match mote_java::gen::java_source(src) {
        Ok(java) => print!("{java}"),
        Err(e) => {
            eprintln!("java-natives: {e}");
            std::process::exit(1);
        }
    }
}
