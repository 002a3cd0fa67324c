public import LANSyncCore

/// An entry to append locally. Validated by the caller (names, JSON) before it reaches the store.
public struct AppendRequest: Sendable {
    /// A caller-chosen id for idempotent retries, or nil for a generated time-ordered id.
    public var id: String?
    /// The stream to append to.
    public var stream: String
    /// Compact JSON text.
    public var payload: String

    /// An append of `payload` (JSON text) to `stream`, under `id` or a new UUIDv7.
    public init(id: String? = nil, stream: String, payload: String) {
        self.id = id
        self.stream = stream
        self.payload = payload
    }
}

/// A preference to set locally: compact JSON text, or nil to unset it (a tombstone).
package struct PreferenceRequest: Sendable {
    package var key: String
    package var value: String?

    package init(key: String, value: String?) {
        self.key = key
        self.value = value
    }
}

/// The rows a merge added or changed, for change observers.
package struct MergeResult: Sendable {
    package var entries: [Entry] = []
    package var preferences: [PreferenceWrite] = []
    /// App-table changes that changed a row.
    package var rows: [RowChange] = []
    /// Replicas whose range in the delta did not count (its version vector entry did not move):
    /// (a signed merge) it could not be verified yet — it starts past what this replica holds,
    /// or its writer's key is not known here yet. The sender should send them again from where
    /// this replica stands.
    package var rangesNotTaken: Set<ReplicaID> = []
    /// Replicas whose ranges counted with loss claims that have not happened here yet (open
    /// claims: the superseding change comes later).
    package var claimsOpened: Set<ReplicaID> = []

    package init() {}

    package var outcome: MergeOutcome {
        MergeOutcome(entriesAdded: entries.count, preferencesChanged: preferences.count, rowsChanged: rows.count)
    }
}

/// What `status` shows about a replica.
public struct StoreStatus: Sendable, Equatable {
    /// This replica's ID.
    public let replica: ReplicaID
    /// This device's ID.
    public let device: DeviceID
    /// Entries held, every stream.
    public let entries: Int
    /// Preferences holding a value (tombstones excluded; a node also leaves out the group's member records).
    public let preferences: Int
    /// Preference keys that were unset (tombstones), kept so the unset reaches every peer.
    public let tombstones: Int
    /// Streams with at least one entry.
    public let streams: Int
    /// The state digest: equal digests mean equal replicas.
    public let digest: StateDigest
    /// What this replica holds, per replica.
    public let versionVector: VersionVector
    /// The replica's clock: the latest reading it issued or saw.
    public let hlc: HybridTimestamp
    /// App tables and their row counts.
    public let tables: [AppTableCount]
}

/// Which entries to list.
public struct EntryQuery: Sendable {
    /// Only this stream; nil for every stream.
    public var stream: String?
    /// Entries written at or after this wall-clock time, milliseconds since the Unix epoch.
    public var since: Int64?
    /// Entries written before this wall-clock time, milliseconds since the Unix epoch.
    public var until: Int64?
    /// At most this many entries, the oldest first; nil for all.
    public var limit: Int?

    /// A query of the entries of `stream` (every stream when nil) written in `since`..<`until`, at most `limit`.
    public init(stream: String? = nil, since: Int64? = nil, until: Int64? = nil, limit: Int? = nil) {
        self.stream = stream
        self.since = since
        self.until = until
        self.limit = limit
    }
}
