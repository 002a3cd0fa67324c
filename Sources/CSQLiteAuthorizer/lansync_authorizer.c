// Lets LANSync refuse what an app's SQL may not do (AppSQLGuard) where SQLite decides, at
// statement compilation, without taking GRDB's authorizer away: see lansync_authorizer.h.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "lansync_authorizer.h"

typedef int (*authorizer_function)(void *, int, const char *, const char *, const char *, const char *);
typedef int (*set_authorizer_function)(sqlite3 *, authorizer_function, void *);

/// What one connection has: the authorizer its owner set, and the policy in front of it.
struct slot {
    sqlite3 *db;
    _Atomic(authorizer_function) inner;
    _Atomic(void *) inner_context;
    _Atomic(lansync_authorizer_policy) policy;
    _Atomic(void *) policy_context;
    struct slot *next;
};

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
/// One slot a connection address, kept for the life of the process: a closed connection's address
/// is reused by a later one, whose first `sqlite3_set_authorizer` or policy takes the slot over.
static struct slot *slots;

static set_authorizer_function real_set_authorizer(void) {
    static _Atomic(set_authorizer_function) real;
    set_authorizer_function found = atomic_load(&real);
    if (!found) {
        found = (set_authorizer_function)dlsym(RTLD_NEXT, "sqlite3_set_authorizer");
        atomic_store(&real, found);
    }
    return found;
}

static int composite(void *context, int action, const char *argument1, const char *argument2, const char *database,
                     const char *trigger) {
    struct slot *slot = context;
    lansync_authorizer_policy policy = atomic_load(&slot->policy);
    if (policy) {
        int verdict = policy(atomic_load(&slot->policy_context), action, argument1, argument2, database, trigger);
        if (verdict != SQLITE_OK) return verdict;
    }
    authorizer_function inner = atomic_load(&slot->inner);
    return inner ? inner(atomic_load(&slot->inner_context), action, argument1, argument2, database, trigger) : SQLITE_OK;
}

/// The slot of `db`, or NULL. Call with `slots_lock` held.
static struct slot *find_slot(sqlite3 *db) {
    struct slot *slot = slots;
    while (slot && slot->db != db) slot = slot->next;
    return slot;
}

/// The slot of `db`, made if missing (NULL when memory is short).
static struct slot *slot_of(sqlite3 *db) {
    pthread_mutex_lock(&slots_lock);
    struct slot *slot = find_slot(db);
    if (!slot && (slot = calloc(1, sizeof *slot))) {
        slot->db = db;
        slot->next = slots;
        slots = slot;
    }
    pthread_mutex_unlock(&slots_lock);
    return slot;
}

int sqlite3_set_authorizer(sqlite3 *db, authorizer_function function, void *context) {
    set_authorizer_function real = real_set_authorizer();
    if (!real) return SQLITE_ERROR;
    struct slot *slot = slot_of(db);
    if (!slot) return real(db, function, context);
    atomic_store(&slot->inner, function);
    atomic_store(&slot->inner_context, context);
    // A connection's owner sets its authorizer once, as it opens: a policy left from a closed
    // connection at this address is not this one's.
    atomic_store(&slot->policy, NULL);
    atomic_store(&slot->policy_context, NULL);
    return real(db, composite, slot);
}

int lansync_authorizer_set_policy(sqlite3 *db, lansync_authorizer_policy policy, void *context) {
    set_authorizer_function real = real_set_authorizer();
    if (!real) return SQLITE_ERROR;
    struct slot *slot = slot_of(db);
    if (!slot) return SQLITE_NOMEM;
    atomic_store(&slot->policy_context, context);
    atomic_store(&slot->policy, policy);
    // Installs the composite in case nobody set an authorizer on this connection through this file
    // (this expires the connection's prepared statements: set a policy as a connection opens).
    return real(db, composite, slot);
}

void *lansync_authorizer_policy_context(sqlite3 *db) {
    pthread_mutex_lock(&slots_lock);
    struct slot *slot = find_slot(db);
    void *context = slot && atomic_load(&slot->policy) ? atomic_load(&slot->policy_context) : NULL;
    pthread_mutex_unlock(&slots_lock);
    return context;
}
