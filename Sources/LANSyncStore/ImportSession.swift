import GRDB
package import LANSyncCore

/// Feeds rows into one write transaction during an import; nothing is visible until it commits.
package struct ImportSession {
    var context: WriteContext
    package private(set) var outcome = MergeOutcome()
    private var coverage: [Delta.Coverage] = []
    private var newest = HybridTimestamp.zero

    init(context: WriteContext) { self.context = context }

    package mutating func merge(_ entry: Entry) throws {
        if try context.mergeEntry(entry) { outcome.entriesAdded += 1 }
        newest = max(newest, entry.hlc)
    }

    package mutating func merge(_ write: PreferenceWrite) throws {
        if try context.mergePreference(write) { outcome.preferencesChanged += 1 }
        newest = max(newest, write.hlc)
    }

    package mutating func merge(_ change: RowChange) throws {
        if try context.mergeRow(change, materialize: true) { outcome.rowsChanged += 1 }
        newest = max(newest, change.hlc)
    }

    /// Declares the exported replica's version vector: the import covers it from zero.
    package mutating func cover(_ vector: VersionVector) {
        coverage = vector.counters.map { Delta.Coverage(replica: $0.key, from: 0, through: $0.value) }
    }

    mutating func finish() throws {
        context.observe(newest)
        try context.advance(by: coverage)
        try context.save()
    }
}
