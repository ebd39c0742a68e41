"""Write the crafted attack files of issue 27 (docs/untrusted-models.md) and their manifest.

    python3 python/crafted.py OUTDIR

Every file is built from scratch here (Python 3 standard library only), in the formats of
docs/tvm-format.md (module blob §2, Relax executable §3-§4, constant pool §5) wrapped the way
docs/code-free.md §2 describes (`lib0.c` + `devc.c` in a `.tar`, the blob as a C array), or as a
minimal ELF64 relocatable object. The layout mirrors runtime/src/vm/craft.rs; nothing is
imported from it. Output is deterministic: the same files and manifest byte for byte.

OUTDIR/manifest.json lists, for each file, what loading it code-free and calling `main` must
give: `expect` "ok" or "error", the error code name and number (`mote::ErrorCode`), a message
fragment, the budget named (for ResourceExhausted), extra `mote run` arguments, the wall-time
and peak-RSS bounds, and whether the C ABI and RPC passes run it too.
"""

import json
import os
import struct
import sys
import zlib

# mote::ErrorCode (runtime/src/error.rs): the numbers every binding shares.
CODES = {"Io": 1, "Load": 2, "Format": 3, "Unsupported": 4, "Vm": 13, "OutOfMemory": 14,
         "Subgraph": 15, "ResourceExhausted": 18, "Cancelled": 19}

# Opcodes (docs/tvm-format.md §4.2), argument kinds (§4.4), special registers (§4.3).
CALL, RET, GOTO = 1, 2, 3
REG, IMM, CONST, FUNC = 0, 1, 2, 3
VOID = 1 << 54
VM_REG = VOID + 1
# Constant-pool tags (§5.1) and the tensor record's magic (§5.2).
TAG_DTYPE, TAG_STR, TAG_SHAPE, TAG_TENSOR = 5, 65, 69, 70
TENSOR_MAGIC = 0xDD5E40F096B4A13F
EXEC_MAGIC = 0xD225DE2F4214151E
BLOB_SUFFIX = "__tvm_ffi__library_bin"
# DLDataType {code, bits, lanes} (§6.3).
DTYPES = {"float32": (2, 32), "float64": (2, 64), "uint8": (1, 8), "int8": (0, 8), "int32": (0, 32)}


def arg(kind, v):
    return (kind << 56) | (v & ((1 << 56) - 1))


def s_(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def dtype_bytes(name):
    code, bits = DTYPES[name]
    return struct.pack("<BBH", code, bits, 1)


def const_record(c):
    """One constant-pool entry (§5.1): ("str", s), ("shape", dims), ("dtype", name) or
    ("tensor", dtype, shape, data bytes)."""
    kind = c[0]
    if kind == "str":
        return struct.pack("<i", TAG_STR) + s_(c[1])
    if kind == "shape":
        return struct.pack("<iQ", TAG_SHAPE, len(c[1])) + b"".join(struct.pack("<q", d) for d in c[1])
    if kind == "dtype":
        return struct.pack("<i", TAG_DTYPE) + dtype_bytes(c[1])
    if kind == "tensor":
        _, dt, shape, data = c
        out = struct.pack("<iQQiii", TAG_TENSOR, TENSOR_MAGIC, 0, 1, 0, len(shape)) + dtype_bytes(dt)
        out += b"".join(struct.pack("<q", d) for d in shape)
        return out + struct.pack("<q", len(data)) + data
    raise ValueError(kind)


def executable(table, consts=()):
    """The relax.VMExecutable payload (§3): `table` holds ("vm", name, params, registers, code)
    and ("packed", name) entries; code is a list of ("call", dst, func, [(kind, v)...]),
    ("ret", reg), ("goto", offset)."""
    out = struct.pack("<Q", EXEC_MAGIC) + s_("0.14")
    words, ranges = [], []
    for e in table:
        if e[0] == "vm":
            start = len(words)
            for ins in e[4]:
                if ins[0] == "call":
                    _, dst, func, args = ins
                    words.append([CALL, dst, func, len(args)] + [arg(k, v) for k, v in args])
                elif ins[0] == "ret":
                    words.append([RET, ins[1]])
                else:
                    words.append([GOTO, ins[1]])
            ranges.append((start, len(words)))
        else:
            ranges.append((0, 0))
    out += struct.pack("<Q", len(table))
    for e, (start, end) in zip(table, ranges):
        if e[0] == "vm":
            _, name, params, registers, _code = e
            out += struct.pack("<i", 1) + s_(name)
            out += struct.pack("<qqqqQ", start, end, len(params), registers, len(params))
            out += b"".join(s_(p) for p in params)
        else:
            out += struct.pack("<i", 0) + s_(e[1]) + struct.pack("<qqqqQ", 0, 0, -2, 0, 0)
    out += struct.pack("<Q", 0)  # memory scopes
    out += struct.pack("<Q", len(consts)) + b"".join(const_record(c) for c in consts)
    out += struct.pack("<Q", len(words))
    at = 0
    for w in words:
        out += struct.pack("<q", at)
        at += len(w)
    out += struct.pack("<Q", at)
    out += b"".join(struct.pack("<q", x if x < (1 << 63) else x - (1 << 64)) for w in words for x in w)
    return out


def blob(exe):
    """The length-prefixed module blob (§2): one relax.VMExecutable, no imports."""
    p = struct.pack("<QQQQ", 2, 0, 0, 0) + s_("relax.VMExecutable") + s_(exe)
    return struct.pack("<Q", len(p)) + p


def tar_header(name, size):
    h = bytearray(512)
    h[: len(name)] = name.encode()
    h[100:108] = b"0000644\0"
    h[124:136] = b"%011o\0" % size
    h[136:148] = b"00000000000\0"
    h[156] = ord("0")
    h[257:263] = b"ustar\0"
    h[263:265] = b"00"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def tar(members):
    out = b""
    for name, data in members:
        out += tar_header(name, len(data)) + data
        out += b"\0" * (-len(out) % 512)
    return out + b"\0" * 1024


def code_free_tar(b):
    """The `.tar` export_library writes for a model without kernels (docs/code-free.md §2)."""
    devc = ("TVM_EXPORT extern const unsigned char __tvm_ffi__library_bin[];\n"
            "const unsigned char __tvm_ffi__library_bin[%d] = {\n  %s\n};\n"
            % (len(b), ",".join("0x%02x" % x for x in b)))
    return tar([("lib0.c", b";"), ("devc.c", devc.encode())])


def model(table, consts=()):
    return code_free_tar(blob(executable(table, consts)))


def gzip_bytes(chunks):
    """A gzip stream (mtime 0, so deterministic) of the concatenated chunks."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(z.compress(c) for c in chunks) + z.flush()


# ------------------------------------------------------------------------------------------
# The attacks
# ------------------------------------------------------------------------------------------

def endless_loop():
    """main() { loop: goto loop }: only max_instructions or an interrupt ends it."""
    return model([("vm", "main", [], 1, [("goto", 0), ("ret", 0)])])


def self_recursion(registers):
    """main(n) { return main(n) } with `registers` registers per frame."""
    return model([("vm", "main", [], registers, [("call", 0, 0, []), ("ret", 0)])])


def subgraph_model(desc, tensors, out_shape, out_dtype):
    """main() calling mote.subgraph(desc, inputs..., constants..., output) the way an offload-zoo
    model does (alloc_storage + alloc_tensor for the output, weights as tensor constants); here
    the region's input is a constant too, so that `main` takes no arguments."""
    esize = DTYPES[out_dtype][1] // 8
    nbytes = esize
    for d in out_shape:
        nbytes *= d
    consts = [("str", json.dumps(desc, separators=(",", ":"))),
              ("shape", [nbytes]), ("dtype", "uint8"), ("str", "global"),
              ("shape", list(out_shape)), ("dtype", out_dtype)]
    targs = []
    for dt, shape, data in tensors:
        targs.append((CONST, len(consts)))
        consts.append(("tensor", dt, shape, data))
    table = [
        ("vm", "main", [], 3, [
            ("call", 0, 1, [(REG, VM_REG), (CONST, 1), (IMM, 0), (CONST, 2), (CONST, 3)]),
            ("call", 1, 2, [(REG, 0), (IMM, 0), (CONST, 4), (CONST, 5)]),
            ("call", VOID, 3, [(CONST, 0)] + targs + [(REG, 1)]),
            ("ret", 1),
        ]),
        ("packed", "vm.builtin.alloc_storage"),
        ("packed", "vm.builtin.alloc_tensor"),
        ("packed", "mote.subgraph"),
    ]
    return model(table, consts)


def region(op, attrs, ts):
    """A one-node description (docs/subgraph-format.md): tensor 0 the input, 1 the weight,
    2 the output."""
    return {"format": "mote.subgraph", "version": 1, "target": "acl", "name": "crafted",
            "tensors": [dict(shape=s, dtype=d, **({"quant": q} if q else {})) for s, d, q in ts],
            "inputs": [0], "constants": [1], "outputs": [2],
            "nodes": [{"op": op, "name": "n", "inputs": [0, 1], "outputs": [2], "attrs": attrs}]}


def zeros_of(shape, dtype):
    n = DTYPES[dtype][1] // 8
    for d in shape:
        n *= d
    return b"\0" * n


def subgraph_file(op, attrs, ts):
    desc = region(op, attrs, ts)
    data = [(d, s, zeros_of(s, d)) for s, d, _ in ts[:2]]
    if op == "dense" and ts[0][1] == "float32" and all(ts[0][0]) and all(ts[1][0]):
        # The valid control region: real numbers, so its output is checked.
        data = [("float32", ts[0][0], struct.pack("<8f", *range(1, 9))),
                ("float32", ts[1][0], struct.pack("<12f", *([1.0] * 12)))]
    return subgraph_model(desc, data, ts[2][0], ts[2][1])


def elf_many_blobs(count, pad, distinct=True):
    """An ELF64 relocatable object whose .symtab defines `count` blob symbols, each with its own
    prefix (`pad` bytes long), all pointing at one 16-byte .data: the symbol table is the
    attack (docs/untrusted-models.md §2: a one-pass check, a short message)."""
    data = struct.pack("<Q", 8) + b"\0" * 8
    strtab = bytearray(b"\0")
    syms = bytearray(b"\0" * 24)
    for i in range(count):
        name = ("m%07d_" % (i if distinct else 0) + "x" * pad + BLOB_SUFFIX).encode()
        off = len(strtab)
        strtab += name + b"\0"
        # st_name, st_info (GLOBAL OBJECT), st_other, st_shndx 1 (.data), st_value, st_size
        syms += struct.pack("<IBBHQQ", off, 0x11, 0, 1, 0, len(data))
    shstr = b"\0.data\0.symtab\0.strtab\0.shstrtab\0"
    names = {n: shstr.index(n.encode() + b"\0") for n in (".data", ".symtab", ".strtab", ".shstrtab")}
    body = bytearray(b"\0" * 64)

    def place(b, align):
        body.extend(b"\0" * (-len(body) % align))
        at = len(body)
        body.extend(b)
        return at

    o_data = place(data, 8)
    o_sym = place(bytes(syms), 8)
    o_str = place(bytes(strtab), 1)
    o_shs = place(shstr, 1)
    shdr = lambda name, typ, flags, off, size, link=0, info=0, align=1, ent=0: struct.pack(
        "<IIQQQQIIQQ", name, typ, flags, 0, off, size, link, info, align, ent)
    o_sh = place(b"".join([
        b"\0" * 64,
        shdr(names[".data"], 1, 3, o_data, len(data), align=8),
        shdr(names[".symtab"], 2, 0, o_sym, len(syms), link=3, info=1, align=8, ent=24),
        shdr(names[".strtab"], 3, 0, o_str, len(strtab)),
        shdr(names[".shstrtab"], 3, 0, o_shs, len(shstr)),
    ]), 8)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    body[:64] = ident + struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, o_sh, 0, 64, 0, 0, 64, 5, 4)
    return bytes(body)


def gzip_bomb(inflated):
    """A gzip-compressed tar: one member of `inflated` zero bytes (about 1 MB per GiB)."""
    chunk = b"\0" * (16 << 20)

    def chunks():
        yield tar_header("zeros.bin", inflated)
        left = inflated
        while left:
            n = min(left, len(chunk))
            yield chunk if n == len(chunk) else chunk[:n]
            left -= n
        yield b"\0" * (-inflated % 512 + 1024)
    return gzip_bytes(chunks())


def gzip_zeros(n):
    chunk = b"\0" * (16 << 20)
    return gzip_bytes(chunk for _ in range(n // len(chunk)))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: crafted.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    files = {}
    entries = []

    def add(name, data, expect, code=None, message="", budget=None, args=(), time_s=10,
            rss_mib=200, c_abi=True, rpc=True, truncate=False, note=""):
        files[name] = data
        e = {"file": name, "expect": expect, "args": list(args), "time_s": time_s,
             "rss_mib": rss_mib, "c_abi": c_abi, "rpc": rpc, "note": note}
        if expect == "error":
            e.update(code=code, code_num=CODES[code], message=message)
            if budget:
                e["budget"] = budget
        entries.append(e)
        if truncate:
            # Cut points: inside the first header, inside the first member, half way, and just
            # before the end of the last member's data (a tar keeps its end marker after it).
            n = len(data)
            last = n - 1024 - 700 if name.endswith(".tar") else n - 9
            for cut in sorted({100, 600, n // 2, last}):
                if 0 < cut < n:
                    add("%s.cut%d" % (name, cut), data[:cut], "error", "Format", c_abi=c_abi,
                        message="malformed model",
                        rpc=False, note="truncation of " + name)

    # 1. Zero-sized dimensions in offloaded regions: refused when the description is parsed.
    q = lambda zp: {"scale": [0.5], "zero_point": [zp]}
    u, i8 = q(128), q(3)
    zero_cases = [
        ("subgraph_qdense_n0.tar", "dense", {}, [([2, 4], "uint8", u), ([0, 4], "int8", i8), ([2, 0], "uint8", u)], ()),
        ("subgraph_qdense_k0.tar", "dense", {}, [([2, 0], "uint8", u), ([3, 0], "int8", i8), ([2, 3], "uint8", u)], ()),
        ("subgraph_qconv_cin0.tar", "conv2d", {"layout": "NHWC"},
         [([1, 4, 4, 0], "uint8", u), ([3, 1, 1, 0], "int8", i8), ([1, 4, 4, 3], "uint8", u)], ()),
        ("subgraph_conv_batch0.tar", "conv2d", {"layout": "NCHW", "padding": [1, 1, 1, 1]},
         [([0, 3, 5, 5], "float32", None), ([4, 3, 3, 3], "float32", None), ([0, 4, 5, 5], "float32", None)],
         ("--threads", "2")),
        ("subgraph_dense_k0.tar", "dense", {}, [([2, 0], "float32", None), ([3, 0], "float32", None),
                                                        ([2, 3], "float32", None)], ()),
    ]
    for name, op, attrs, ts, args in zero_cases:
        add(name, subgraph_file(op, attrs, ts), "error", "Subgraph", message="zero-sized", args=args)
    # The same writer with non-zero dimensions: a region that loads and runs (x @ 1^T = row sums).
    control = subgraph_file("dense", {}, [([2, 4], "float32", None), ([3, 4], "float32", None),
                                          ([2, 3], "float32", None)])
    add("subgraph_dense_ok.tar", control, "ok", message="out0: float32 [2, 3] [10.000000, 10.000000, 10.000000, 26.000000",
        truncate=True)

    # 2. Decompression bombs: a 1 MB gzip tar inflating to more than 1 GiB, and gzip of zeros.
    add("gzip_bomb.tar.gz", gzip_bomb((1 << 30) + (64 << 20)), "error", "ResourceExhausted",
        message="inflates past the load's budget", budget="LoadOptions::memory_budget",
        rss_mib=120, note="about 1 MB, inflates to 1.06 GiB; default load budget 16x + 64 MiB")
    add("gzip_zeros.gz", gzip_zeros(1 << 30), "error", "Format",
        message="does not hold a tar archive", note="1 GiB of zeros, refused after one block")
    # A valid gzip tar: loads with the default budget, refused with --load-budget 4096.
    ctl_gz = gzip_bytes([control])
    add("subgraph_dense_ok.tar.gz", ctl_gz, "ok", message="out0: float32 [2, 3]", truncate=True)
    add("subgraph_dense_ok_budget.tar.gz", ctl_gz, "error", "ResourceExhausted",
        message="inflates past the load's budget of 4096 bytes", budget="LoadOptions::memory_budget",
        args=("--load-budget", "4096"), c_abi=False, rpc=False)

    # 3. 2^20 registers per frame, recursing: stopped at the second frame.
    add("registers_2p20.tar", self_recursion(1 << 20), "error", "ResourceExhausted",
        message="registers", budget="SessionOptions::max_registers", truncate=True)
    # 4. A one-instruction backward Goto: the execution budget (small, then the default 2^28).
    loop = endless_loop()
    add("endless_loop.tar", loop, "error", "ResourceExhausted", message="instructions",
        budget="SessionOptions::max_instructions", args=("--max-instructions", "100000"),
        time_s=5, c_abi=False, rpc=False, truncate=True)
    add("endless_loop_default.tar", loop, "error", "ResourceExhausted",
        message="budget of 268435456 instructions", budget="SessionOptions::max_instructions",
        time_s=30, note="the default budget, 2^28 instructions")
    # 5. Endless recursion with few registers: the stack budget.
    add("recursion.tar", self_recursion(2), "error", "ResourceExhausted", message="stack budget",
        budget="SessionOptions::stack_budget_bytes", truncate=True)
    # 6. An 8 MB ELF object with 90,000 blob symbols of distinct prefixes.
    add("many_blobs.o", elf_many_blobs(90000, 40), "error", "Unsupported",
        message="more than one module blob", time_s=5, truncate=True,
        note="the check stops at the second prefix; the message names two, clipped")
    # The same table with one prefix throughout: every symbol is looked at once, then the
    # 16-byte blob they all name is refused.
    add("many_blobs_one_prefix.o", elf_many_blobs(90000, 40, distinct=False), "error", "Format",
        message="malformed model", time_s=5)

    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    for e in entries:
        e["bytes"] = len(files[e["file"]])
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"codes": CODES, "files": entries}, f, indent=1, sort_keys=True)
        f.write("\n")
    print("crafted.py: %d files in %s" % (len(entries), out))


if __name__ == "__main__":
    main()
