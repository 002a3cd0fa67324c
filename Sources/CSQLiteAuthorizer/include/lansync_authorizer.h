#ifndef LANSYNC_AUTHORIZER_H
#define LANSYNC_AUTHORIZER_H

#include <sqlite3.h>

/// A policy consulted before a connection's own authorizer: SQLITE_OK lets the action on to that
/// authorizer; SQLITE_DENY or SQLITE_IGNORE is the verdict.
typedef int (*lansync_authorizer_policy)(void *context, int action, const char *argument1, const char *argument2,
                                         const char *database, const char *trigger);

/// Puts `policy` (with `context`) in front of `db`'s authorizer, or takes it away with NULL.
///
/// SQLite keeps one authorizer per connection and GRDB sets its own on every connection it opens
/// (it learns from it what each statement reads and writes, for observation and its schema cache),
/// with no hook for another. This file therefore defines `sqlite3_set_authorizer` itself: whoever
/// sets an authorizer (GRDB) gets it called behind the policy, unchanged. Like setting an
/// authorizer, this expires the connection's prepared statements: set the policy once, as the
/// connection opens, and switch what it allows in the policy's own state. Returns SQLITE_OK, or
/// SQLITE_NOMEM.
int lansync_authorizer_set_policy(sqlite3 *db, lansync_authorizer_policy policy, void *context);

/// The context given with the policy `db` has, or NULL.
void *lansync_authorizer_policy_context(sqlite3 *db);

#endif
