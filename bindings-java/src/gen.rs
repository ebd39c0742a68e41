//! The generator of the natives classes `org.mote.NativeBridge` and `org.mote.rpc.RpcBridge`,
//! and of the test-only `org.mote.TestHooks` (see `src/bin/java-natives.rs`).

/// One generated class: where its JNI entries live and what else it holds.
pub struct Bridge {
    /// The Java package.
    pub package: &'static str,
    /// The class's simple name.
    pub class: &'static str,
    /// Its Javadoc sentence.
    pub doc: &'static str,
    /// The Java statement of its static initialiser that loads the library.
    pub load: &'static str,
    /// The Rust file (under `bindings-java/src/`) holding its entries.
    pub source: &'static str,
    /// `static final int` constants, in order.
    pub constants: Vec<(String, i32)>,
}

impl Bridge {
    /// `org.mote.NativeBridge`: every entry of `src/natives.rs`, and the value tags.
    pub fn core() -> Bridge {
        Bridge {
            package: "org.mote",
            class: "NativeBridge",
            doc:
                "The native methods of libmote_java, one per JNI entry of the Rust crate mote-java.",
            load: "NativeLoader.load();",
            source: "natives.rs",
            constants: crate::natives::TAGS
                .iter()
                .map(|(name, tag)| (format!("TAG_{name}"), *tag as i32))
                .collect(),
        }
    }

    /// `org.mote.rpc.RpcBridge`: the RPC server's entries of `src/rpc.rs`, its modes and the
    /// layout of a state snapshot. Like [`Bridge::test_hooks`], it is generated from the source
    /// text, so any build of the generator writes it, with the `rpc` feature or without (the
    /// constants come from `rpc_layout`, which is always compiled).
    pub fn rpc() -> Bridge {
        Bridge {
            package: "org.mote.rpc",
            class: "RpcBridge",
            doc: "The native methods of org.mote.rpc.Server, one per JNI entry of mote-java's rpc module (present only in a library built with the rpc feature).",
            load: "org.mote.Mote.load();",
            source: "rpc.rs",
            constants: crate::rpc_layout::constants()
                .into_iter()
                .map(|(name, v)| (name.to_string(), v))
                .collect(),
        }
    }

    /// `org.mote.TestHooks`: the test-only entries of `src/test_hooks.rs` (the `test-hooks`
    /// feature), generated into the Maven project's test sources.
    pub fn test_hooks() -> Bridge {
        Bridge {
            package: "org.mote",
            class: "TestHooks",
            doc: "Test-only native methods of libmote_java, built with mote-java's test-hooks feature.",
            load: "NativeLoader.load();",
            source: "test_hooks.rs",
            constants: Vec::new(),
        }
    }

    /// The Java class name, dotted.
    pub fn name(&self) -> String {
        format!("{}.{}", self.package, self.class)
    }

    fn prefix(&self) -> String {
        format!(
            "pub extern \"system\" fn Java_{}_{}_",
            self.package.replace('.', "_"),
            self.class
        )
    }
}

/// The Java source of `bridge` from the Rust source of its entries: each
/// `/// java: <declaration>` line must be followed, before the next such line, by the
/// `Java_<package>_<class>_<name>` function the declaration names; every such function must
/// have one, and the file holds no entry of another class.
pub fn java_source(bridge: &Bridge, rust: &str) -> Result<String, String> {
    let prefix = bridge.prefix();
    let mut decls: Vec<String> = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (no, line) in rust.lines().enumerate() {
        let t = line.trim();
        if let Some(decl) = t.strip_prefix("/// java:") {
            if let Some((at, d)) = &pending {
                return Err(format!(
                    "line {}: `{d}` has no function before line {}",
                    at + 1,
                    no + 1
                ));
            }
            pending = Some((no, decl.trim().to_string()));
        } else if let Some(rest) = t.strip_prefix(prefix.as_str()) {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let Some((_, decl)) = pending.take() else {
                return Err(format!(
                    "line {}: Java_..._{name} has no `/// java:` line",
                    no + 1
                ));
            };
            if !decl.contains(&format!(" {name}(")) {
                return Err(format!(
                    "line {}: `{decl}` does not declare `{name}`",
                    no + 1
                ));
            }
            if !decl.starts_with("static native ") || !decl.ends_with(");") {
                return Err(format!(
                    "line {}: `{decl}` is not `static native ...;`",
                    no + 1
                ));
            }
            decls.push(decl);
        } else if t.starts_with("pub extern \"system\" fn Java_") {
            return Err(format!(
                "line {}: an entry of another class than {}",
                no + 1,
                bridge.name()
            ));
        }
    }
    if let Some((at, d)) = pending {
        return Err(format!("line {}: `{d}` has no function", at + 1));
    }
    let mut out = format!(
        "// GENERATED by scripts/java-natives.sh from bindings-java/src/{}: do not edit.\n\
         package {};\n\n\
         /** {} */\n\
         final class {} {{\n\
         \x20   private {}() {{}}\n\n\
         \x20   static {{\n\
         \x20       {}\n\
         \x20   }}\n\n",
        bridge.source, bridge.package, bridge.doc, bridge.class, bridge.class, bridge.load
    );
    for (name, v) in &bridge.constants {
        out.push_str(&format!("    static final int {name} = {v};\n"));
    }
    if !bridge.constants.is_empty() {
        out.push('\n');
    }
    for d in &decls {
        out.push_str("    ");
        out.push_str(d);
        out.push('\n');
    }
    out.push_str("}\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_match_functions() {
        let ok = "/// java: static native long a(int x);\npub extern \"system\" fn Java_org_mote_NativeBridge_a<'l>(";
        let b = Bridge::core();
        assert!(java_source(&b, ok)
            .unwrap()
            .contains("    static native long a(int x);\n"));
        let wrong = "/// java: static native long b(int x);\npub extern \"system\" fn Java_org_mote_NativeBridge_a(";
        assert!(java_source(&b, wrong).is_err());
        let missing = "pub extern \"system\" fn Java_org_mote_NativeBridge_a(";
        assert!(java_source(&b, missing).is_err());
        let other = "/// java: static native long a(int x);\npub extern \"system\" fn Java_org_mote_rpc_RpcBridge_a(";
        assert!(java_source(&b, other).is_err());
    }

    #[test]
    fn the_crate_generates() {
        let src = include_str!("natives.rs");
        let java = java_source(&Bridge::core(), src).unwrap();
        assert!(java.matches("static native").count() >= 40);
        let rpc = java_source(&Bridge::rpc(), include_str!("rpc.rs")).unwrap();
        assert!(rpc.starts_with("// GENERATED") && rpc.contains("package org.mote.rpc;"));
        assert!(rpc.matches("static native").count() >= 4);
        // OpenCL's status is the inference library's too (the build without `rpc`).
        assert!(java.contains("    static native String openclStatus();\n"));
        assert!(!rpc.contains("openclStatus"));
        let hooks = java_source(&Bridge::test_hooks(), include_str!("test_hooks.rs")).unwrap();
        assert!(hooks.contains("final class TestHooks {"));
        assert!(hooks.contains("    static native void panicForTest(String message);\n"));
        assert!(
            !java.contains("panicForTest"),
            "a test hook in NativeBridge"
        );
    }
}
