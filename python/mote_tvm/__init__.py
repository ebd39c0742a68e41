"""Compile-side plug-in for stock Apache TVM 0.27: offload regions of a Relax module to Mote.

``partition_for_acl`` / ``partition_for_bnns`` replace every region they can offload with one
``R.call_dps_packed("mote.subgraph", (R.str(desc), inputs..., constants...), out_ty=...)``
call whose description follows ``docs/subgraph-format.md`` (format version 1, or 2 when
a region needs its ops, or 3 when its tensors have symbolic dimensions).  Everything
else stays a TVM op and is compiled by TVM as usual.  With ``code_free="report"`` or
``"require"`` they report (or refuse) what would stay in TVM (``tvm_residue``), so a model
can be aimed at Mote's code-free loading (docs/code-free.md).

``mote_tvm.reference`` holds a numpy implementation of the whole format;
``register_reference()`` registers it under ``mote.subgraph`` so that TVM's own VM can run a
partitioned module (a second oracle next to the unpartitioned model).
"""

from .partition import (  # noqa: F401
    FORMAT_VERSION,
    SUBGRAPH_FUNC,
    NotCodeFree,
    partition_for_acl,
    partition_for_bnns,
    subgraph_descriptions,
    tvm_residue,
)
from .reference import register_reference, run_description  # noqa: F401

__all__ = [
    "FORMAT_VERSION",
    "SUBGRAPH_FUNC",
    "NotCodeFree",
    "partition_for_acl",
    "partition_for_bnns",
    "subgraph_descriptions",
    "tvm_residue",
    "register_reference",
    "run_description",
]
