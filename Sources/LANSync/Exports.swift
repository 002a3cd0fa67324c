// An app imports only `LANSync`. The layers below declare what only LANSync's own targets use
// (the store, merge, deltas, clocks, group secrets, the wire) at `package` access, so these
// re-exports bring an app the value types it meets and nothing else: Entry, PreferenceWrite,
// DeviceID, ReplicaID, Dot, HybridTimestamp, StateDigest and VersionVector (read-only),
// DeviceIdentity, AppendRequest, EntryQuery and StoreStatus. `scripts/public-api` lists the
// whole public API; docs/public-api.txt is the reviewed copy that the test command compares.
@_exported public import LANSyncCore
@_exported public import LANSyncIdentity
@_exported public import LANSyncStore
