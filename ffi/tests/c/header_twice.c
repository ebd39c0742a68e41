/* The header compiles alone, twice in one unit, as C and as C++ (see scripts/test-ffi.sh). */
#include "mote.h"
#include "mote.h"

int header_twice_probe(void) { return MOTE_ABI_VERSION + MOTE_ERROR_CODE_INTERNAL; }
