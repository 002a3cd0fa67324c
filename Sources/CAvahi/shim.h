#ifndef LANSYNC_CAVAHI_SHIM_H
#define LANSYNC_CAVAHI_SHIM_H

// libavahi-client: talks to the system's avahi-daemon over D-Bus. Only the non-variadic calls
// are usable from Swift (`avahi_entry_group_add_service_strlst`, `avahi_string_list_add`).
#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-client/publish.h>
#include <avahi-common/address.h>
#include <avahi-common/alternative.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/strlst.h>
#include <avahi-common/thread-watch.h>

#endif
