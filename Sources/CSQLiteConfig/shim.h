#ifndef LANSYNC_CSQLITECONFIG_SHIM_H
#define LANSYNC_CSQLITECONFIG_SHIM_H

#include <sqlite3.h>

// sqlite3_config is variadic, which Swift cannot call: one non-variadic wrapper per setting used.

/// Turns off SQLite's memory statistics. Returns SQLITE_MISUSE, changing nothing, once SQLite is
/// initialized (after the first connection in the process opened).
static inline int lansync_sqlite3_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif
