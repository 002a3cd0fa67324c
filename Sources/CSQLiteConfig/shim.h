#ifndef LANSYNC_CSQLITECONFIG_SHIM_H
#define LANSYNC_CSQLITECONFIG_SHIM_H

#include <sqlite3.h>

// sqlite3_config is variadic, which Swift cannot call: one non-variadic wrapper per setting used.

/// Turns off SQLite's memory statistics. Returns SQLITE_MISUSE, changing nothing, once SQLite is
/// initialized (after the first connection in the process opened).
static inline int lansync_sqlite3_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

// The pre-update hook: how LANSync captures what an app's statements do to its tables (see
// AppWriteCapture). Debian's libsqlite3 is built with SQLITE_ENABLE_PREUPDATE_HOOK (`PRAGMA
// compile_options` lists it), but sqlite3.h declares these functions only when the including
// code defines that macro too. A libsqlite3 built without them fails at link time.
#ifndef SQLITE_ENABLE_PREUPDATE_HOOK
void *sqlite3_preupdate_hook(
    sqlite3 *db,
    void (*xPreUpdate)(void *context, sqlite3 *db, int operation, char const *database, char const *table,
                       sqlite3_int64 oldRowid, sqlite3_int64 newRowid),
    void *context);
int sqlite3_preupdate_old(sqlite3 *db, int column, sqlite3_value **value);
int sqlite3_preupdate_new(sqlite3 *db, int column, sqlite3_value **value);
int sqlite3_preupdate_count(sqlite3 *db);
#endif

#endif
