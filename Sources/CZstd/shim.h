#ifndef LANSYNC_CZSTD_SHIM_H
#define LANSYNC_CZSTD_SHIM_H

// zstd's one-shot ZSTD_compress/ZSTD_decompress are all LANSync uses: plain functions, no shims needed.
#include <zstd.h>

#endif
