#ifndef LANSYNC_CZLIB_SHIM_H
#define LANSYNC_CZLIB_SHIM_H

// zlib's one-shot compress2/uncompress are all LANSync uses: plain functions, no shims needed.
#include <zlib.h>

#endif
