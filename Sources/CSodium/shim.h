#ifndef LANSYNC_CSODIUM_SHIM_H
#define LANSYNC_CSODIUM_SHIM_H

// The whole of libsodium's public API. No inline shims are needed yet: every function used from
// Swift is a plain (non-variadic, non-macro) C function, and the size constants import as macros.
#include <sodium.h>

#endif
