// An app imports only `LANSync`: the value types of the layers below (Entry, PreferenceWrite,
// DeviceID, EntryQuery, StoreStatus, …) come with it.
@_exported public import LANSyncCore
@_exported public import LANSyncIdentity
@_exported public import LANSyncStore
