/* SwiftPM needs one source file in a C target; the target exists for its header (include/). */
#include "mote_rpcFFI.h"
